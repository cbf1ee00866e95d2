"""Safe operations through the CLI: the source binding, classified failures and their exit
codes, flag validation, `status`, over a sandbox on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from centsync.pipelines import failures as errors
from centsync.sandbox.server import free_port, run_in_thread
from helpers import make_sandbox

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def _short_error(out: str) -> None:
    assert "Traceback" not in out
    assert len([line for line in out.splitlines() if line.strip()]) <= 6, out


def test_a_refresh_against_another_owner_refuses_before_writing(http_env: HttpEnv) -> None:
    http_env.refresh()
    before = http_env.warehouse.read_bytes()
    other = make_sandbox(seed=99, rate_limit=False)  # another household: another owner
    with run_in_thread(other) as other_url:
        os.environ["CENTSYNC_API_BASE_URL"] = other_url
        os.environ["CENTSYNC_API_KEY"] = other.keys["read_only"]
        code, out = http_env.cli("refresh", "--json")
        assert code == errors.WAREHOUSE
        report = json.loads(out.strip().splitlines()[-1])
        assert report["status"] == "failed" and report["error"]["class"] == "SourceMismatch"
        message = report["error"]["message"]
        assert http_env.sb.service.owner in message and other.service.owner in message
        assert "--rebind" in message and "CENTSYNC_WAREHOUSE" in message
        assert http_env.warehouse.read_bytes() == before  # nothing written, not even a failed row
        # --rebind keeps the old file and starts a warehouse of the new owner
        meta = http_env.refresh("--rebind")
        assert meta["source"]["owner"] == other.service.owner
        backups = list(http_env.warehouse.parent.glob("centsync.duckdb.bak-*"))
        assert len(backups) == 1 and backups[0].read_bytes() == before
        assert http_env.sql("SELECT value FROM ops.meta WHERE key = 'source.account_id'") == [
            (other.service.owner,)
        ]


def test_a_refresh_against_another_service_refuses_and_the_sandbox_is_never_used(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    http_env.refresh()
    before = http_env.warehouse.read_bytes()
    # the same household served at another address is another service
    with run_in_thread(http_env.sb) as second_url:
        monkeypatch.setenv("CENTSYNC_API_BASE_URL", second_url)
        code, _ = http_env.cli("refresh")
        assert code == errors.WAREHOUSE
    # no base URL: the embedded sandbox would replace a real warehouse; it is not even started
    monkeypatch.delenv("CENTSYNC_API_BASE_URL")
    monkeypatch.delenv("CENTSYNC_API_KEY")
    result = subprocess.run(
        [sys.executable, "-m", "centsync.pipelines.cli", "refresh"],
        env={k: v for k, v in os.environ.items()},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == errors.WAREHOUSE
    assert "embedded sandbox" in result.stderr and http_env.base_url in result.stderr
    assert "started the embedded sandbox" not in result.stderr
    _short_error(result.stderr)
    assert http_env.warehouse.read_bytes() == before


@pytest.mark.parametrize(
    ("key_name", "code", "headline"),
    [
        ("expired", errors.AUTH, "expired"),
        ("pfd_live_" + "x" * 40, errors.AUTH, "refused the API key"),
    ],
)
def test_key_failures_exit_3_with_a_short_message(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch, key_name: str, code: int, headline: str
) -> None:
    monkeypatch.setenv("CENTSYNC_API_KEY", http_env.sb.keys.get(key_name, key_name))
    result = subprocess.run(
        [sys.executable, "-m", "centsync.pipelines.cli", "refresh"],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == code, result.stderr
    assert headline in result.stderr and "What to do" in result.stderr
    _short_error(result.stderr)
    assert http_env.sb.keys.get(key_name, key_name) not in result.stderr + result.stdout
    log = Path(result.stderr.split("Full log: ")[1].split()[0])
    assert (log.is_file() and "Traceback" in log.read_text()) or "Error" in log.read_text()


@pytest.mark.parametrize(
    ("base_url", "says"),
    [
        ("http://127.0.0.1:{closed_port}", "refused"),
        ("https://no-such-host.invalid", "could not be resolved"),
    ],
)
def test_an_unreachable_service_exits_4_within_seconds(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch, base_url: str, says: str
) -> None:
    monkeypatch.setenv("CENTSYNC_API_BASE_URL", base_url.format(closed_port=free_port()))
    started = time.monotonic()
    code, out = http_env.cli("refresh", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.UNREACHABLE and report["exit_code"] == errors.UNREACHABLE
    assert report["error"]["class"] == "ServiceUnreachable" and says in report["error"]["message"]
    assert time.monotonic() - started < 10  # three attempts, not a backoff's worth


def test_flags_that_make_no_sense_are_usage_errors(http_env: HttpEnv) -> None:
    for args in (
        ["refresh", "--full", "--hot"],
        ["refresh", "--full", "--months", "2025-01"],
        ["refresh", "--months", "2099-01"],
        ["refresh", "--months", "..2025-01"],
        ["refresh", "--months", "2025-1"],
    ):
        code, _ = http_env.cli(*args)
        assert code == errors.USAGE, args


def test_status_tells_the_source_the_last_refresh_and_the_verdict(http_env: HttpEnv) -> None:
    http_env.refresh()
    code, out = http_env.cli("status", "--json")
    assert code == 0
    status = json.loads(out)
    assert status["source"]["account_id"] == http_env.sb.service.owner
    assert status["source"]["base_url"] == http_env.base_url.rstrip("/")
    assert status["last_refresh"]["status"] == "succeeded"
    assert status["tables"]["core.transactions"] == len(http_env.sb.state()["transactions"])
    assert status["reconciliation"]["verdict"] == "agree"
    assert status["warehouse"] == str(http_env.warehouse.absolute())
    code, out = http_env.cli("status")
    assert code == 0 and "Reconciliation: AGREE" in out and http_env.sb.service.owner in out


def test_status_without_a_warehouse_says_what_to_do(http_env: HttpEnv) -> None:
    code, _ = http_env.cli("status")
    assert code == errors.WAREHOUSE


def test_cli_runs_are_tagged_with_their_command_and_mode(http_env: HttpEnv) -> None:
    http_env.refresh("--hot")
    from dagster import DagsterInstance

    runs = DagsterInstance.get().get_runs()
    tags = runs[0].tags
    assert tags["centsync/command"] == "refresh" and tags["centsync/mode"] == "hot"


def test_rows_the_service_damages_are_rejected_with_reasons_and_the_refresh_goes_on(
    http_env: HttpEnv,
) -> None:
    state = http_env.sb.state()
    old = [t for t in state["transactions"] if t["booked_at"] < "2025-06-01"]
    kinds = ["amount_string", "non_integer_amount", "unknown_type", "missing_field", "bad_date"]
    damaged = {old[i * 9]["id"]: kind for i, kind in enumerate(kinds)}
    http_env.admin("PUT", "/_sandbox/faults", {"corrupt": damaged})
    code, out = http_env.cli("refresh", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.REJECTED and report["exit_code"] == errors.REJECTED
    assert report["status"] == "rejected" and report["rows"]["rejected"] == len(kinds)
    # every other row landed; the damaged ones are in raw.rejected_rows with a reason each
    (landed,) = http_env.sql("SELECT count(*) FROM core.transactions")[0]
    assert landed == len(state["transactions"]) - len(kinds)
    reasons = dict(
        http_env.sql(
            "SELECT DISTINCT record->>'id', reason FROM raw.rejected_rows WHERE entity = 'transactions'"
        )
    )
    assert set(reasons) == set(damaged)
    assert "amount" in reasons[next(i for i, k in damaged.items() if k == "amount_string")]
    assert "booked_at" in reasons[next(i for i, k in damaged.items() if k == "bad_date")]
    # the reconciliation knows why those months differ, and the Dagster check fails loudly
    assert report["verdict"] == "explained"
    from dagster import AssetKey, DagsterInstance

    instance = DagsterInstance.get()
    evaluation = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg_check_key(AssetKey("transactions"), "no_rejected_rows")]
    )
    (execution,) = evaluation.values()
    assert execution.evaluation is not None and execution.evaluation.passed is False
    # the fault lifted, the next refresh lands them and agrees
    http_env.admin("DELETE", "/_sandbox/faults")
    meta = http_env.refresh("--months", f"{old[0]['booked_at'][:7]}..2025-05")
    assert meta["rows"]["rejected"] == 0
    meta = http_env.refresh()
    assert meta["verdict"] == "agree"
    http_env.assert_exact()


def dg_check_key(asset: object, name: str) -> object:
    from dagster import AssetCheckKey

    return AssetCheckKey(asset, name)  # type: ignore[arg-type]


def test_default_paths_are_per_user_and_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from centsync.pipelines.cli.runner import dagster_home
    from centsync.pipelines.settings import Settings

    monkeypatch.delenv("CENTSYNC_WAREHOUSE", raising=False)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    first = Settings.from_env().warehouse
    monkeypatch.chdir(tmp_path)
    assert Settings.from_env().warehouse == first
    assert first == tmp_path / "xdg" / "centsync" / "centsync.duckdb"
    assert dagster_home(Settings.from_env()) == tmp_path / "xdg" / "centsync" / "centsync.dagster"
    monkeypatch.setenv("CENTSYNC_WAREHOUSE", "relative/w.duckdb")
    # printed absolute
    assert Settings.from_env().warehouse == tmp_path / "relative" / "w.duckdb"


@pytest.mark.slow  # CI runs it (make test-slow); about 25-65 s on 2 cores
def test_a_service_that_keeps_failing_exits_5(http_env: HttpEnv) -> None:
    http_env.admin("PUT", "/_sandbox/faults", {"error_rate": 1.0, "error_statuses": [500]})
    code, out = http_env.cli("refresh", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.SERVICE and report["error"]["class"] == "InternalError"


def test_a_locked_warehouse_exits_6_and_says_who_holds_it(http_env: HttpEnv) -> None:
    import fcntl

    http_env.refresh()
    lock = http_env.warehouse.with_name(http_env.warehouse.name + ".lock")
    with lock.open("a") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, out = http_env.cli("refresh", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.WAREHOUSE and report["error"]["class"] == "RefreshInProgressError"


def test_a_file_that_is_not_a_warehouse_exits_6_and_is_left_alone(http_env: HttpEnv) -> None:
    http_env.warehouse.parent.mkdir(parents=True, exist_ok=True)
    http_env.warehouse.write_bytes(b"not a duckdb file" * 100)
    code, out = http_env.cli("refresh", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.WAREHOUSE, report
    assert http_env.warehouse.read_bytes() == b"not a duckdb file" * 100


def test_an_id_the_service_sends_twice_is_rejected_once_and_the_rest_lands(
    http_env: HttpEnv,
) -> None:
    state = http_env.sb.state()
    victim = next(t for t in state["transactions"] if t["booked_at"] < "2025-06-01")
    http_env.admin("PUT", "/_sandbox/faults", {"corrupt": {victim["id"]: "duplicate_id"}})
    code, out = http_env.cli("refresh", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.REJECTED and report["rows"]["rejected"] == 1
    assert report["verdict"] == "explained"
    (reason,) = http_env.sql("SELECT DISTINCT reason FROM raw.rejected_rows")[0]
    assert "different content" in reason
    (landed,) = http_env.sql("SELECT count(*) FROM core.transactions")[0]
    assert landed == len(state["transactions"]) - 1  # the row sent under another id
