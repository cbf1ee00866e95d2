"""Every documented exit code, provoked through the real console script (issue 25).

One process per code (or per distinct cause of a code), run in parallel against sandboxes
served over loopback: each must exit with its code, print exactly one JSON object on stdout
with `--json`, and say on stderr what is wrong, naming the setting where one is to blame.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import httpx
import jsonschema
import pytest

from centsync.pipelines import failures as errors
from centsync.pipelines.results import json_schemas
from centsync.sandbox import Sandbox
from centsync.sandbox.server import run_in_thread
from helpers import make_sandbox

pytestmark = pytest.mark.e2e

# A command that fails with a bug, to see what a crash exits with: the group's own handling,
# the same console script (`entry`), no stand-in for anything of centsync's.
CRASH = r"""
import sys, click
from centsync.pipelines.cli import main as cli
from centsync.pipelines.cli.group import JSON_OUTPUT

@cli.main.command("crash")
@click.option("--json", "as_json", is_flag=True)
def crash(as_json):
    JSON_OUTPUT.set(as_json)
    {}["a bug"]

sys.argv = ["centsync", *sys.argv[1:]]
cli.entry()
"""


@dataclass
class Case:
    """One provoked failure: its command, environment, and what must come out."""

    name: str
    code: int
    args: list[str]
    env: dict[str, str]
    says: list[str] = field(default_factory=list)  # on stderr (the message)
    script: str | None = None


@dataclass
class Served:
    sb: Sandbox
    url: str

    def admin(self, method: str, path: str, body: object = None) -> None:
        headers = {"Authorization": f"Bearer {self.sb.keys['admin_token']}"}
        r = httpx.request(method, self.url + path, json=body, headers=headers)
        assert r.status_code < 300, r.text


@pytest.fixture(scope="module")
def served() -> Iterator[dict[str, Served]]:
    """Three sandboxes: a clean one, one whose every answer is a 500, one with an odd row."""
    clean, failing, odd = (make_sandbox(rate_limit=False) for _ in range(3))
    with run_in_thread(clean) as a, run_in_thread(failing) as b, run_in_thread(odd) as c:
        out = {"clean": Served(clean, a), "failing": Served(failing, b), "odd": Served(odd, c)}
        out["failing"].admin("PUT", "/_sandbox/faults", {"error_rate": 1.0})
        victim = next(t for t in odd.state()["transactions"] if t["booked_at"] < "2026-06-01")
        out["odd"].admin("PUT", "/_sandbox/faults", {"corrupt": {victim["id"]: "unknown_type"}})
        yield out


def _base(tmp: Path, name: str) -> dict[str, str]:
    """An environment of its own: nothing of the user's, a warehouse and Dagster home apart."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("CENTSYNC_", "DAGSTER_"))}
    folder = tmp / name
    folder.mkdir()
    return {
        **keep,
        "CENTSYNC_WAREHOUSE": str(folder / "centsync.duckdb"),
        "DAGSTER_HOME": str(folder / "dagster"),
        "CENTSYNC_MAX_WAIT": "2",
    }


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(case: Case) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-c",
        case.script or "from centsync.pipelines.cli.main import entry; entry()",
    ]
    return subprocess.run(
        [*argv, *case.args], env=case.env, capture_output=True, text=True, timeout=240
    )


def _warehouse_copy(source: Path, env: dict[str, str]) -> Path:
    target = Path(env["CENTSYNC_WAREHOUSE"])
    shutil.copyfile(source, target)
    return target


@dataclass
class Envs:
    """Environments of their own under one folder: one for a sandbox's service, or one holding
    exactly the settings given."""

    tmp: Path
    clean: Served

    def service(self, name: str, s: Served | None = None, key: str = "read_only") -> dict[str, str]:
        s = s or self.clean
        env = _base(self.tmp, name)
        env.update(CENTSYNC_API_BASE_URL=s.url, CENTSYNC_API_KEY=s.sb.keys[key])
        return env

    def settings(self, name: str, **values: str) -> dict[str, str]:
        env = _base(self.tmp, name)
        env.update(values)
        return env


