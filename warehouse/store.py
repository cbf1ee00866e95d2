"""The Warehouse handle: one object with every loader and read helper, assembled by concern.

    session.py            opening, the working copy, publishing, transactions, ops rows
    ledger.py             month replacement, the streaming stage, month batches
    snapshots.py          accounts, connections, sync status, settings (core + history)
    server_aggregates.py  the service's aggregates (server.*)
    fingerprints.py       a range's local fingerprint, month state, the refresh's read helpers
    contract.py           ops.contract: how each "not shown" answer is read (issue 42)
    common.py             load results, refresh counters, month keys

Every name that used to live here is importable from here.
"""

from __future__ import annotations

from centsync.warehouse.common import (
    LoadResult,
    MonthLike,
    Period,
    RefreshMode,
    RefreshStats,
    SettingsResult,
    month_key,
    month_start,
    new_refresh_id,
)
from centsync.warehouse.contract import ContractStore
from centsync.warehouse.fingerprints import Fingerprints
from centsync.warehouse.ledger import Ledger, MonthBatch, TransactionStage
from centsync.warehouse.server_aggregates import ServerAggregateLoader
from centsync.warehouse.snapshots import Snapshots


class Warehouse(Ledger, Snapshots, ServerAggregateLoader, Fingerprints, ContractStore):
    """A read-write handle on one DuckDB warehouse file (usually a refresh's working copy)."""


__all__ = [
    "LoadResult",
    "MonthBatch",
    "MonthLike",
    "Period",
    "RefreshMode",
    "RefreshStats",
    "SettingsResult",
    "TransactionStage",
    "Warehouse",
    "month_key",
    "month_start",
    "new_refresh_id",
]
