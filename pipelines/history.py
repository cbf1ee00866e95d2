"""The warehouse's memory as a use case: what the service changed since a refresh or a day
(`centsync changes`), and the marts recomputed on the ledger as it stood then.

The versions are kept by the refreshes (warehouse/history.py, migration 014); the words and
the totals they move are transform/changes.py's. Plain Python, no Dagster.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import ClassVar

import duckdb
import polars as pl

from centsync.pipelines import mart_build
from centsync.pipelines.results import Change, ChangesResult
from centsync.transform import changes as change_words
from centsync.transform import marts as mart_rules
from centsync.transform.contract import Outcome
from centsync.warehouse import history
from centsync.warehouse import marts as store

_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class SinceError(ValueError):
    """--since is neither a day nor a refresh number: exit 2."""

    outcome: ClassVar[Outcome] = Outcome.USAGE
    headline: ClassVar[str] = "--since is neither a day nor a refresh number"
    what_to_do: ClassVar[str] = "give a day (2026-11-01) or a refresh number (12), and run again."


class NoHistoryError(ValueError):
    """The warehouse was last written before it kept history (migration 014): exit 2."""

    outcome: ClassVar[Outcome] = Outcome.USAGE
    headline: ClassVar[str] = "this warehouse keeps no history yet"
    what_to_do: ClassVar[str] = (
        "run `centsync refresh`: from then on every change a refresh sees is kept."
    )


def since_refresh(con: duckdb.DuckDBPyConnection, since: str | None) -> int:
    """The refresh number changes are counted after: `since` a day (YYYY-MM-DD: the last
    refresh seen before that day began), a refresh number, or None (the refresh before the
    last that landed: what the last refresh changed)."""
    if since is None:
        return history.before_last_no(con)
    text = since.strip()
    if text.isdigit():
        return int(text)
    if _DAY.match(text):
        try:
            day = dt.date.fromisoformat(text)
        except ValueError:
            raise SinceError(f"--since {since!r} is not a calendar day") from None
        return history.refresh_no_at(con, _start(day) - dt.timedelta(microseconds=1))
    raise SinceError(
        f"--since {since!r} is neither a day (2026-11-01) nor a refresh number (12; "
        '`centsync sql "FROM history.refreshes"` lists them)'
    )


def category_names(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Category id -> name (core.categories)."""
    return dict(store.categories(con).select("id", "name").iter_rows())


def changes(con: duckdb.DuckDBPyConnection, since: str | None = None) -> ChangesResult:
    """What refreshes after `since` saw the service change, by month and category."""
    if not history.kept(con):
        raise NoHistoryError("history.transaction_versions is missing (migration 014)")
    after = since_refresh(con, since)
    rows = change_words.explain(history.changes_since(con, after), category_names(con))
    return ChangesResult(
        since_refresh=after,
        to_refresh=history.latest_refresh_no(con),
        changes=[Change.model_validate(r) for r in rows],
    )


def marts_as_of(
    con: duckdb.DuckDBPyConnection,
    *,
    refresh: int | None = None,
    at: dt.datetime | dt.date | None = None,
) -> dict[str, pl.DataFrame]:
    """Every mart as the existing builders make it (transform/marts.py `build`), on the ledger
    as it stood after refresh number `refresh` or at the moment `at` (a day: its start, UTC),
    with the accounts and net worth that refresh snapshotted. Nothing is written.

    "What did October look like on 1 November": `marts_as_of(con, at=date(2026, 11, 1))`.
    """
    if (refresh is None) == (at is None):
        raise ValueError("marts_as_of takes a refresh number or a moment (one of them)")
    number = refresh if refresh is not None else history.refresh_no_at(con, _start(at))
    seen = history.refresh_seen(con, number)
    ledger = history.ledger_as_of(con, number)
    core = mart_rules.CoreFrames(
        transactions=ledger.lazy(),
        accounts=history.accounts_as_of(con, number).lazy(),
        categories=store.categories(con).lazy(),
        net_worth_history=history.net_worth_as_of(con, number).lazy(),
        today=seen.date() if seen is not None else dt.date.today(),
    )
    return mart_build.build(core, ledger, validate=False)


def _start(at: dt.datetime | dt.date | None) -> dt.datetime:
    """A moment: a day means its start (UTC); a naive time is UTC."""
    if isinstance(at, dt.datetime):
        return at if at.tzinfo else at.replace(tzinfo=dt.UTC)
    assert at is not None
    return dt.datetime.combine(at, dt.time(), dt.UTC)
