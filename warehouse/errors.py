"""The warehouse's exceptions: one tree, caught by meaning.

WarehouseError
├── FrameShapeError        a frame lacks a required column or has an unusable type
├── MonthBoundsError       replace_months got rows outside the months it was told to replace
├── RefreshInProgressError another refresh holds the warehouse's lock
├── NoWarehouseError       nothing has been published at that path yet
├── DamagedError           a DuckDB file that cannot be read (truncated, bad header, checksums)
└── UnusableError          no DuckDB file at the warehouse's path: a folder, an empty file, another

Each says what a command that fails with it means (`outcome`: the warehouse; its exit code is
chosen at the edge, `pipelines/failures.py`) and what to do (`headline`, `what_to_do`).
"""

from __future__ import annotations

from typing import ClassVar

from centsync.transform.contract import Outcome


class WarehouseError(Exception):
    """Base of every error the warehouse raises on purpose."""

    outcome: ClassVar[Outcome | None] = Outcome.WAREHOUSE
    headline: ClassVar[str] = "the warehouse could not be written"
    what_to_do: ClassVar[str] = "see the log below."


class FrameShapeError(WarehouseError, ValueError):
    """A landed frame cannot be read at all (a programming error upstream, not a bad row)."""


class MonthBoundsError(WarehouseError, ValueError):
    """Rows handed to replace_months fall outside the months being replaced."""

    headline = "the warehouse refused a load"


class RefreshInProgressError(WarehouseError):
    """Another process is refreshing this warehouse."""

    headline = "another refresh holds the warehouse"
    what_to_do = "wait for it to finish (or stop it), then run again."


class NoWarehouseError(WarehouseError, FileNotFoundError):
    """No published warehouse exists at the path."""

    headline = "there is no warehouse yet"
    what_to_do = "run `centsync refresh` first."


# What every message about a warehouse that cannot be used advises: the one command that does
# it (paths.rebuild_aside, run by `centsync refresh --rebuild`), whatever the damage and service
REBUILD_ADVICE = (
    "run `centsync refresh --rebuild`: it keeps the file aside as `<warehouse>.damaged-<time>` "
    "(beside it; never deleted), builds a new warehouse from the service, and leaves the "
    "write-back outbox (`<warehouse>.outbox.duckdb`) as it is; or restore a backup."
)


class UnusableError(WarehouseError):
    """The warehouse's path holds something DuckDB cannot open as a warehouse (a folder, an
    empty file, a file whose header is not DuckDB's): left where it is, the recovery named."""

    headline = "the warehouse path holds no warehouse DuckDB can open"
    what_to_do = (
        "if CENTSYNC_WAREHOUSE names the wrong path, point it at the warehouse; if it is the "
        "warehouse, " + REBUILD_ADVICE
    )
    record_failure = False  # there is no warehouse to record it in


class DamagedError(WarehouseError):
    """A DuckDB file of centsync's is damaged: it is named, and what it holds is not lost."""

    headline = "the warehouse is damaged"
    what_to_do = (
        "run `centsync refresh` again: the damaged file is already kept aside (named above), so "
        "it builds a new warehouse from the service (a first sync; the write-back outbox is a "
        "separate file, untouched, and is copied in again); or put a backup in its place."
    )
