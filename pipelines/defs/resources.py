"""The Dagster resources (only those: the API client's factory is `pipelines/clients.py`).

The one resource the assets use is the run's `Settings` (the API, the warehouse, the knobs).

A run the CLI starts gets the CLI's own object (`definitions.build(settings)`), so the embedded
sandbox's URL and key reach the run as a resource instance: never through the environment, and
never in the run's config or event log. A run Dagster starts itself (the UI, a schedule, the
sensor) reads its settings from the environment when the run starts: still the edge.
"""

import dagster as dg

from centsync.pipelines.settings import Settings


def settings_resource(settings: Settings | None = None) -> dg.ResourceDefinition:
    """The run's settings: the object given, else `Settings.from_env()` when the run starts."""
    if settings is not None:
        return dg.ResourceDefinition.hardcoded_resource(settings, "The command's settings.")
    return dg.ResourceDefinition(
        resource_fn=lambda _context: Settings.from_env(),
        description="The settings the environment gives, read when the run starts.",
    )


def resources(settings: Settings | None = None) -> dict[str, dg.ResourceDefinition]:
    """The resources bound to every asset, sensor and check."""
    return {"settings": settings_resource(settings)}