def _failure_cases(
    served: dict[str, Served], envs: Envs, differ: dict[str, str], damaged: dict[str, str]
) -> list[Case]:
    """One case per documented failure (the warehouses `differ` and `damaged` prepared)."""
    return [
        Case("differ", errors.DIFFER, ["reconcile", "--json"], differ, ["differ"]),
        *_settings_cases(envs),
        *_service_cases(served, envs),
        *_outcome_cases(served, envs, damaged),
    ]


def _settings_cases(envs: Envs) -> list[Case]:
    """Settings that cannot be used: each a usage error (2) naming the setting to blame."""
    clean = envs.clean
    ro = clean.sb.keys["read_only"]
    service, settings = envs.service, envs.settings
    return [
        Case(
            "usage",
            errors.USAGE,
            ["refresh", "--json", "--months", "nope"],
            service("usage"),
            ["--months"],
        ),
        Case(
            "base URL ends in /v1",
            errors.USAGE,
            ["refresh", "--json"],
            settings("v1", CENTSYNC_API_BASE_URL=clean.url + "/v1", CENTSYNC_API_KEY=ro),
            ["CENTSYNC_API_BASE_URL", "ends in /v1", f"set it to '{clean.url}'"],
        ),
        Case(
            "credentials in the base URL",
            errors.USAGE,
            ["refresh", "--json"],
            settings(
                "creds",
                CENTSYNC_API_BASE_URL=clean.url.replace("//", "//me:pw@"),
                CENTSYNC_API_KEY=ro,
            ),
            ["CENTSYNC_API_BASE_URL holds credentials", "CENTSYNC_API_KEY"],
        ),
        Case(
            "bad CENTSYNC_DUCKDB_MEMORY",
            errors.USAGE,
            ["refresh", "--json"],
            {**service("memory"), "CENTSYNC_DUCKDB_MEMORY": "lots"},
            ["CENTSYNC_DUCKDB_MEMORY='lots'"],
        ),
        Case(
            "missing key",
            errors.USAGE,
            ["refresh", "--json"],
            settings("nokey", CENTSYNC_API_BASE_URL=clean.url),
            ["CENTSYNC_API_KEY is not"],
        ),
        Case(
            "key without a base URL",
            errors.USAGE,
            ["refresh", "--json"],
            settings("nobase", CENTSYNC_API_KEY=ro),
            ["CENTSYNC_API_BASE_URL is not", "embedded sandbox"],
        ),
    ]


def _service_cases(served: dict[str, Served], envs: Envs) -> list[Case]:
    """A service that refuses the key, cannot be reached, or keeps failing."""
    clean, failing = served["clean"], served["failing"]
    ro = clean.sb.keys["read_only"]
    port = _closed_port()
    https = clean.url.replace("http://", "https://")
    return [
        Case(
            "expired key",
            errors.AUTH,
            ["refresh", "--json"],
            envs.service("expired", key="expired"),
            ["expired"],
        ),
        Case(
            "nothing listens",
            errors.UNREACHABLE,
            ["refresh", "--json"],
            envs.settings(
                "refused", CENTSYNC_API_BASE_URL=f"http://127.0.0.1:{port}", CENTSYNC_API_KEY=ro
            ),
            ["refused"],
        ),
        Case(
            "TLS to a plain HTTP port",
            errors.UNREACHABLE,
            ["refresh", "--json"],
            envs.settings("tls", CENTSYNC_API_BASE_URL=https, CENTSYNC_API_KEY=ro),
            ["TLS"],
        ),
        Case(
            "the service keeps failing",
            errors.SERVICE,
            ["refresh", "--json"],
            envs.service("failing", failing),
            ["500"],
        ),
    ]


def _outcome_cases(served: dict[str, Served], envs: Envs, damaged: dict[str, str]) -> list[Case]:
    """A damaged warehouse, a row the service sent that cannot be kept, a bug in centsync."""
    return [
        Case(
            "a damaged warehouse",
            errors.WAREHOUSE,
            ["refresh", "--json"],
            damaged,
            ["damaged", "kept as", "centsync refresh"],
        ),
        Case(
            "an odd row",
            errors.REJECTED,
            ["refresh", "--json"],
            envs.service("odd", served["odd"]),
            ['"status": "rejected"', '"rejected": 1'],
        ),
        Case(
            "a bug",
            errors.INTERNAL,
            ["crash", "--json"],
            envs.settings("crash"),
            ["internal error", "bug in centsync", "Full log"],
            script=CRASH,
        ),
    ]


