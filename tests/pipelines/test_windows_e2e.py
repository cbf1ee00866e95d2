"""A big ledger's first sync packs its windows again as it reads (issue 46), over loopback.

Windows are sized in DuckDB row groups (`plan.months_per_window`), first from the ledger's
average rows a month; a ledger whose months grew is read in windows sized from the rows a month
the last window held (`plan.repack`). The household here stands in for a big ledger: the row
group and the window are made small (60 and 100 rows), and three recent months hold about four
times the rows of the others.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import pytest

from centsync.extract import ApiClient
from centsync.pipelines.refresh import plan
from centsync.pipelines.refresh.plan import FIRST_SYNC_RESUMED, Window
from centsync.pipelines.refresh.read import RESUME_KEY, WindowReader
from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
from centsync.sandbox import Sandbox
from centsync.sandbox.server import run_in_thread
from centsync.transform.calendar import month_key, parse_month
from helpers import make_sandbox

pytestmark = pytest.mark.e2e

BUSY = ("2026-07", "2026-08", "2026-09")  # ~47 rows a month elsewhere, ~170 in these
EXTRA = 120


@pytest.fixture
def grown(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Sandbox, str, list[Window]]]:
    """A sandbox over loopback whose BUSY months hold EXTRA rows more, small row groups and
    windows, and the windows each refresh opens, in order."""
    monkeypatch.setattr(plan, "ROW_GROUP_ROWS", 60)
    monkeypatch.setattr(plan, "WINDOW_ROWS", 100)
    opened: list[Window] = []
    original = WindowReader._open

    def recorded(self: WindowReader, window: Window, *args: object) -> object:
        opened.append(window)
        return original(self, window, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(WindowReader, "_open", recorded)
    sb = make_sandbox(rate_limit=False)
    with run_in_thread(sb) as base_url:
        account = sb.state()["accounts"][0]["id"]
        with httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {sb.keys['admin_token']}"}
        ) as admin:
            for month in BUSY:
                for i in range(EXTRA):
                    r = admin.post(
                        "/_sandbox/transactions",
                        json={
                            "account_id": account,
                            "amount": -(100 + i),
                            "concept": f"card {i}",
                            "booked_at": f"{month}-{1 + i % 28:02d}",
                        },
                    )
                    assert r.status_code == 201, r.text
        yield sb, base_url, opened


def _months(window: Window) -> int:
    lo, hi = window
    assert lo is not None and hi is not None
    return len(plan.window_months(lo, hi))


def _first(window: Window) -> str:
    assert window[0] is not None
    return month_key(window[0])


def _per_month(wh: Path) -> dict[str, int]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        rows = con.execute(
            "SELECT strftime(month, '%Y-%m'), count(*) FROM core.transactions GROUP BY 1"
        ).fetchall()
    finally:
        con.close()
    return dict(rows)


def _server_per_month(sb: Sandbox) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in sb.state()["transactions"]:
        out[t["booked_at"][:7]] = out.get(t["booked_at"][:7], 0) + 1
    return out


def test_a_grown_ledgers_windows_follow_the_rows_a_month_it_reads(
    grown: tuple[Sandbox, str, list[Window]], tmp_path: Path
) -> None:
    sb, base_url, opened = grown
    wh = tmp_path / "wh.duckdb"
    with ApiClient(base_url, sb.keys["read_only"], max_window_rows=10**12) as client:
        summary = run_refresh(client, str(wh), RefreshOptions())
    assert summary.verdict == "agree"
    assert _per_month(wh) == _server_per_month(sb)
    # from the average (~61 rows a month) every window would be one month: 25 of them
    server = _server_per_month(sb)
    packed = plan.pack(parse_month(min(server)), parse_month(max(server)), sum(server.values()))
    assert all(_months(w) == 1 for w in packed)
    bounded = opened[1:-1]  # the first is open below, the last open above
    # read at ~47 rows a month, two months a window; each busy month a window of its own
    quiet = [w for w in bounded if _first(w) < BUSY[0]]
    busy = [w for w in bounded if _first(w) in BUSY[1:]]
    assert quiet and all(_months(w) == 2 for w in quiet), opened
    assert len(busy) == 2 and all(_months(w) == 1 for w in busy), opened
    assert len(opened) < len(packed)


def test_a_first_sync_stopped_after_its_windows_were_packed_again_reads_on_exactly(
    grown: tuple[Sandbox, str, list[Window]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb, base_url, opened = grown
    wh = tmp_path / "wh.duckdb"
    recorded = WindowReader._open

    def stop_at_the_fourth(self: WindowReader, window: Window, *args: object) -> object:
        if len(opened) == 3:
            raise KeyboardInterrupt  # as Ctrl-C between two windows
        return recorded(self, window, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(WindowReader, "_open", stop_at_the_fourth)
    with (
        pytest.raises(KeyboardInterrupt),
        ApiClient(base_url, sb.keys["read_only"], max_window_rows=10**12) as client,
    ):
        run_refresh(client, str(wh), RefreshOptions())
    con = duckdb.connect(str(wh), read_only=True)
    try:
        stored = json.loads(
            con.execute("SELECT value FROM ops.meta WHERE key = ?", [RESUME_KEY]).fetchall()[0][0]
        )
        (kept,) = con.execute("SELECT count(*) FROM core.transactions").fetchall()[0]
    finally:
        con.close()
    # the stored plan is the one packed again: its third window is the two months opened third
    assert stored["windows"][2] == [d.isoformat() for d in opened[2]], (stored, opened)
    assert _months(opened[2]) == 2
    monkeypatch.setattr(WindowReader, "_open", recorded)
    with ApiClient(base_url, sb.keys["read_only"], max_window_rows=10**12) as client:
        summary = run_refresh(client, str(wh), RefreshOptions())
    assert summary.reason == FIRST_SYNC_RESUMED
    assert summary.verdict == "agree"
    assert _per_month(wh) == _server_per_month(sb)
    assert sum(m["rows"] for m in summary.months_reread) == summary.transactions - kept
