"""The monthly partitions' first month (the setting's, else the ledger's own first month) and
the service's time zone: what the code location reads of the warehouse when it loads."""

import datetime as dt
from pathlib import Path
from typing import Any

from centsync.pipelines.settings import Settings


def partitions_start(
    settings: Settings, first: dt.date | None, today: dt.date | None = None
) -> str:
    """The first day of the first month to partition (`YYYY-MM-DD`).

    `CENTSYNC_PARTITIONS_START` wins; else the warehouse's first booked month (`first`, from
    `ledger_facts`), so a ledger of 37 months has 37 partitions, not every month since 2015;
    before the first refresh (no warehouse, or an empty or unreadable one) this month alone.
    """
    if settings.partitions_start:
        return settings.partitions_start
    day = first or today or dt.date.today()
    return day.replace(day=1).isoformat()


def ledger_facts(warehouse: Path) -> tuple[dt.date | None, str | None]:
    """The warehouse's first booked day and the service's time zone as the last refresh stored
    it, in one read-only open; each None when there is none yet, or when the warehouse cannot
    be read now (held by a writer that is not ours, or damaged: `centsync doctor` says so)."""
    if not warehouse.exists():
        return None, None
    import duckdb

    from centsync.warehouse import reading

    try:
        with reading(warehouse) as con:
            return _first_day(con), _timezone(con)
    except (duckdb.Error, OSError):
        return None, None


def _first_day(con: Any) -> dt.date | None:
    import duckdb

    from centsync.warehouse import reads

    try:
        first, _ = reads.booked_range(con)
    except duckdb.Error:
        return None  # not migrated yet
    if first is None:
        return None
    return first.date() if isinstance(first, dt.datetime) else first


def _timezone(con: Any) -> str | None:
    import duckdb

    from centsync.warehouse import reads

    try:
        return reads.settings_timezone(con)
    except duckdb.Error:
        return None  # not migrated yet