def _problems(case: Case, result: subprocess.CompletedProcess[str], ro: str) -> list[str]:
    """What is wrong with one case's run: its exit code, its one JSON object, what it says."""
    wrong: list[str] = []
    try:
        obj = json.loads(result.stdout)  # the whole of stdout is one object
        assert isinstance(obj, dict)
    except (ValueError, AssertionError):
        wrong.append(f"{case.name}: stdout is not one JSON object: {result.stdout[:300]!r}")
        return wrong
    text = result.stderr + result.stdout
    said = obj.get("exit_code", result.returncode)  # a result object: its status says
    if result.returncode != case.code or said != case.code:
        wrong.append(
            f"{case.name}: exit {result.returncode} (json {obj.get('exit_code')}), "
            f"want {case.code}: {result.stderr[-600:]}"
        )
    missing = [s for s in case.says if s not in text]
    if missing:
        wrong.append(f"{case.name}: does not say {missing}: {result.stderr[-600:]}")
    if case.code not in (errors.OK, errors.DIFFER, errors.REJECTED):
        assert obj["status"] == "failed" and obj["error"]["what_to_do"], case.name
    # each object is its type's: the failure's, else the command's (docs/schemas)
    schemas = json_schemas()
    command = next(a for a in case.args if not a.startswith("-"))
    failed = obj.get("status") in ("failed", "interrupted")
    schema = schemas["failure"] if failed else schemas.get(command)
    if schema is not None:
        errors_found = sorted(jsonschema.Draft202012Validator(schema).iter_errors(obj), key=str)
        wrong += [f"{case.name}: {e.json_path}: {e.message}" for e in errors_found]
    assert ro not in text, f"{case.name} printed the API key"
    return wrong


def _differing(built: Path, envs: Envs) -> dict[str, str]:
    """An environment whose warehouse is `built` with one expense's amount changed locally."""
    differ = envs.service("differ")
    con = duckdb.connect(str(_warehouse_copy(built, differ)))
    con.execute(
        "UPDATE core.transactions SET amount = amount + 1 WHERE id = "
        "(SELECT id FROM core.transactions WHERE type = 'expense' LIMIT 1)"
    )
    con.close()
    return differ


def _damaged(built: Path, envs: Envs) -> tuple[dict[str, str], int]:
    """An environment whose warehouse is `built` cut to a third; that third's size."""
    damaged = envs.service("damaged")
    size = _warehouse_copy(built, damaged).stat().st_size
    os.truncate(damaged["CENTSYNC_WAREHOUSE"], size // 3)
    return damaged, size // 3


@pytest.mark.slow  # CI runs it (make test-slow); about 25-65 s on 2 cores
def test_every_documented_exit_code_with_one_json_object(
    served: dict[str, Served], tmp_path: Path
) -> None:
    envs = Envs(tmp_path, served["clean"])
    ro = envs.clean.sb.keys["read_only"]

    # 0 first: its warehouse is the one the cases on a warehouse start from
    ok = Case("ok", errors.OK, ["refresh", "--json"], envs.service("ok"))
    done = _run(ok)
    assert done.returncode == 0, done.stderr
    built = Path(ok.env["CENTSYNC_WAREHOUSE"])
    differ = _differing(built, envs)
    damaged, cut = _damaged(built, envs)

    cases = _failure_cases(served, envs, differ, damaged)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(_run, cases))
    wrong = [p for case, r in zip(cases, results, strict=True) for p in _problems(case, r, ro)]
    assert not wrong, "\n".join(wrong)
    # the damaged warehouse was kept aside, not deleted, and the path is free for a new one
    kept = list(Path(damaged["CENTSYNC_WAREHOUSE"]).parent.glob("centsync.duckdb.damaged-*"))
    assert len(kept) == 1 and kept[0].stat().st_size == cut
    assert not Path(damaged["CENTSYNC_WAREHOUSE"]).exists()
