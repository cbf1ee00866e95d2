"""The Dagster resources (only those: the API client's factory is `pipelines/clients.py`).

The one resource the assets use is the run's `Settings` (the API, the warehouse, the knobs);
the other is the IO manager every job is bound to (`NoValues`): no step hands a value on.

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


class NoValues(dg.IOManager):
    """The IO manager of every centsync job: its assets and ops write the warehouse and record
    their results as metadata (a `MaterializeResult`, an event), so no step returns a value
    for another to load.

    Dagster's default (`fs_io_manager`, values pickled under the Dagster home) is made at the
    start of every run whether or not anything is stored, and making it imports UPath and
    fsspec (whose entry-point scan reads every installed package's metadata): about 50 ms of
    every CLI refresh (docs/benchmarks.md, "Twelfth round"). A step that returns a value fails
    here, named, instead of leaving a pickle that nothing reads.
    """

    def handle_output(self, context: dg.OutputContext, obj: object) -> None:
        if obj is None:
            return
        raise dg.DagsterInvariantViolationError(
            f"step {context.step_key!r} returned a value ({type(obj).__name__}) as its output "
            f"{context.name!r}: centsync's steps return no value (they record their results as "
            "metadata); return None, or a MaterializeResult from an asset"
        )

    def load_input(self, context: dg.InputContext) -> object:
        raise dg.DagsterInvariantViolationError(
            f"input {context.name!r} asks for a value: centsync's steps hand none on "
            "(an asset that needs another's data reads it from the warehouse)"
        )


IO_DESCRIPTION = "Steps hand no values on: their results are recorded as metadata (NoValues)."


def resources(settings: Settings | None = None) -> dict[str, dg.ResourceDefinition]:
    """The resources bound to every asset, sensor and check of both code locations."""
    return {
        "settings": settings_resource(settings),
        "io_manager": dg.IOManagerDefinition.hardcoded_io_manager(NoValues(), IO_DESCRIPTION),
    }
