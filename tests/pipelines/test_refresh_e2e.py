"""The refresh end to end: the `centsync refresh` CLI, Dagster runs, a sandbox over loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from centsync.pipelines.cli.main import main
from helpers import wait_for_reading

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def _budget(http_env: HttpEnv, meta: dict[str, Any]) -> int:
    """docs/refresh.md: 6 + 3 x years of history + pages of the hot window + 1 + 5 aggregates
    + the verification slice (its page budget, 4 by default, plus one check per window)."""
    state = http_env.sb.state()
    years = len({t["booked_at"][:4] for t in state["transactions"]})
    hot = [t for t in state["transactions"] if t["booked_at"] >= "2026-10-01"]
    windows = [r for r in meta["months_reread"] if r["reason"].startswith("verification")]
    return 6 + 3 * years + max(1, -(-len(hot) // 200)) + 6 + 4 + len(windows)


def test_first_refresh_equals_the_server_and_a_second_changes_nothing_cheaply(
    http_env: HttpEnv,
) -> None:
    first = http_env.refresh()
    assert first["rows"]["rejected"] == 0
    http_env.assert_exact()
    n = len(http_env.sb.state()["transactions"])
    assert first["requests"]["total"] <= -(-n // 200) + 3 + 10  # floor + years + 10
    second = http_env.refresh()
    assert second["rows"]["changed"] == 0
    assert second["requests"]["total"] <= _budget(http_env, second)
    # a household: the plan re-reads everything, never dearer than the first sync (issue 26)
    assert second["requests"]["total"] <= first["requests"]["total"]
    http_env.assert_exact()


def test_converges_after_clock_edits_deletes_and_recategorisation(http_env: HttpEnv) -> None:
    http_env.refresh()
    state = http_env.sb.state()
    old = [t for t in state["transactions"] if t["booked_at"] < "2025-06-01"]
    other_cat = state["categories"][2]["id"]
    http_env.admin(
        "PATCH", f"/_sandbox/transactions/{old[0]['id']}", {"category_id": other_cat}
    )  # re-categorised only
    http_env.admin("DELETE", f"/_sandbox/transactions/{old[10]['id']}")
    http_env.admin(
        "PATCH",
        f"/_sandbox/transactions/{old[20]['id']}",
        {"concept": "Edited by the bank", "amount": old[20]["amount"] - 7},
    )
    http_env.admin(
        "POST",
        "/_sandbox/transactions",
        {
            "account_id": state["accounts"][0]["id"],
            "amount": -321,
            "concept": "Backdated",
            "booked_at": "2024-12-03",
        },
    )
    http_env.admin(
        "POST", "/_sandbox/clock/advance", {"days": 5}
    )  # new bank rows, pending ones settle or vanish
    meta = http_env.refresh()
    assert meta["rows"]["changed"] > 0
    http_env.assert_exact()


def test_recategorisation_alone_is_caught_by_the_category_fingerprint(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every year proven by its fingerprints (a household's are otherwise simply re-read)
    monkeypatch.setenv("CENTSYNC_PLAN", "fingerprints")
    http_env.refresh()
    state = http_env.sb.state()
    t = next(
        t
        for t in state["transactions"]
        if t["booked_at"] < "2025-01-01" and t["type"] == "expense" and t["category_id"]
    )
    other = next(c["id"] for c in state["categories"] if c["id"] != t["category_id"])
    http_env.admin("PATCH", f"/_sandbox/transactions/{t['id']}", {"category_id": other})
    meta = http_env.refresh()
    assert meta["rows"]["changed"] >= 1
    assert any("differs" in r["reason"] for r in meta["months_reread"])
    http_env.assert_exact()


def test_a_timezone_change_makes_the_refresh_full_and_exact(http_env: HttpEnv) -> None:
    http_env.refresh()
    http_env.admin("PUT", "/_sandbox/settings", {"timezone": "Pacific/Auckland"})
    meta = http_env.refresh()
    assert meta["mode"] == "full" and "timezone" in meta["reason"]
    http_env.assert_exact()


def test_exact_under_faults_and_drift(http_env: HttpEnv) -> None:
    http_env.admin(
        "PUT",
        "/_sandbox/faults",
        {
            "error_rate": 0.1,
            "drop_rate": 0.03,
            "latency_ms": 2,
            "drift": {"inserts": 1, "updates": 1, "deletes": 1, "pages": 6},
        },
    )
    http_env.refresh("--full")
    http_env.admin("DELETE", "/_sandbox/faults")
    http_env.assert_exact()


def test_months_option_rereads_only_that_range(http_env: HttpEnv) -> None:
    http_env.refresh()
    meta = http_env.refresh("--months", "2025-01..2025-03")
    assert len(meta["months_reread"]) == 1 and meta["rows"]["changed"] == 0
    # recorded as what it did, as the JSON says it (status reads ops.refreshes)
    assert meta["mode"] == "months"
    hot = http_env.refresh("--hot")
    recorded = http_env.sql("SELECT mode FROM ops.refreshes ORDER BY started_at")
    assert [m for (m,) in recorded] == ["full", "months", hot["mode"]] == ["full", "months", "hot"]
    result = CliRunner().invoke(main, ["refresh", "--months", "2025-13"])
    assert result.exit_code != 0 and "YYYY-MM" in result.output


def test_killed_refresh_leaves_the_last_good_warehouse_and_the_next_completes(
    http_env: HttpEnv,
) -> None:
    http_env.refresh()
    http_env.admin("PUT", "/_sandbox/faults", {"latency_ms": 150})
    http_env.admin("POST", "/_sandbox/clock/advance", {"days": 3})
    proc = subprocess.Popen(
        [sys.executable, "-m", "centsync.pipelines.cli", "refresh", "--full"],
        # its progress lines tell when it reads (stderr is a pipe: asked for)
        env={**os.environ, **http_env.env, "CENTSYNC_PROGRESS": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_reading(proc, then=0.3)  # a page or two in: the refresh is mid-way
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL  # killed while it read, not after it ended
    con = duckdb.connect(str(http_env.warehouse), read_only=True)
    assert con.execute("SELECT count(*) FROM core.transactions").fetchone()[0] > 0  # type: ignore[index]
    con.close()
    http_env.admin("DELETE", "/_sandbox/faults")
    http_env.refresh()
    http_env.assert_exact()


def test_the_key_never_reaches_the_warehouse_or_the_dagster_instance(http_env: HttpEnv) -> None:
    http_env.admin("PUT", "/_sandbox/faults", {"error_rate": 0.2})
    http_env.refresh()
    key = http_env.sb.keys["read_only"]
    for path in http_env.tmp.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


def test_duckdb_runs_a_small_ledger_on_one_thread_and_a_big_one_on_all(tmp_path: Path) -> None:
    from centsync.pipelines.refresh.run import size_threads as _size_threads
    from centsync.warehouse import Warehouse
    from centsync.warehouse.session import ONE_THREAD_ROWS

    wh = Warehouse.open(tmp_path / "w.duckdb")
    try:
        default = wh.query("SELECT current_setting('threads')").item()
        _size_threads(wh, 1_765)
        assert wh.query("SELECT current_setting('threads')").item() == 1
        _size_threads(wh, ONE_THREAD_ROWS)
        assert wh.query("SELECT current_setting('threads')").item() == default
    finally:
        wh.close()
