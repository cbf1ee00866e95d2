"""Streaming one window: rows in batches, void passes on drift, done only when exact."""

from __future__ import annotations

from typing import Any

import httpx
import polars as pl
import pytest

from centsync.extract import ApiClient, WindowDone, WindowRows, WindowVoid
from centsync.sandbox.server import run_in_thread

from .conftest import FAST, Admin, AsgiEnv, comparable, run, small_sandbox, state_frame


def _collect(events: list[Any]) -> tuple[pl.DataFrame, int]:
    """What a loader keeps: the rows since the last void, once the window is done."""
    rows: list[pl.DataFrame] = []
    voids = 0
    assert isinstance(events[-1], WindowDone)
    assert not any(isinstance(e, WindowDone) for e in events[:-1])
    for event in events:
        if isinstance(event, WindowRows):
            rows.append(event.frame)
        elif isinstance(event, WindowVoid):
            rows.clear()
            voids += 1
    return pl.concat(rows), voids


def test_stream_voids_a_drifted_pass_and_ends_exact(
    asgi_env: AsgiEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("centsync.extract._reader.PARSE_BATCH_PAGES", 2)

    async def go() -> None:
        admin = asgi_env.admin()
        await admin.faults(
            error_rate=0.1,
            error_statuses=[500, 503],
            drift={"inserts": 1, "updates": 1, "deletes": 1, "pages": 4},
        )
        async with asgi_env.client(max_attempts=12) as c:
            events = [e async for e in c.stream_window((None, None))]
        await admin.clear_faults()
        frame, voids = _collect(events)
        assert comparable(frame).equals(state_frame(await admin.state()))
        assert voids >= 1  # the drift was seen: rows already handed out were voided
        assert sum(isinstance(e, WindowRows) for e in events) > 2  # batches, not one frame
        report = events[-1].report
        assert report.verified and report.rereads == voids and report.rows == frame.height

    run(go())


@pytest.mark.e2e
def test_blocking_stream_over_loopback_and_early_stop() -> None:
    sb = small_sandbox(3000)
    with run_in_thread(sb) as base_url, ApiClient(base_url, sb.keys["read_only"], **FAST) as c:
        events = list(c.stream_window((None, None), depth=1))
        frame, voids = _collect(events)

        async def state() -> dict[str, Any]:
            async with httpx.AsyncClient(base_url=base_url) as http:
                return await Admin(sb, http).state()

        assert comparable(frame).equals(state_frame(run(state())))
        assert voids == 0
        # a caller that stops early leaves the client usable
        with c.stream_window(("2025-01-01", "2025-12-31")) as stream:
            assert isinstance(next(stream), WindowRows)
        assert c.transactions_summary().count == frame.height
