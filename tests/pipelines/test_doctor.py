"""`centsync doctor`: all is well on a working set-up; a broken one names its first problem,
with that problem's exit code; the key is never shown."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from centsync.pipelines.results import json_schemas

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def _doctor(http_env: HttpEnv) -> tuple[int, dict[str, Any]]:
    """`doctor --json`'s exit code and object, the object held to its schema."""
    code, out = http_env.cli("doctor", "--json")
    info = json.loads(out)
    jsonschema.validate(info, json_schemas()["doctor"])
    return code, info


def _by_name(info: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in info["checks"]}


def test_a_working_set_up_is_all_well(http_env: HttpEnv) -> None:
    http_env.refresh()
    code, info = _doctor(http_env)
    checks = _by_name(info)
    assert code == 0 and info["status"] == "ok" and info["exit_code"] == 0
    assert list(checks) == [
        "settings", "warehouse", "binding", "service", "tls", "key", "scopes",
        "key_expiry", "allowance", "dagster_home", "schedules", "disk", "private", "alerts",
    ]  # fmt: skip
    assert {c["status"] for c in checks.values()} == {"ok"}
    assert checks["binding"]["value"].startswith(http_env.base_url)
    assert checks["scopes"]["value"] == "data.read"
    assert checks["dagster_home"]["value"] == str(http_env.tmp / "dagster")
    settings = {s["env"]: s["value"] for s in info["settings"]}
    assert settings["CENTSYNC_WAREHOUSE"] == str(http_env.warehouse)
    assert settings["CENTSYNC_API_KEY"] == "set (not shown)"
    # the variable's own value, and centsync's folder named for what it is
    shown = re.fullmatch(r"(.+) \(centsync's folder: (.+)\)", settings["XDG_DATA_HOME"])
    assert shown is not None, settings["XDG_DATA_HOME"]
    assert Path(shown[2]) == Path(shown[1]) / "centsync" and Path(shown[1]).name != "centsync"
    # the allowance says what is left, of what, in which window
    assert re.fullmatch(
        r"[\d,]+ of [\d,]+ left this minute, [\d,]+ of [\d,]+ this hour",
        checks["allowance"]["value"],
    ), checks["allowance"]["value"]
    assert http_env.sb.keys["read_only"] not in json.dumps(info)
    code, text = http_env.cli("doctor")
    assert code == 0 and "All is well." in text and http_env.sb.keys["read_only"] not in text


def test_a_refused_key_is_the_problem_and_exits_3(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CENTSYNC_API_KEY", "sk_wrong_but_secret")
    code, info = _doctor(http_env)
    assert code == 3 and info["exit_code"] == 3
    assert _by_name(info)["key"]["status"] == "fail"
    assert "sk_wrong_but_secret" not in json.dumps(info)
    code, text = http_env.cli("doctor")
    assert code == 3 and "Problem: key:" in text


def test_an_unreachable_service_exits_4(http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CENTSYNC_API_BASE_URL", "http://127.0.0.1:9")
    code, info = _doctor(http_env)
    assert code == 4 and _by_name(info)["service"]["status"] == "fail"
    assert "CENTSYNC_API_BASE_URL" in _by_name(info)["service"]["detail"]


def test_a_warehouse_of_another_source_exits_6(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    http_env.refresh()
    monkeypatch.delenv("CENTSYNC_API_BASE_URL")  # the embedded sandbox: another source
    monkeypatch.delenv("CENTSYNC_API_KEY")
    code, info = _doctor(http_env)
    checks = _by_name(info)
    assert code == 6 and checks["binding"]["status"] == "fail"
    assert checks["service"]["status"] == "warn"  # the embedded sandbox was not started


@pytest.mark.parametrize(
    ("variable", "value", "check"),
    [("CENTSYNC_MAX_WAIT", "soon", "settings"), ("CENTSYNC_ALERT_URL", "nope://x", "settings")],
)
def test_an_unusable_setting_exits_2(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, check: str
) -> None:
    monkeypatch.setenv(variable, value)
    code, info = _doctor(http_env)
    assert code == 2 and _by_name(info)[check]["status"] == "fail"


def test_many_owners_are_told_the_allocator_refresh_all_runs_on(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an owners file, one more check: jemalloc found (`refresh --all` runs on it) or
    glibc's, with how to install it; a household's set-up has no such line (above)."""
    from centsync.pipelines.cli.console import jemalloc

    http_env.refresh()
    owners = http_env.tmp / "owners.toml"
    owners.write_text("", "utf-8")
    monkeypatch.setenv("CENTSYNC_OWNERS_FILE", str(owners))
    code, info = _doctor(http_env)
    check = _by_name(info)["allocator"]
    assert code == 0 and check["status"] == "ok"
    library = jemalloc()
    if library is not None:
        assert check["value"] == f"jemalloc ({library})"
    # a system without it: told how to install it
    monkeypatch.setattr("centsync.pipelines.cli.console.jemalloc", lambda: None)
    code, info = _doctor(http_env)
    check = _by_name(info)["allocator"]
    assert code == 0 and check["value"] == "glibc's malloc" and "libjemalloc2" in check["detail"]
