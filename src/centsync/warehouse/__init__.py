"""The DuckDB warehouse: schema and migrations, validated loaders, publishing, read helpers.

Knows SQL and DuckDB, never HTTP. A refresh writes a private working copy and publishes it with
an atomic rename, so analysts' read-only connections (`connect_readonly`) never block it:

    with Warehouse.refreshing() as wh:
        wh.snapshot_settings(settings)
        wh.replace_months(["2024-01"], frame, reason="hot window")
        wh.finish_refresh(requests={"GET /v1/transactions": 3})
"""

from centsync.warehouse.errors import (
    FrameShapeError,
    MonthBoundsError,
    NoWarehouseError,
    RefreshInProgressError,
    WarehouseError,
)
from centsync.warehouse.migrate import current_version, migrate
from centsync.warehouse.paths import ENV_VAR, connect_readonly, default_path
from centsync.warehouse.store import (
    LoadResult,
    MonthBatch,
    RefreshStats,
    SettingsResult,
    Warehouse,
    category_hash,
    month_key,
    month_start,
    new_refresh_id,
)
from centsync.warehouse.validation import ENTITIES, Split, split_valid

__all__ = [
    "ENTITIES",
    "ENV_VAR",
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
    "category_hash",
    "connect_readonly",
    "current_version",
    "default_path",
    "migrate",
    "month_key",
    "month_start",
    "new_refresh_id",
    "split_valid",
]
