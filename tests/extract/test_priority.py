"""The reader's parsing runs below the event loop's CPU priority (Linux nice, per thread)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from .conftest import AsgiEnv, run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux nice")


def _nice(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


def _threads(prefixes: tuple[str, ...]) -> list[int]:
    tids = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip().startswith(prefixes):
                    tids.append(int(tid))
        except OSError:
            pass
    return tids


def test_parsing_threads_run_below_the_event_loop(asgi_env: AsgiEnv) -> None:
    loop_nice: list[int] = []
    seen: dict[str, int] = {}

    async def go() -> None:
        loop_nice.append(_nice(0))
        async with asgi_env.client(parse_nice=7) as c:
            rows = sum([b.frame.height async for b in c.read_transactions([(None, None)])])
            assert rows == 3000
            for t in threading.enumerate():
                if t.name.startswith("centsync-parse") and t.native_id is not None:
                    seen[t.name] = _nice(t.native_id)
            assert _nice(0) == loop_nice[0]  # the loop's own thread is untouched

    run(go())
    assert seen and set(seen.values()) == {min(19, loop_nice[0] + 7)}
    polars = _threads(("polars-", "async-executor"))
    assert polars and all(_nice(tid) >= min(19, loop_nice[0] + 7) for tid in polars)
    assert _nice(0) == loop_nice[0]


def test_parse_nice_zero_leaves_the_parsing_threads_as_they_are(asgi_env: AsgiEnv) -> None:
    seen: list[int] = []

    async def go() -> None:
        async with asgi_env.client(parse_nice=0) as c:
            async for _ in c.read_transactions([(None, None)]):
                pass
            seen.extend(
                _nice(t.native_id)
                for t in threading.enumerate()
                if t.name.startswith("centsync-parse") and t.native_id is not None
            )

    run(go())
    assert seen and set(seen) == {_nice(0)}
