"""A first sync stopped at each step of a window's commit keeps every row it read, and the
next refresh reads on from there: no window read twice, no month left partial but the one it
stopped inside.

The stop is put at a named step, not by a timer (tests/pipelines/test_interrupts_e2e.py stops
on a timer, over loopback, and found the gap between a window's rows and its resume point
only now and then). The sandbox is in process (httpx.ASGITransport); the warehouse is a file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest

import centsync.pipelines.refresh.plan as refresh_plan
import centsync.pipelines.refresh.read as refresh_read
from centsync.extract import ApiClient
from centsync.pipelines.refresh.plan import FIRST_SYNC_RESUMED
from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
from centsync.pipelines.refresh.steps import Refresher
from centsync.warehouse.ledger import Ledger, TransactionStage
from helpers import assert_windows_kept, make_sandbox, months_kept

BASE = "http://sandbox.test"
ROWS = 15_000
WINDOW = 4_000  # about four windows of two batches (10 pages of 200 a batch)
STOP_IN = 2  # the window (counted from 1) whose commit is stopped
# the batch (of 10 pages) a stop in the read comes before: window 2's second (window 1 is 21
# pages)
MID_WINDOW = 5


class Stop(KeyboardInterrupt):
    """The Ctrl-C put at one step."""


def _stop_at(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, *, after: bool, call: int
) -> None:
    """Raise Ctrl-C at the `call`-th call of `owner.name`: before it runs, or `after` it
    returned (the step done, the next one not begun)."""
    real: Callable[..., Any] = getattr(owner, name)
    calls = 0

    def stopping(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == call and not after:
            raise Stop(f"stopped before {name}")
        out = real(*args, **kwargs)
        if calls == call and after:
            raise Stop(f"stopped after {name}")
        return out

    monkeypatch.setattr(owner, name, stopping)


# (where, attribute, stop after the call returned, at its n-th call)
STEPS: list[tuple[str, str, bool, int]] = [
    ("reader", "_fetch_alone", False, STOP_IN),
    ("read", "_repack", False, STOP_IN),
    ("stage", "commit", False, STOP_IN),
    ("ledger", "_record_month_reads", False, STOP_IN),  # inside the commit's transaction
    ("ledger", "_record_month_reads", True, STOP_IN),
    ("stage", "commit", True, STOP_IN),
    ("read", "checkpoint", False, STOP_IN),
    ("read", "checkpoint", True, STOP_IN),
    ("reader", "_after_window", False, STOP_IN),
    # in the read, not the commit: the pages staged are kept
    ("stage", "add", False, MID_WINDOW),
    # every window committed, the resume point not yet cleared (its 1st call is at the start)
    ("refresher", "_forget_resume", False, 2),
]


def _owner(where: str) -> Any:
    return {
        "read": refresh_read,
        "stage": TransactionStage,
        "ledger": Ledger,
        "reader": refresh_read.WindowReader,
        "refresher": Refresher,
    }[where]


@pytest.mark.parametrize(
    ("where", "name", "after", "call"),
    STEPS,
    ids=[f"{'after' if a else 'before'}-{n.strip('_')}" for _, n, a, _ in STEPS],
)
def test_a_first_sync_stopped_at_a_step_of_a_window_commit_reads_on_exactly(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    name: str,
    after: bool,
    call: int,
) -> None:
    monkeypatch.setattr(refresh_plan, "WINDOW_ROWS", WINDOW)
    monkeypatch.setattr(refresh_plan, "STREAM_BATCH_PAGES", 10)  # the least plan.batch_pages gives
    sb = make_sandbox(rate_limit=False, transactions=ROWS, years=3)
    server = Counter(t["booked_at"][:7] for t in sb.state()["transactions"])
    wh = tmp_path / "wh.duckdb"

    def refresh() -> Any:
        transport = httpx.ASGITransport(app=sb.app)
        with ApiClient(BASE, sb.keys["read_only"], transport=transport) as client:
            return run_refresh(client, str(wh), RefreshOptions(source="sandbox"))

    staged = 0
    add = TransactionStage.add

    def counted(stage: TransactionStage, frame: pl.DataFrame) -> None:
        nonlocal staged
        add(stage, frame)
        staged += frame.height

    with monkeypatch.context() as stopped:
        stopped.setattr(TransactionStage, "add", counted)  # the pages' rows, as staged
        _stop_at(stopped, _owner(where), name, after=after, call=call)
        with pytest.raises(KeyboardInterrupt):
            refresh()
    kept = months_kept(wh)
    assert 0 < sum(kept.values()) <= ROWS, kept
    assert_windows_kept(kept, server)
    # every row read is kept, wherever the stop came: before, in or after a window's commit
    assert sum(kept.values()) == staged, (sum(kept.values()), staged)

    summary = refresh()
    assert summary.verdict == "agree"
    assert summary.transactions == ROWS
    assert summary.mode == "full" and summary.reason == FIRST_SYNC_RESUMED
    # every row read on is one the stopped refresh did not keep: no window read twice
    read_on = sum(m["rows"] for m in summary.months_reread)
    assert read_on == ROWS - sum(kept.values()), (read_on, ROWS - sum(kept.values()))
    assert months_kept(wh) == server
