"""The event loop and threads the client runs on: uvloop, and the parse threads' CPU priority."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# How much lower than the event loop's the CPU priority of the reader's parsing threads is
# (Linux nice, per thread; 0 keeps them equal). Off by default: re-nicing reaches into Polars'
# own worker threads for the life of the process, and it had no measurable effect on a refresh
# (docs/benchmarks.md), which is bound by its loader. `OPT_IN_PARSE_NICE` is what the extract
# benchmark opts into: on a busy machine the scheduler shares the cores equally between
# runnable threads, and the event loop, which keeps the requests flowing, waited behind the
# parsing it had itself handed out: about 0.9 ms per wake-up in a 1,000,000-row read (perf
# sched), and the bare read went from 251k to 284k rows/s.
PARSE_NICE = 0
OPT_IN_PARSE_NICE = 10


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where installed (Linux, macOS), else asyncio's own loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - Windows
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the loop ``new_event_loop`` gives."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


# Polars' worker threads, which do the parsing the client's threads hand them (by name).
_POLARS_THREADS = ("polars-", "async-executor")


def background_priority(level: int) -> None:
    """Put the calling thread, and Polars' worker threads, at nice ``level`` at least.

    An executor initializer for the client's parsing threads. Linux keeps a nice value per
    thread, so this touches no thread but those; elsewhere, or where the system refuses,
    nothing changes. An unprivileged process cannot take a raised nice value back, so Polars'
    worker threads stay at ``level`` for the life of the process (``parse_nice=0`` leaves
    every thread as it is). Polars starts its threads on first use: those started later by a
    parsing thread inherit its level.
    """
    if level <= 0 or not sys.platform.startswith("linux"):
        return
    _at_least(0, level)
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue  # the thread has ended
        if name.startswith(_POLARS_THREADS):
            _at_least(int(tid), level)


def _at_least(tid: int, level: int) -> None:
    try:
        if os.getpriority(os.PRIO_PROCESS, tid) < level:
            os.setpriority(os.PRIO_PROCESS, tid, min(19, level))
    except OSError:
        pass
