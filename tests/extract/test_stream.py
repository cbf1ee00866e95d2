"""Streaming one window: rows in batches, void passes on drift, done only when exact."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx
import polars as pl
import pytest

from centsync.extract import ApiClient, WindowDone, WindowRows, WindowVoid
from centsync.extract._frames import PageChunk
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


def _busy_reader(
    asgi_env: AsgiEnv, monkeypatch: pytest.MonkeyPatch, ahead_bytes: int
) -> tuple[int, list[tuple[int, int]], pl.DataFrame, int]:
    """Take the first batch of a window read in pages of 10, then stay busy (take nothing, as a
    loader committing a window) until the reader stops requesting; then take the rest.

    Returns the list requests made while busy, the pages kept compressed by then (their sizes
    compressed and as sent), the rows read, and the window's pages."""
    monkeypatch.setattr("centsync.extract._reader.PAGE_LIMIT", 10)
    monkeypatch.setattr("centsync.extract._reader.READ_AHEAD_PAGES", 4)
    packed: list[tuple[int, int]] = []
    pack = PageChunk.pack

    def counted(chunk: PageChunk) -> PageChunk:
        out = pack(chunk)
        packed.append((out.held, chunk.held))
        return out

    monkeypatch.setattr(PageChunk, "pack", counted)

    async def go() -> tuple[int, list[tuple[int, int]], pl.DataFrame, int]:
        async with asgi_env.client() as c:

            def requests() -> int:
                return int(c.stats.endpoints["GET /v1/transactions"].requests)

            stream = c.stream_window((None, None), batch_pages=2, ahead_bytes=ahead_bytes)
            frames = [(await anext(stream)).frame]
            seen = -1
            while requests() != seen:  # the reader goes on alone, or stops
                seen = requests()
                await asyncio.sleep(0.05)
            while_busy = list(packed)
            async for event in stream:
                if isinstance(event, WindowRows):
                    frames.append(event.frame)
                elif isinstance(event, WindowDone):
                    pages = event.report.pages
            return seen, while_busy, pl.concat(frames), pages

    return run(go())


@pytest.mark.parametrize("budget", [0, 20_000, 10**9])
def test_pages_are_read_on_while_the_caller_is_busy_and_wait_compressed(
    asgi_env: AsgiEnv, monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    """While the caller takes nothing (a window committing), the reader requests on past its
    usual look-ahead as long as the pages waiting hold under `ahead_bytes`, each of those kept
    compressed; the rows are the same whatever the budget."""
    busy, packed, frame, pages = _busy_reader(asgi_env, monkeypatch, budget)
    state = state_frame(run(asgi_env.admin().state()))
    assert comparable(frame).equals(state)
    assert pages == math.ceil(state.height / 10)
    # the first batch handed out holds pages 1-2; the reader had taken pages 3-4 (the next
    # batch, parsing) and requested 4 more ahead of them: 8 pages, with no budget
    if budget == 0:
        assert busy == 8 and packed == []
        return
    # pages of 10 records, about 3.4 KB as sent, wait in under a third of that
    assert all(size * 3 < sent for size, sent in packed)
    if budget == 20_000:
        # on past page 8 while the pages waiting (4 as sent, the rest compressed) hold 20 KB
        assert 8 < busy < pages and len(packed) == busy - 8
        # the budget stopped it: the pages kept compressed hold under it, though as sent they
        # would hold over it
        assert sum(size for size, _ in packed) < budget < sum(sent for _, sent in packed)
    else:
        assert busy == pages and len(packed) == pages - 8  # the whole window, while busy


def test_a_pass_resumed_after_its_last_page_proves_its_total_with_one_request() -> None:
    """Stopped after every page of a window was read (and kept), the pass read on asks no page
    past the end (a service may refuse one): it asks the last page again, for its total only,
    and hands on no row; a total that moved since voids it and the window is read whole."""
    asgi_env = AsgiEnv(small_sandbox(2990))  # its last page partial: 14 of 200 and one of 190
    total = len(asgi_env.sb.state()["transactions"])
    pages = math.ceil(total / 200)
    assert total % 200

    async def go(expect: int) -> list[Any]:
        async with asgi_env.client() as c:
            return [
                e
                async for e in c.stream_window(
                    (None, None), verify=False, start_page=pages + 1, expect_total=expect
                )
            ]

    events = run(go(total))
    assert not any(isinstance(e, WindowRows) and e.frame.height for e in events), events
    assert not any(isinstance(e, WindowVoid) for e in events)
    done = events[-1]
    assert isinstance(done, WindowDone)
    assert (done.report.requests, done.report.total, done.report.rows) == (1, total, 0)

    moved = run(go(total - 1))  # the window changed since the stop
    frame, voids = _collect(moved)
    assert voids == 1 and frame.height == total
