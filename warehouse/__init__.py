"""The DuckDB warehouse: schema and migrations, validated loaders, publishing, read helpers.

Knows SQL and DuckDB, never HTTP. A refresh writes a private working copy and publishes it with
an atomic rename, so analysts' read-only connections (`connect_readonly`) never block it and
never see a half-done refresh:

    with Warehouse.refreshing(mode="incremental") as wh:
        tz = wh.snapshot_settings(settings_body)          # tz.timezone_changed -> go full
        wh.snapshot_accounts(accounts_frame)
        present = wh.months_present()                     # 'YYYY-MM' with local rows
        with wh.batched() as batch:                       # months packed into ~100k-row loads
            batch.add(["2024-05"], month_frame, reason="hot window")
        wh.load_net_worth(net_worth_body)
        wh.finish_refresh(requests={"GET /v1/transactions": 3}, months_checked=120)
    # published here; on an exception the copy is discarded and a 'failed' row recorded
"""

from centsync.warehouse.errors import (
    DamagedError,
    FrameShapeError,
    MonthBoundsError,
    NoWarehouseError,
    RefreshInProgressError,
    WarehouseError,
)
from centsync.warehouse.migrate import current_version, migrate
from centsync.warehouse.paths import connect_readonly, damaged, reading
from centsync.warehouse.store import (
    LoadResult,
    MonthBatch,
    RefreshStats,
    SettingsResult,
    Warehouse,
    month_key,
    month_start,
    new_refresh_id,
)
from centsync.warehouse.validation import ENTITIES, Split, split_valid

__all__ = [
    "ENTITIES",
    "DamagedError",
    "FrameShapeError",
    "LoadResult",
    "MonthBatch",
    "MonthBoundsError",
    "NoWarehouseError",
    "RefreshInProgressError",
    "RefreshStats",
    "SettingsResult",
    "Split",
    "Warehouse",
    "WarehouseError",
    "connect_readonly",
    "current_version",
    "damaged",
    "migrate",
    "month_key",
    "month_start",
    "new_refresh_id",
    "reading",
    "split_valid",
]
