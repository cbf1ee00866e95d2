"""The one resource the assets use: the run's `Settings` (the API, the warehouse, the knobs).

A run the CLI starts gets the CLI's own object (`definitions.build(settings)`), so the embedded
sandbox's URL and key reach the run as a resource instance: never through the environment, and
never in the run's config or event log. A run Dagster starts itself (the UI, a schedule, the
sensor) reads its settings from the environment when the run starts: still the edge.
"""

import dagster as dg

from centsync.extract import ApiClient
from centsync.pipelines.settings import Settings

# requests in flight at once per client (the service's limits are per key)
CONCURRENCY = 2


def settings_resource(settings: Settings | None = None) -> dg.ResourceDefinition:
    """The run's settings: the object given, else `Settings.from_env()` when the run starts."""
    if settings is not None:
        return dg.ResourceDefinition.hardcoded_resource(settings, "The command's settings.")
    return dg.ResourceDefinition(
        resource_fn=lambda _context: Settings.from_env(),
        description="The settings the environment gives, read when the run starts.",
    )


def api_client(settings: Settings) -> ApiClient:
    """The Personal Finance Data API client of these settings (the key is never logged)."""
    # Windows are month-aligned by the refresh: the reader must not split them by date.
    return ApiClient.from_settings(settings, concurrency=CONCURRENCY, max_window_rows=10**12)


def resources(settings: Settings | None = None) -> dict[str, dg.ResourceDefinition]:
    """The resources bound to every asset, sensor and check."""
    return {"settings": settings_resource(settings)}
