"""Polars frames in and out of DuckDB, through the Arrow C stream: the one way the warehouse
reads a query into a frame (`frame`) and lets SQL read a frame (`Scan`, `register`).

Both sides speak the Arrow PyCapsule interface: a DuckDB relation has `__arrow_c_stream__`,
which Polars reads, and DuckDB scans any object that has one. Neither needs pyarrow, which the
warehouse went through before (`to_arrow_table()`, a registered `pa.Table`): its import is
0.13-0.16 s and about 34 MB of every process that refreshes a household, and its allocator kept
what passed through it (1,000,000 rows read five times: 235 MB held after, 205 MB through the
stream; `bench/arrow_stream.py`, docs/benchmarks.md). Types arrive as before: the same Arrow
schema is exported either way (`tests/warehouse/test_frames.py`). Without pyarrow loaded,
DuckDB scans a registered stream whole and projects after (3-5 % more for a million rows
inserted; nothing a first sync's window commits showed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import polars as pl


def frame(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None
) -> pl.DataFrame:
    """A query's result as a Polars frame (any half-read result of the caller's finished
    first: DuckDB 2 refuses new work on a connection while one is unfinished)."""
    con.complete()
    return pl.DataFrame(con.sql(sql, params=list(params) if params else None))


class Scan:
    """A frame as DuckDB scans it: every scan a new Arrow C stream over the frame's own buffers
    (no copy; Polars' string views kept), so a registered frame can be read any number of
    times within a statement or a transaction."""

    __slots__ = ("frame",)

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.frame.__arrow_c_stream__(requested_schema)


def register(con: duckdb.DuckDBPyConnection, name: str, data: pl.DataFrame) -> None:
    """Expose a frame to SQL under `name` (it replaces what had that name)."""
    con.register(name, Scan(data))
