"""The Personal Finance Data API client of a run's settings: one factory for every part of
`pipelines/` that talks to the service (the Dagster assets, the fleet's shards, `refresh --plan`).

Plain Python, not a Dagster resource: `defs/resources.py` holds only Dagster's resources, so the
CLI and the fleet need not import the Dagster definitions to build a client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from centsync.extract import ApiClient

if TYPE_CHECKING:
    from centsync.pipelines.settings import Settings

# requests in flight at once per client (the service's limits are per key)
CONCURRENCY = 2


def api_client(settings: Settings) -> ApiClient:
    """The Personal Finance Data API client of these settings (the key is never logged)."""
    # Windows are month-aligned by the refresh: the reader must not split them by date.
    return ApiClient.from_settings(settings, concurrency=CONCURRENCY, max_window_rows=10**12)
