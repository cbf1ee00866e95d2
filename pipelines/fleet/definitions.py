"""The fleet's Dagster definitions: one dynamic partition per owner of the owners file, runs
that each refresh a shard of owners in one process, a sensor and a daily schedule.

    dagster dev -m centsync.pipelines.fleet.definitions     # with DAGSTER_HOME set up from
                                                            # pipelines/fleet/dagster-*.yaml

A refresh is one step, so what spreads the work is the run launcher (the default one, or
dagster-celery's `CeleryRunLauncher`), never the executor: every run is in process. The queued
run coordinator's tag limits keep one run per shard (`centsync/shard`) and per owner
(`dagster/partition`) in flight, and a limit per service (`centsync/service`); the client's own
per-key pacing does the rest (docs/scale.md).
"""

import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any

import dagster as dg

from centsync.pipelines.defs.resources import resources
from centsync.pipelines.fleet.shard import SHARD, batches, refresh_shard
from centsync.pipelines.settings import Settings

OWNERS_NAME = "owners"
OWNERS = dg.DynamicPartitionsDefinition(name=OWNERS_NAME)
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


class ShardConfig(dg.Config):
    """How a shard run refreshes its owners."""

    mode: str = "auto"  # auto, full or hot: as `centsync refresh`
    concurrency: int = 4  # owners refreshed at once in the run's process


@dg.asset(
    partitions_def=OWNERS,
    backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=SHARD),
    required_resource_keys={"settings"},
    group_name="fleet",
)
def owner_warehouse(context: dg.AssetExecutionContext, config: ShardConfig) -> dg.MaterializeResult:
    """Each owner's warehouse, refreshed and reconciled on its own, then published into the
    shared lake; a run takes a shard of owners (its partition range)."""
    settings: Settings = context.resources.settings
    owners = list(context.partition_keys)
    results = refresh_shard(settings, owners, config.concurrency, config.mode)  # type: ignore[arg-type]
    failed = {r.owner: r.error or r.verdict for r in results if r.error or r.verdict == "differ"}
    metadata: dict[str, Any] = {
        "owners": len(results),
        "agree": sum(1 for r in results if r.verdict == "agree"),
        "requests": sum(r.requests for r in results),
        "results": dg.MetadataValue.json([r.to_json() for r in results]),
    }
    if failed:
        # the run fails, naming the owners; the others' warehouses and lake rows are published
        raise dg.Failure(
            description=f"{len(failed)} of {len(results)} owners failed: {sorted(failed)[:10]}",
            metadata=metadata,
        )
    return dg.MaterializeResult(metadata=metadata)


owners_job = dg.define_asset_job("owners_refresh", selection=[owner_warehouse])


def service_of(settings: Settings, owner: str) -> str:
    """The host an owner's service is on (the `centsync/service` tag a limit applies to)."""
    from centsync.pipelines import owners

    url = owners.load(settings.owners_file).owner(owner).base_url
    return urllib.parse.urlsplit(url).netloc


def shard_requests(
    settings: Settings, keys: Sequence[str], mode: str, run_key: str, shard: int = SHARD
) -> Iterator[dg.RunRequest]:
    """One run request per shard of consecutive owners (by the partitions' order): at most
    `shard` owners, who share a lake shard (`fleet.shard.batches`)."""
    for part in batches(keys, settings.lake, shard):
        tags = {
            RANGE_START: part[0],
            RANGE_END: part[-1],
            "centsync/shard": f"{part[0]}..{part[-1]}",
            "centsync/service": service_of(settings, part[0]),
        }
        if len(part) == 1:  # a run of one owner is that owner's partition
            tags = {"centsync/shard": part[0], "centsync/service": tags["centsync/service"]}
        yield dg.RunRequest(
            run_key=f"{run_key}:{part[0]}..{part[-1]}",
            partition_key=part[0] if len(part) == 1 else None,
            run_config=dg.RunConfig(ops={"owner_warehouse": ShardConfig(mode=mode)}),
            tags=tags,
        )


# on as soon as the fleet's code location loads: it only adds the owners the file names
@dg.sensor(
    job=owners_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING
)
def owners_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """Keeps one partition per owner of the owners file, and first-syncs the new ones."""
    from centsync.pipelines import owners

    settings = Settings.from_env()  # the edge: a sensor's tick reads its settings
    configured = list(owners.load(settings.owners_file).owners)
    known = set(context.instance.get_dynamic_partitions(OWNERS_NAME))
    new = [o for o in configured if o not in known]
    gone = sorted(known - set(configured))
    requests: list[dg.RunRequest] = []
    if new:
        requests = list(shard_requests(settings, new, "auto", f"new:{context.cursor or 0}"))
    return dg.SensorResult(
        run_requests=requests,
        cursor=str(int(context.cursor or 0) + 1),
        dynamic_partitions_requests=[
            *([OWNERS.build_add_request(new)] if new else []),
            *([OWNERS.build_delete_request(gone)] if gone else []),
        ],
    )


@dg.schedule(job=owners_job, cron_schedule="0 5 * * *", execution_timezone="UTC")
def owners_daily(context: dg.ScheduleEvaluationContext) -> Iterator[dg.RunRequest]:
    """Every owner's daily refresh, in shards."""
    settings = Settings.from_env()
    keys = context.instance.get_dynamic_partitions(OWNERS_NAME)
    stamp = (
        context.scheduled_execution_time.strftime("%Y-%m-%d")
        if context.scheduled_execution_time
        else "now"
    )
    yield from shard_requests(settings, keys, "auto", f"daily:{stamp}")


class LakeConfig(dg.Config):
    """How the lake's maintenance runs."""

    retain_hours: int = 24  # versions younger than this keep their files


@dg.op(required_resource_keys={"settings"})
def maintain_lake(context: dg.OpExecutionContext, config: LakeConfig) -> None:
    """Compact each lake table's shards, checkpoint its log, delete files past the retention."""
    from centsync.warehouse.lake import lake_tables, maintain

    settings: Settings = context.resources.settings
    if not lake_tables(settings.lake):
        context.log.info(f"the lake {settings.lake} holds no tables yet: nothing to maintain")
        return
    done = maintain(settings.lake, retain_hours=config.retain_hours)
    for d in done:
        context.log.info(
            f"{d.table}: files {d.files_before} -> {d.files_after}, removed {d.removed}"
        )


@dg.job(tags={"centsync/lake": "maintenance"})
def lake_maintenance_job() -> None:
    """The shared lake's daily maintenance (`centsync lake`)."""
    maintain_lake()


# after the daily refreshes have had their hours (owners_daily starts at 05:00 UTC)
lake_maintenance = dg.ScheduleDefinition(
    name="lake_maintenance",
    job=lake_maintenance_job,
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
)


def build(settings: Settings | None = None) -> dg.Definitions:
    """The fleet's definitions; `settings` given (tests, the CLI) or read when a run starts."""
    return dg.Definitions(
        assets=[owner_warehouse],
        jobs=[owners_job, lake_maintenance_job],
        sensors=[owners_sensor],
        schedules=[owners_daily, lake_maintenance],
        resources=resources(settings),
        executor=dg.in_process_executor,
    )


defs = build()
