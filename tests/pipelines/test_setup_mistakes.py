"""Every set-up mistake a person can make in a setting, a path or a file, provoked through the
real console script (issue 43, "Set-up mistakes reported as bugs or as differences").

One table: each row sets one thing wrong and says what must come out. Each must exit with its
documented code (docs/cli.md, "Exit codes"), print one JSON object on stdout with `--json`
(`status` failed, the code, a message naming the setting or file and its value, what to do),
say the same on stderr, and print no traceback and never a secret (a key, an alert URL's
token). Against a sandbox served over loopback, and two tiny servers of its own: one that
redirects to another host, one that accepts connections and never answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from centsync.pipelines import failures as errors
from centsync.sandbox.server import run_in_thread
from helpers import make_sandbox, redirecting, silent

pytestmark = pytest.mark.e2e

SECRET_ALERT = "tok3n-that-must-not-show"


@dataclass
class Case:
    """One mistake: the command, its environment, the exit code and the words it must say."""

    name: str
    code: int
    args: list[str]
    env: dict[str, str]
    says: list[str]
    stderr_says: list[str] = field(default_factory=list)  # said while it works (retries)


@contextmanager
def mounted(folder: Path, options: str) -> Iterator[bool]:
    """A tmpfs at `folder` (read-only, or tiny), where this user may mount one; else False."""
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True
    )
    try:
        yield done.returncode == 0
    finally:
        if done.returncode == 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _base(tmp: Path, name: str) -> dict[str, str]:
    """An environment of its own: nothing of the user's, a warehouse and Dagster home apart."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("CENTSYNC_", "DAGSTER_"))}
    folder = tmp / name
    folder.mkdir()
    return {
        **keep,
        "CENTSYNC_WAREHOUSE": str(folder / "centsync.duckdb"),
        "XDG_CONFIG_HOME": str(folder / "config"),
        "XDG_DATA_HOME": str(folder / "data"),
        "CENTSYNC_MAX_WAIT": "2",
    }


def _run(case: Case) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", "from centsync.pipelines.cli.main import entry; entry()"]
    return subprocess.run(
        [*argv, *case.args], env=case.env, capture_output=True, text=True, timeout=240
    )


