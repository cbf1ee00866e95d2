"""A big ledger's first sync packs its windows again as it reads (issue 46), over loopback.

Windows are sized in DuckDB row groups (`plan.months_per_window`), first from the ledger's
average rows a month; then, as each is read, from the rows each of its months held, projected by
their trend (`plan.repack`). The household here stands in for a big ledger: eight years whose
months grow fourfold (rows taken out of the older months), a row group of 150 rows and windows of
245, so a window is some eight months and its commit's rest is merged or not by the same rule as
DuckDB's (`tests/warehouse/test_row_groups.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest

from centsync.extract import ApiClient
from centsync.pipelines.refresh import plan
from centsync.pipelines.refresh.plan import FIRST_SYNC_RESUMED, Window
from centsync.pipelines.refresh.read import RESUME_KEY, WindowReader
from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
from centsync.sandbox import Sandbox
from centsync.sandbox.server import run_in_thread
from centsync.transform.calendar import month_key, parse_month
from centsync.warehouse.ledger import TransactionStage
from helpers import make_sandbox

pytestmark = pytest.mark.e2e

GROUP, WINDOW = 150, 245


@pytest.fixture
def grown(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Sandbox, str, list[Window]]]:
    """A sandbox over loopback whose months grow fourfold over eight years, small row groups
    and windows, and the windows each refresh opens, in order."""
    monkeypatch.setattr(plan, "ROW_GROUP_ROWS", GROUP)
    monkeypatch.setattr(plan, "WINDOW_ROWS", WINDOW)
    opened: list[Window] = []
    original = WindowReader._open

    def recorded(self: WindowReader, window: Window, *args: object) -> object:
        opened.append(window)
        return original(self, window, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(WindowReader, "_open", recorded)
    sb = make_sandbox(rate_limit=False, years=8)
    by_month: dict[str, list[str]] = {}
    for t in sb.state()["transactions"]:
        by_month.setdefault(t["booked_at"][:7], []).append(t["id"])
    months = sorted(by_month)
    for k, month in enumerate(months):  # a quarter of the oldest month kept, all of the newest
        ids = sorted(by_month[month])
        keep = round(len(ids) * (0.25 + 0.75 * k / (len(months) - 1)))
        for tx_id in ids[keep:]:
            tx = sb.service.find_any_transaction(tx_id)
            assert tx is not None
            sb.service.delete_transaction(tx)
    with run_in_thread(sb) as base_url:
        yield sb, base_url, opened


def _months(window: Window) -> int:
    lo, hi = window
    assert lo is not None and hi is not None
    return len(plan.window_months(lo, hi))


def _query(wh: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(wh), read_only=True) as con:
        return con.execute(sql, list(params)).fetchall()


def _per_month(wh: Path) -> dict[str, int]:
    rows = _query(wh, "SELECT strftime(month, '%Y-%m'), count(*) FROM core.transactions GROUP BY 1")
    return {str(m): int(n) for m, n in rows}


def _server_per_month(sb: Sandbox) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in sb.state()["transactions"]:
        out[t["booked_at"][:7]] = out.get(t["booked_at"][:7], 0) + 1
    return out


def _merged(rows: int) -> bool:
    """Whether a commit of `rows` leaves a rest DuckDB's checkpoints merge (GROUP rows a group)."""
    rest = rows % GROUP
    return rows < GROUP or 0 < rest <= GROUP / 2


def _rows(window: Window, per_month: dict[str, int]) -> int:
    lo, hi = window
    return sum(
        n
        for m, n in per_month.items()
        if (lo is None or m >= month_key(lo)) and (hi is None or m <= month_key(hi))
    )


def test_a_grown_ledgers_windows_follow_the_rows_a_month_it_reads(
    grown: tuple[Sandbox, str, list[Window]], tmp_path: Path
) -> None:
    sb, base_url, opened = grown
    wh = tmp_path / "wh.duckdb"
    with ApiClient(base_url, sb.keys["read_only"], max_window_rows=10**12) as client:
        summary = run_refresh(client, str(wh), RefreshOptions())
    assert summary.verdict == "agree"
    server = _server_per_month(sb)
    assert _per_month(wh) == server
    # from the average every window holds the same months, and the old ones' commits merge
    packed = plan.pack(parse_month(min(server)), parse_month(max(server)), sum(server.values()))
    assert len({_months(w) for w in packed[:-1]}) == 1
    read = opened[1:-1]  # the first is open below, the last open above
    assert sum(_merged(_rows(w, server)) for w in read) < sum(
        _merged(_rows(w, server)) for w in packed[1:-1]
    ), (opened, packed)
    # the old months' windows hold more months than the new ones'
    assert _months(read[0]) > _months(read[-1]), opened


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
    stored = json.loads(
        str(_query(wh, "SELECT value FROM ops.meta WHERE key = ?", RESUME_KEY)[0][0])
    )
    ((kept,),) = _query(wh, "SELECT count(*) FROM core.transactions")
    # the stored plan is the one packed again: its third window is the one opened third, not
    # the average's
    assert stored["windows"][2] == [d.isoformat() for d in opened[2]], (stored, opened)
    server = _server_per_month(sb)
    packed = plan.pack(parse_month(min(server)), parse_month(max(server)), sum(server.values()))
    assert opened[2] != packed[2]
    monkeypatch.setattr(WindowReader, "_open", recorded)
    with ApiClient(base_url, sb.keys["read_only"], max_window_rows=10**12) as client:
        summary = run_refresh(client, str(wh), RefreshOptions())
    assert summary.reason == FIRST_SYNC_RESUMED
    assert summary.verdict == "agree"
    assert _per_month(wh) == _server_per_month(sb)
    assert sum(m["rows"] for m in summary.months_reread) == summary.transactions - kept


def _as_duckdb_shows(limit: str) -> str:
    with duckdb.connect() as con:
        con.execute(f"SET memory_limit = '{limit}'")
        return str(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])


@pytest.mark.parametrize(
    ("limit", "windows"), [("160MB", "96MB"), ("64MB", "64MB"), ("50%", "50%")]
)
def test_a_first_syncs_windows_land_under_the_window_memory_and_the_rest_under_the_refreshs(
    grown: tuple[Sandbox, str, list[Window]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    limit: str,
    windows: str,
) -> None:
    sb, base_url, _ = grown
    seen: list[str] = []
    original = TransactionStage.commit

    def commit(self: TransactionStage, *args: Any, **kwargs: Any) -> Any:
        con = self.warehouse.con
        seen.append(str(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(TransactionStage, "commit", commit)
    after: list[str] = []

    def finished(con: duckdb.DuckDBPyConnection, marts: object) -> None:
        after.append(str(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]))

    options = RefreshOptions(duckdb_memory=limit, finished=finished)
    with ApiClient(base_url, sb.keys["read_only"], max_window_rows=10**12) as client:
        summary = run_refresh(client, str(tmp_path / "wh.duckdb"), options)
    assert summary.verdict == "agree"
    assert len(seen) > 3 and set(seen) == {_as_duckdb_shows(windows)}, seen
    assert after == [_as_duckdb_shows(limit)]
    # a refresh that is no first sync keeps its own limit throughout
    seen.clear()
    with ApiClient(base_url, sb.keys["read_only"], max_window_rows=10**12) as client:
        run_refresh(client, str(tmp_path / "wh.duckdb"), replace(options, mode="full"))
    assert seen and set(seen) == {_as_duckdb_shows(limit)}, seen
