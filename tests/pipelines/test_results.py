"""The typed boundary: every command's `--json` object, in every refresh mode and for every
kind of failure, matches the schema generated from its type; the schemas committed under
docs/schemas are the generated ones; the settings that reach a run as a resource (the API key)
never land in the instance's records."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from centsync.pipelines.results import (
    COMMANDS,
    ReconcileResult,
    RefreshResult,
    WritebackResult,
    json_schemas,
)

from .conftest import HttpEnv
from .statements import ofx_statement

pytestmark = pytest.mark.e2e


def _valid(command: str, data: dict[str, Any]) -> None:
    schema = json_schemas()[command]
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(data, schema)


def _last(out: str) -> dict[str, Any]:
    return json.loads(out.strip().splitlines()[-1])


def test_every_refresh_mode_matches_the_schema_and_says_what_was_asked(http_env: HttpEnv) -> None:
    first = http_env.refresh()
    (month,) = http_env.sql("SELECT strftime(max(booked_at), '%Y-%m') FROM core.transactions")[0]
    runs = {
        "first sync": first,
        "incremental": http_env.refresh(),
        "hot": http_env.refresh("--hot"),
        "months": http_env.refresh("--months", f"{month}..{month}"),
        "full": http_env.refresh("--full"),
    }
    for report in runs.values():
        _valid("refresh", report)
        assert report["exit_code"] == 0 and report["run_id"] and report["seconds"] >= 0
        assert report["durations"]["total_seconds"] > 0
        assert RefreshResult.from_json(report).verdict == report["verdict"] == "agree"
    done = {name: (r["asked"], r["mode"]) for name, r in runs.items()}
    assert done == {
        "first sync": ("auto", "full"),
        "incremental": ("auto", "incremental"),
        "hot": ("hot", "hot"),
        "months": ("months", "months"),
        "full": ("full", "full"),
    }
    # the published schema knows the four things a refresh does, and nothing else
    mode = json.loads(Path(_schema_folder() / "refresh.json").read_text("utf-8"))
    assert set(mode["properties"]["mode"]["enum"]) == {"full", "incremental", "hot", "months"}


def test_every_command_matches_its_schema_and_the_key_stays_out(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CENTSYNC_API_KEY", http_env.sb.keys["read_write"])
    http_env.refresh()
    seen: dict[str, dict[str, Any]] = {}

    code, seen["reconcile"] = http_env.reconcile()
    assert code == 0 and seen["reconcile"]["exit_code"] == 0
    assert ReconcileResult.from_json(seen["reconcile"]).recon_id == seen["reconcile"]["recon_id"]

    rules = http_env.tmp / "rules.toml"
    rules.write_text(
        '[[rule]]\nid = "coffee"\nconcept = "(?i)starbucks"\nset = { notes = "coffee" }\n', "utf-8"
    )
    code, out = http_env.cli("rules", str(rules), "--dry-run", "--json")
    seen["rules"] = _last(out)
    assert code == 0 and seen["rules"]["changes"], out

    day = dt.date.today() - dt.timedelta(days=3)
    statement = http_env.tmp / "statement.ofx"
    statement.write_bytes(ofx_statement("000123456789", [("F-1", day, "-13.37", "BK Shop")]))
    account = "000123456789=Everyday Checking"
    code, out = http_env.cli("import", str(statement), "--account", account, "--json")
    seen["import"] = _last(out)
    assert code == 0 and len(seen["import"]["files"][0]["new"]) == 1, out

    code, out = http_env.cli("writeback", "--dry-run", "--json")
    seen["writeback"] = _last(out)
    assert code == 0 and seen["writeback"]["run_id"] is None
    assert WritebackResult.from_json(seen["writeback"]).dry_run
    code, out = http_env.cli("writeback", "--json")
    posted = _last(out)
    assert code == 0 and posted["sent"] == 1 and posted["run_id"], out
    _valid("writeback", posted)

    for command in ("status", "doctor", "changes"):
        code, out = http_env.cli(command, "--json")
        seen[command] = _last(out)
        assert code == 0, out
    code, out = http_env.cli("schedule", "list", "--json")
    seen["schedule"] = _last(out)
    assert code == 0, out
    code, out = http_env.cli("writeback", "--rejected", "--json")
    seen["writeback-rejected"] = _last(out)
    assert code == 0 and seen["writeback-rejected"]["rows"] == [], out

    # refresh: every mode, above; refresh --all and lake: test_owners_e2e; --plan: test_plan_e2e
    assert set(seen) == set(COMMANDS) - {"refresh", "refresh-all", "refresh-plan", "lake"}
    for command, data in seen.items():
        _valid(command, data)
        assert data["exit_code"] == 0 and data["warehouse"] == str(http_env.warehouse), command

    key = http_env.sb.keys["read_write"].encode()
    home = Path(http_env.env["DAGSTER_HOME"])
    holding = [p for p in home.rglob("*") if p.is_file() and key in p.read_bytes()]
    assert not holding, holding  # not in the run config, the event log or the logs


def test_failures_print_the_documented_object(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A usage error, a missing warehouse, a refused key: each `--json` is a failure's object
    (every exit code's is held to it in test_exit_codes.py)."""
    code, out = http_env.cli("refresh", "--full", "--hot", "--json")
    usage = _last(out)
    assert code == 2 == usage["exit_code"] and usage["status"] == "failed"
    code, out = http_env.cli("status", "--json")
    missing = _last(out)
    assert code == 6 == missing["exit_code"], out
    monkeypatch.setenv("CENTSYNC_API_KEY", "sk_test_" + "0" * 32)
    code, out = http_env.cli("refresh", "--json")
    refused = _last(out)
    assert code == 3 == refused["exit_code"] and refused["run_id"], out
    for failure in (usage, missing, refused):
        _valid("failure", failure)


def test_a_result_survives_its_round_trip() -> None:
    result = WritebackResult(sent=2, rejected=1, counts={"sent": 2})
    assert WritebackResult.from_json(json.loads(json.dumps(result.to_json()))) == result
    assert result.bad == 1


def _schema_folder() -> Path:
    return Path(__file__).resolve().parents[2] / "docs" / "schemas"


def test_the_committed_json_schemas_are_what_centsync_docs_generates() -> None:
    from centsync.pipelines.results import schema_files

    folder = _schema_folder()
    files = schema_files()
    assert set(files) == {*COMMANDS, "failure"}
    assert {p.stem for p in folder.glob("*.json")} == set(files)
    for command, text in files.items():
        assert (folder / f"{command}.json").read_text("utf-8") == text, "run `centsync docs`"
