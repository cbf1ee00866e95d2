"""What every loader shares: load results, refresh counters, SQL fragments (and the kernel's
month names, re-exported)."""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import duckdb
import orjson
import polars as pl

# The shared kernel's calendar, re-exported (explicitly, `as`) for the warehouse modules and
# callers that import the month names from here.
from centsync.transform.calendar import MonthLike as MonthLike
from centsync.transform.calendar import month_key as month_key
from centsync.transform.calendar import month_start as month_start
from centsync.transform.contract import RefreshMode as RefreshMode

Period = Literal["month", "year"]

# Columns of core.transactions compared to decide whether a re-read row changed.
_TX_COMPARED = (
    "account_id",
    "concept",
    "amount",
    "booked_at",
    "type",
    "category_id",
    "expense_goal_id",
    "created_at",
    "updated_at",
)
_TX_SELECT = """
    id::UUID AS id, account_id::UUID AS account_id, concept, amount, booked_at,
    date_trunc('month', booked_at)::DATE AS month, type, category_id::UUID AS category_id,
    expense_goal_id::UUID AS expense_goal_id, created_at, updated_at
"""


def new_refresh_id() -> str:
    """A sortable, unique refresh id: UTC time then a random suffix."""
    now = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{now}-{uuid.uuid4().hex[:8]}"


@dataclass
class LoadResult:
    """What one load did: rows landed and rejected, and how the current state changed."""

    entity: str
    landed: int = 0
    rejected: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    moved_from: list[str] = field(default_factory=list)  # other months rows moved out of

    @property
    def changed(self) -> int:
        """Rows added, altered or removed in the current state."""
        return self.inserted + self.updated + self.deleted


@dataclass
class SettingsResult:
    """The outcome of a settings snapshot: the timezone before and after."""

    previous_timezone: str | None
    timezone: str | None
    rejected: int = 0

    @property
    def timezone_changed(self) -> bool:
        """True when a known earlier timezone differs from the new one (every month is stale)."""
        return (
            self.previous_timezone is not None
            and self.timezone is not None
            and self.previous_timezone != self.timezone
        )


@dataclass
class RefreshStats:
    """Counters a refresh accumulates as it loads; written to ops.refreshes at the end."""

    rows_landed: int = 0
    rows_changed: int = 0  # rows of every entity (accounts, settings, ... too)
    rows_rejected: int = 0
    months_reread: list[dict[str, Any]] = field(default_factory=list)
    # the transactions alone: new to the warehouse, altered, gone from the service
    transactions_new: int = 0
    transactions_updated: int = 0
    transactions_removed: int = 0

    @property
    def transaction_counts(self) -> tuple[int, int, int]:
        """The transactions new, updated and removed (ops.refreshes' columns, in that order)."""
        return self.transactions_new, self.transactions_updated, self.transactions_removed

    def add(self, result: LoadResult) -> None:
        """Count one load."""
        self.rows_landed += result.landed
        self.rows_changed += result.changed
        self.rows_rejected += result.rejected
        if result.entity == "transactions":
            self.transactions_new += result.inserted
            self.transactions_updated += result.updated
            self.transactions_removed += result.deleted


def _month_filter(column: str, months: Sequence[dt.date]) -> str:
    """`column IN (DATE '...', ...)` over first-of-month dates (built from dates, never text)."""
    literals = ", ".join(f"DATE '{m.isoformat()}'" for m in months)
    return f"{column} IN ({literals})"


def _date_ranges(column: str, months: Sequence[dt.date]) -> str:
    """A predicate matching dates within any of the months, with consecutive months merged."""
    ranges: list[tuple[dt.date, dt.date]] = []
    for m in sorted(months):
        end = (m + dt.timedelta(days=32)).replace(day=1)
        if ranges and ranges[-1][1] == m:
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((m, end))
    return (
        "("
        + " OR ".join(
            f"({column} >= DATE '{a.isoformat()}' AND {column} < DATE '{b.isoformat()}')"
            for a, b in ranges
        )
        + ")"
    )


def _frame(records: list[dict[str, Any]], columns: list[str]) -> pl.DataFrame:
    """A frame from small dict records, every value as text or int as sent (validation types it)."""
    data: dict[str, list[Any]] = {c: [r.get(c) for r in records] for c in columns}
    schema: dict[str, pl.DataType] = {}
    for c, values in data.items():
        present = [x for x in values if x is not None]
        if present and all(isinstance(x, int) and not isinstance(x, bool) for x in present):
            schema[c] = pl.Int64()
        else:
            schema[c] = pl.String()
            data[c] = [
                None if x is None else (x if isinstance(x, str) else _text(x)) for x in values
            ]
    return pl.DataFrame(data, schema=schema)


def _text(value: Any) -> str:
    # Non-text values in a text-or-int column (a float amount, a bool) stay visible as JSON text
    # so validation rejects them with the value in the reason.
    return orjson.dumps(value).decode()


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """One DuckDB transaction: commit on success, roll back on any exception."""
    con.begin()
    try:
        yield con
        con.commit()
    except BaseException:
        # an interrupted query has already ended the transaction: nothing to roll back
        with contextlib.suppress(duckdb.TransactionException):
            con.rollback()
        raise


def write_metas(con: duckdb.DuckDBPyConnection, values: Mapping[str, str | None]) -> None:
    """Set ops.meta keys in the transaction open on `con` (a load's own, so a key such as a
    first sync's resume point commits with the rows it describes, or not at all)."""
    if not values:
        return
    rows = ", ".join("(?, ?, now())" for _ in values)
    params = [part for item in values.items() for part in item]
    keys = ", ".join("?" for _ in values)
    # DELETE then INSERT, not an upsert (DuckDB's costs ~1.5 ms more a statement)
    con.execute(f"DELETE FROM ops.meta WHERE key IN ({keys})", list(values))
    con.execute(f"INSERT INTO ops.meta (key, value, updated_at) VALUES {rows}", params)


# Up to this many rows, a payload is checked as JSON here (orjson, ~2 µs a row) before
# DuckDB is asked (a statement and a registered frame: ~2.5 ms, whatever the rows)
PARSED_HERE = 500


def all_json(raw: pl.Series) -> bool:
    """True when every payload is strict JSON (RFC 8259, as orjson reads it), which DuckDB's
    JSON type also reads; False sends the frame to DuckDB's own `json_valid`, which decides."""
    try:
        for text in raw:
            if text is None:
                return False
            orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True