def _write(path: Path, text: str | bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


@dataclass
class Envs:
    """Environments of their own under one folder: against the served sandbox, or none."""

    tmp: Path
    url: str
    key: str

    def service(self, name: str, **values: str) -> dict[str, str]:
        env = _base(self.tmp, name)
        env.update(CENTSYNC_API_BASE_URL=self.url, CENTSYNC_API_KEY=self.key)
        env.update(values)
        return env

    def plain(self, name: str, **values: str) -> dict[str, str]:
        env = _base(self.tmp, name)
        env.update(values)
        return env

    def folder(self, name: str) -> Path:
        return self.tmp / name


REFRESH = ["refresh", "--json"]
USAGE = errors.USAGE


def _setting_cases(e: Envs) -> list[Case]:
    """A value no command can use: exit 2, the variable and its value named (a secret's not)."""
    k = e.key
    bad: list[tuple[str, str, list[str]]] = [
        ("CENTSYNC_HOT_WINDOW_CRON", "every hour", ["CENTSYNC_HOT_WINDOW_CRON='every hour'",
                                                    "five fields"]),
        ("CENTSYNC_PARTITIONS_START", "2024-13-01", ["CENTSYNC_PARTITIONS_START='2024-13-01'",
                                                     "YYYY-MM-DD"]),
        ("CENTSYNC_HTTP_TIMEOUT", "0", ["CENTSYNC_HTTP_TIMEOUT='0'", "number of seconds"]),
        ("CENTSYNC_MAX_WAIT", "soon", ["CENTSYNC_MAX_WAIT='soon'", "a number"]),
        ("CENTSYNC_VERIFY_DAYS", "-1", ["CENTSYNC_VERIFY_DAYS='-1'"]),
        ("CENTSYNC_VERIFY_PAGES", "2.5", ["CENTSYNC_VERIFY_PAGES='2.5'", "whole number"]),
        ("CENTSYNC_PLAN", "fast", ["CENTSYNC_PLAN='fast'", "'cost' or 'fingerprints'"]),
        ("CENTSYNC_HTTP_TRANSPORT", "curl", ["CENTSYNC_HTTP_TRANSPORT='curl'", "aiohttp"]),
        ("CENTSYNC_DUCKDB_MEMORY", "1KB", ["CENTSYNC_DUCKDB_MEMORY='1KB'", "16MB"]),
        ("CENTSYNC_API_BASE_URL", "ftp://host", ["CENTSYNC_API_BASE_URL='ftp://host'"]),
        ("CENTSYNC_ALERT_URL", f"nope://{SECRET_ALERT}", ["CENTSYNC_ALERT_URL", "Apprise"]),
        ("CENTSYNC_PROGRESS", "0", ["CENTSYNC_PROGRESS='0' would turn it on", "unset it"]),
        ("CENTSYNC_ALLOW_FUTURE", "false", ["CENTSYNC_ALLOW_FUTURE='false' would turn it on"]),
    ]  # fmt: skip
    cases = [
        Case(f"bad {env}", USAGE, REFRESH, e.service(env.lower(), **{env: raw}), says)
        for env, raw, says in bad
    ]
    pasted = [("a control character", k[:20] + "\x1b" + k[20:]), ("a newline", k[:25] + "\n" + k[25:])]  # fmt: skip
    cases += [
        Case(f"a key holding {what}", USAGE, REFRESH,
             e.service(f"key{n}", CENTSYNC_API_KEY=key),
             ["CENTSYNC_API_KEY holds a control character", "copy the key again"])
        for n, (what, key) in enumerate(pasted)
    ]  # fmt: skip
    dialect = e.plain("dialect", CENTSYNC_SANDBOX_DIALECT="klingon")
    cases.append(Case("bad dialect", USAGE, REFRESH, dialect, ["CENTSYNC_SANDBOX_DIALECT='klingon'"]))  # fmt: skip
    return cases


def _path_cases(e: Envs) -> list[Case]:
    """A folder where a file goes, a file where a folder goes: exit 2, the variable named."""
    a_file = _write(e.folder("files") / "a-file", "not a folder")
    a_folder = e.folder("files") / "a-folder"
    a_folder.mkdir()
    folder = str(a_folder)
    wrong: list[tuple[str, str, str]] = [
        ("CENTSYNC_WAREHOUSE", folder, "is a folder, and it names a file"),
        ("CENTSYNC_WAREHOUSE", a_file + "/centsync.duckdb", "which is a file, not a folder"),
        ("DAGSTER_HOME", a_file, "is a file, and it names a folder"),
        ("CENTSYNC_INBOX", a_file, "is a file, and it names a folder"),
        ("CENTSYNC_LAKE", a_file, "is a file, and it names a folder"),
        ("CENTSYNC_SANDBOX_STATE", folder, "is a folder, and it names a file"),
        ("CENTSYNC_OWNERS_FILE", folder, "is a folder, and it names a file"),
        ("CENTSYNC_CONTRACT_FILE", folder, "is a folder, and it names a file"),
    ]
    return [
        Case(f"{env} {why}", USAGE, REFRESH, e.service(f"path{n}", **{env: value}),
             [f"{env}={value!r}", why])
        for n, (env, value, why) in enumerate(wrong)
    ]  # fmt: skip


def _file_cases(e: Envs, warehouse: Path, account: str) -> list[Case]:
    """The owners, contract and rules files, each wrong in its own way."""
    files = e.folder("files")
    owners = f'[[owner]]\nname = "alice"\nbase_url = "{e.url}"\nkey_env = "ALICE_KEY"\n'
    good_owners = _write(files / "owners.toml", owners)
    broken = _write(files / "broken.toml", "[[owner]\nname = 'x'\n")
    pasted = _write(files / "pasted.toml", owners.replace('"ALICE_KEY"', f'"{e.key}"'))
    contract = _write(files / "contract.toml", "nonsense = [\n")
    surface = _write(files / "surface.toml", '[surfaces."GET /v1/nope"]\ntimezone = "tz"\n')
    backref = _write(files / "backref.toml", "[[rule]]\nid = 'twice'\nconcept = '(a)\\1'\nset.notes = 'n'\n")  # fmt: skip
    lookaround = _write(files / "look.toml", "[[rule]]\nid = 'look'\nconcept = 'a(?=b)'\nset.notes = 'n'\n")  # fmt: skip
    wrong_case = _write(files / "case.toml", f"[[rule]]\nid = 'w'\naccount = '{account.lower()}'\nset.notes = 'n'\n")  # fmt: skip
    with_alice = {"CENTSYNC_OWNERS_FILE": good_owners, "ALICE_KEY": e.key}
    built = {"CENTSYNC_WAREHOUSE": str(warehouse)}
    return [
        Case("owners file not TOML", USAGE, ["--owner", "alice", *REFRESH],
             e.plain("owners1", CENTSYNC_OWNERS_FILE=broken), [broken, "not valid TOML"]),
        Case("a key pasted where a variable's name goes", USAGE, ["--owner", "alice", *REFRESH],
             e.plain("owners3", CENTSYNC_OWNERS_FILE=pasted),
             ["holds what looks like an API key (owner[0].key_env", "key_env = \"ALICE_KEY\""]),
        Case("an owner's name in another case", USAGE, ["--owner", "Alice", *REFRESH],
             e.plain("owners2", **with_alice), ["no owner 'Alice'", "did you mean 'alice'?"]),
        Case("contract file not TOML", USAGE, REFRESH,
             e.service("contract1", CENTSYNC_CONTRACT_FILE=contract), [contract, "is not TOML"]),
        Case("contract file naming no surface", USAGE, REFRESH,
             e.service("contract2", CENTSYNC_CONTRACT_FILE=surface), ["'GET /v1/nope'", "use one of"]),
        Case("a rule with a backreference", USAGE, ["rules", backref, "--json"],
             e.plain("rules1"), ["rule 'twice'", "no backreferences", "rewrite it"]),
        Case("a rule with lookaround", USAGE, ["rules", lookaround, "--json"],
             e.plain("rules2"), ["rule 'look'", "lookaround"]),
        Case("no rules file", USAGE, ["rules", str(files / "none.toml"), "--json"],
             e.plain("rules3"), ["no rules file", "none.toml"]),
        Case("a rule's account in another case", USAGE, ["rules", wrong_case, "--json", "--dry-run"],
             e.plain("rules4", **built), [f"no account {account.lower()!r}", f"did you mean {account!r}?"]),
    ]  # fmt: skip


def _service_cases(e: Envs, redirect_url: str, silent_url: str) -> list[Case]:
    """A base URL that redirects to another host; one that connects and never answers."""
    return [
        Case("a redirect to another host", USAGE, REFRESH,
             e.service("redirect", CENTSYNC_API_BASE_URL=redirect_url),
             ["redirected (301) to https://api.elsewhere.example/v1/me",
              "CENTSYNC_API_BASE_URL=https://api.elsewhere.example"]),
        Case("a service that never answers", errors.UNREACHABLE, REFRESH,
             e.service("silent", CENTSYNC_API_BASE_URL=silent_url, CENTSYNC_HTTP_TIMEOUT="0.5"),
             ["connected, but no answer within 0.5 s, 3 times", "not another program"],
             stderr_says=["(attempt 1 of at most 3); trying again in"]),
    ]  # fmt: skip


def _disk_cases(e: Envs, read_only: Path | None, full: Path | None) -> list[Case]:
    """A read-only warehouse folder, a full disk (where this user can mount a tmpfs)."""
    cases = []
    if read_only is not None:
        env = e.service("ro", CENTSYNC_WAREHOUSE=str(read_only / "centsync.duckdb"))
        says = [str(read_only), "writable"]
        cases.append(Case("a read-only warehouse folder", errors.WAREHOUSE, REFRESH, env, says))
    if full is not None:
        # the Dagster home elsewhere (as a fleet host has it): the warehouse's own write fails,
        # and so does recording the failed refresh in it, in one line
        env = e.service("full", CENTSYNC_WAREHOUSE=str(full / "centsync.duckdb"))
        env["DAGSTER_HOME"] = str(e.folder("full") / "dagster")
        says = ["No space left on device", "free space"]
        cases.append(Case("a full disk", errors.WAREHOUSE, REFRESH, env, says))
    return cases


def _problems(
    case: Case, result: subprocess.CompletedProcess[str], secrets: list[str]
) -> list[str]:
    """What is wrong with one case's run: its code, its one JSON object, what it says."""
    name, tail = case.name, result.stderr[-800:]
    try:
        obj = json.loads(result.stdout)
        assert isinstance(obj, dict)
    except (ValueError, AssertionError):
        return [f"{name}: stdout is not one JSON object: {result.stdout[:300]!r} {tail}"]
    wrong = []
    if result.returncode != case.code or obj.get("exit_code") != case.code:
        wrong.append(f"{name}: exit {result.returncode} (json {obj.get('exit_code')}), want {case.code}: {tail}")  # fmt: skip
    error = obj.get("error") or {}
    said = f"{error.get('message')} {error.get('what_to_do')}"
    if obj.get("status") != "failed" or not error.get("what_to_do"):
        wrong.append(f"{name}: not a failure object with what to do: {obj}")
    wrong += [f"{name}: the JSON does not say {s!r}: {said}" for s in case.says if s not in said]
    wrong += [f"{name}: stderr does not say {s!r}: {tail}" for s in case.says + case.stderr_says
              if s not in result.stderr]  # fmt: skip
    if "Traceback" in result.stderr or "Error:" not in result.stderr:
        wrong.append(f"{name}: not one message: {tail}")
    if case.code == USAGE and obj.get("run_id") is None and obj.get("log") is not None:
        wrong.append(f"{name}: a usage error wrote a log file: {obj['log']}")
    text = result.stdout + result.stderr
    wrong += [f"{name}: printed a secret" for s in secrets if s in text]
    return wrong


def _built(e: Envs) -> tuple[Path, str]:
    """A warehouse refreshed from the served sandbox, and an account name with a capital."""
    import duckdb

    env = e.service("built")
    done = _run(Case("ok", errors.OK, ["refresh", "--json"], env, []))
    assert done.returncode == 0, done.stderr
    warehouse = Path(env["CENTSYNC_WAREHOUSE"])
    with duckdb.connect(str(warehouse), read_only=True) as con:
        names = [r[0] for r in con.execute("SELECT name FROM core.accounts").fetchall()]
    return warehouse, next(n for n in names if n != n.lower())


@pytest.mark.slow  # about 40 processes of the console script: 30-60 s on 2 cores
def test_every_setup_mistake_exits_with_its_code_and_one_message(tmp_path: Path) -> None:
    sb = make_sandbox(rate_limit=False)
    key = sb.keys["read_only"]
    with (
        run_in_thread(sb) as url,
        redirecting(301, "https://api.elsewhere.example", "token=t") as redirect_url,
        silent() as silent_url,
        mounted(tmp_path / "mnt-ro", "ro,size=1m") as ro,
        mounted(tmp_path / "mnt-full", "size=256k") as full,
    ):
        e = Envs(tmp_path, url, key)
        warehouse, account = _built(e)
        cases = [
            *_setting_cases(e),
            *_path_cases(e),
            *_file_cases(e, warehouse, account),
            *_service_cases(e, redirect_url, silent_url),
            *_disk_cases(
                e, tmp_path / "mnt-ro" if ro else None, tmp_path / "mnt-full" if full else None
            ),
        ]
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(_run, cases))
    secrets = [key, key[:20], key[25:], SECRET_ALERT, "token=t"]
    wrong = [p for c, r in zip(cases, results, strict=True) for p in _problems(c, r, secrets)]
    assert not wrong, "\n".join(wrong)
    assert len(cases) >= 30


def test_a_failed_query_writes_nothing_into_the_dagster_home(tmp_path: Path) -> None:
    """`centsync sql` with a query DuckDB refuses: exit 2 and the reason, no log file."""
    import duckdb

    warehouse = tmp_path / "centsync.duckdb"
    duckdb.connect(str(warehouse)).close()
    env = {**_base(tmp_path, "sql"), "CENTSYNC_WAREHOUSE": str(warehouse)}
    done = _run(Case("sql", USAGE, ["sql", "SELECT nope"], env, []))
    assert done.returncode == USAGE and "nope" in done.stderr and "Traceback" not in done.stderr
    assert "Full log" not in done.stderr
    assert not (tmp_path / "centsync.dagster").exists()
