"""The monthly partitions' first month: the setting's, else the ledger's own first month."""

import datetime as dt
from pathlib import Path

from centsync.pipelines.settings import Settings


def partitions_start(settings: Settings, today: dt.date | None = None) -> str:
    """The first day of the first month to partition (`YYYY-MM-DD`).

    `CENTSYNC_PARTITIONS_START` wins; else the warehouse's first booked month, so a ledger of 37
    months has 37 partitions, not every month since 2015; before the first refresh (no
    warehouse, or an empty or unreadable one) this month alone.
    """
    if settings.partitions_start:
        return settings.partitions_start
    first = ledger_first_day(settings.warehouse)
    day = first or today or dt.date.today()
    return day.replace(day=1).isoformat()


def ledger_first_day(warehouse: Path) -> dt.date | None:
    """The warehouse's first booked day, read only (None: no warehouse or no transactions)."""
    if not warehouse.exists():
        return None
    import duckdb

    from centsync.warehouse import connect_readonly, reads

    try:
        con = connect_readonly(warehouse)
    except (duckdb.Error, OSError):
        return None  # held by a writer that is not ours, or damaged: `centsync doctor` says so
    try:
        first, _ = reads.booked_range(con)
    except duckdb.Error:
        return None  # not migrated yet
    finally:
        con.close()
    if first is None:
        return None
    return first.date() if isinstance(first, dt.datetime) else first
