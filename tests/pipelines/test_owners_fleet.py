"""The fleet on Dagster: the sensor keeps one partition per owner and asks for shard runs; a
shard run refreshes its owners (a real run, in process) into their warehouses and the lake."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest

from centsync.pipelines.clients import api_client
from centsync.pipelines.defs.resources import settings_resource
from centsync.pipelines.fleet import definitions as fleet_defs
from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
from centsync.pipelines.settings import Settings
from centsync.sandbox import SandboxConfig
from centsync.sandbox.fleet import Fleet, key_variable, owners_toml
from centsync.sandbox.server import run_in_thread
from centsync.warehouse import lake as lake_module
from centsync.warehouse.lake import collect, publish_many
from helpers import START

pytestmark = pytest.mark.e2e


@pytest.fixture
def fleet_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Fleet, Settings]]:
    fleet = Fleet.build(3, SandboxConfig(seed=41, years=1, start=START))
    with run_in_thread(fleet) as base_url:
        owners_file = tmp_path / "owners.toml"
        owners_file.write_text(owners_toml(fleet.owners, base_url), "utf-8")
        monkeypatch.setenv("CENTSYNC_OWNERS_FILE", str(owners_file))
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        for name, keys in fleet.keys.items():
            monkeypatch.setenv(key_variable(name), keys["read_only"])
        yield fleet, Settings.from_env()


def test_the_sensor_adds_a_partition_per_owner_and_asks_for_shard_runs(
    fleet_env: tuple[Fleet, Settings],
) -> None:
    _fleet, settings = fleet_env
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance)
        result = fleet_defs.owners_sensor(context)
        assert isinstance(result, dg.SensorResult)
        [add] = result.dynamic_partitions_requests or []
        assert isinstance(add, dg.AddDynamicPartitionsRequest)
        assert list(add.partition_keys) == ["owner-001", "owner-002", "owner-003"]
        [run] = result.run_requests or []
        assert run.tags[fleet_defs.RANGE_START] == "owner-001"
        assert run.tags[fleet_defs.RANGE_END] == "owner-003"
        assert run.tags["centsync/service"].startswith("127.0.0.1:")
        # once known, nothing new: no run; an owner removed from the file: its partition goes
        instance.add_dynamic_partitions("owners", ["owner-001", "owner-002", "owner-003", "old"])
        again = fleet_defs.owners_sensor(dg.build_sensor_context(instance=instance, cursor="1"))
        assert isinstance(again, dg.SensorResult) and not again.run_requests
        [delete] = again.dynamic_partitions_requests or []
        assert isinstance(delete, dg.DeleteDynamicPartitionsRequest)
        assert list(delete.partition_keys) == ["old"]
        # the daily schedule: shards of every known owner, one owner per run when SHARD is 1
        one = list(fleet_defs.shard_requests(settings, ["owner-001", "owner-002"], "auto", "t", 1))
        assert [r.partition_key for r in one] == ["owner-001", "owner-002"]


def test_a_shard_run_refreshes_its_owners_into_their_warehouses_and_the_lake(
    fleet_env: tuple[Fleet, Settings],
) -> None:
    fleet, settings = fleet_env
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("owners", list(fleet.owners))
        result = dg.materialize(
            [fleet_defs.owner_warehouse],
            instance=instance,
            resources={"settings": settings_resource(settings)},
            tags={fleet_defs.RANGE_START: "owner-002", fleet_defs.RANGE_END: "owner-003"},
        )
        assert result.success
        [mat] = result.asset_materializations_for_node("owner_warehouse")[:1]
        assert mat.metadata["agree"].value == 2 and mat.metadata["owners"].value == 2
        runs = instance.get_runs()
        assert runs[0].tags[fleet_defs.RANGE_END] == "owner-003"
    for name in ("owner-002", "owner-003"):
        path = settings.data_home / "owners" / name / "centsync.duckdb"
        con = duckdb.connect(str(path), read_only=True)
        try:
            n = con.execute("SELECT count(*) FROM core.transactions").fetchone()
        finally:
            con.close()
        assert n == (len(fleet.owners[name].service.ledger.rows),)
    assert not (settings.data_home / "owners" / "owner-001").exists()  # not in this shard
    from centsync.warehouse.lake import open_lake

    con = open_lake(settings.lake)
    owners = con.execute("SELECT DISTINCT owner FROM core.transactions ORDER BY 1").fetchall()
    assert owners == [("owner-002",), ("owner-003",)]
    # read from each refresh's working copy: exactly what its published warehouse holds
    totals = "SELECT count(*), sum(amount), max(updated_at) FROM core.transactions"
    for name in ("owner-002", "owner-003"):
        own = duckdb.connect(str(settings.data_home / "owners" / name / "centsync.duckdb"), True)
        try:
            expected = own.execute(totals).fetchall()
        finally:
            own.close()
        assert con.execute(f"{totals} WHERE owner = '{name}'").fetchall() == expected
    con.close()
    # the shard published into one lake shard, in one commit per table
    from deltalake import DeltaTable

    table = settings.lake / "core" / "transactions"
    assert {u.split("/shard=")[1].split("/")[0] for u in DeltaTable(table).file_uris()} == {
        "owner-002"
    }
    assert len(list((table / "_delta_log").glob("*.json"))) == 1
    # the daily schedule's runs follow the lake's shards: owner-001 (not published yet) is
    # not put in owner-002's run, though its partition comes first
    daily = list(fleet_defs.shard_requests(settings, list(fleet.owners), "auto", "d"))
    assert [r.tags["centsync/shard"] for r in daily] == ["owner-001", "owner-002..owner-003"]

    # the daily maintenance: a real run of the fleet's job, through its own definitions
    defs = fleet_defs.build(settings)
    run = defs.get_job_def("lake_maintenance_job").execute_in_process(
        run_config={"ops": {"maintain_lake": {"config": {"retain_hours": 0}}}}
    )
    assert run.success
    assert list((table / "_delta_log").glob("*.checkpoint.parquet"))
    assert [s.cron_schedule for s in defs.schedules if s.name == "lake_maintenance"] == [
        "0 3 * * *"
    ]


def test_a_lake_failure_never_stops_an_owners_refresh(
    fleet_env: tuple[Fleet, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet, settings = fleet_env
    from centsync.pipelines.fleet.shard import refresh_shard
    from centsync.warehouse import lake

    def unreadable(*_: object) -> None:
        raise OSError("the lake's disk went away")

    monkeypatch.setattr(lake, "collect", unreadable)  # a fault in the lake, nowhere else
    [result] = refresh_shard(settings, ["owner-001"], 1)
    # the owner's warehouse is refreshed and published; the shard run names the lake's trouble
    assert result.verdict == "agree"
    assert result.error == "lake: OSError: the lake's disk went away"
    path = settings.data_home / "owners" / "owner-001" / "centsync.duckdb"
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute("SELECT count(*) FROM core.transactions").fetchone()
    finally:
        con.close()
    assert rows == (len(fleet.owners["owner-001"].service.ledger.rows),)
    assert not (settings.lake / "core").exists()  # nothing half-published


def test_the_marts_from_the_refresh_frames_are_the_rows_a_read_gives(
    fleet_env: tuple[Fleet, Settings], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh hands the lake the mart frames it wrote: the lake's tables from those frames
    are the very rows and types a read of the working copy gives (lake.collect)."""
    _fleet, settings = fleet_env
    lake = tmp_path / "frames-lake"
    seen: dict[str, object] = {}
    from_frames: list[str] = []
    original = lake_module._from_frame

    def spy(*args: object, **kwargs: object) -> object:
        got = original(*args, **kwargs)  # type: ignore[arg-type]
        if got is not None:
            from_frames.append(args[1][2])  # type: ignore[index]
        return got

    monkeypatch.setattr(lake_module, "_from_frame", spy)

    def finished(con: duckdb.DuckDBPyConnection, marts: Mapping[str, pl.DataFrame]) -> None:
        seen["marts"] = sorted(marts)
        seen["framed"] = collect(con, lake, "owner-001", marts)
        seen["read"] = collect(con, lake, "owner-001")

    config = settings.for_owner("owner-001")
    with api_client(config) as client:
        summary = run_refresh(
            client, config.warehouse, RefreshOptions(mode="full", finished=finished)
        )
    assert summary.verdict == "agree"
    framed, read = seen["framed"], seen["read"]
    # the service's seven and the analysts' six (issue 46: the analysts' are not read back)
    assert len(seen["marts"]) == 13  # type: ignore[arg-type]
    by_key = {key: (data, mark) for key, data, mark in read.tables}  # type: ignore[attr-defined]
    assert [k for k, _, _ in framed.tables] == list(by_key)  # type: ignore[attr-defined]
    for key, data, mark in framed.tables:  # type: ignore[attr-defined]
        expected, expected_mark = by_key[key]
        assert data.schema == expected.schema, key
        assert data.sort_by([(c, "ascending") for c in data.column_names[:3]]).equals(
            expected.sort_by([(c, "ascending") for c in expected.column_names[:3]])
        ), key
        assert mark == expected_mark, key
    assert sorted(from_frames) == seen["marts"]  # every mart came from its frame, once
    # published once, the same tables collected again (from frames or read) commit nothing
    publish_many([framed], lake)  # type: ignore[list-item]
    with duckdb.connect(str(config.warehouse), read_only=True) as con:
        assert collect(con, lake, "owner-001").tables == []


def test_refresh_all_is_the_shard_engine_and_one_owners_failure_is_its_own(
    fleet_env: tuple[Fleet, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`refresh --all`'s engine: every owner through `refresh_shard`, a lake shard at a time; an
    owner whose key is not set exits 2 alone, the others are refreshed, reported and published."""
    from centsync.pipelines.fleet.run_all import refresh_all
    from centsync.pipelines.fleet.shard import HowToRefresh
    from centsync.pipelines.outputs.report import default_path
    from centsync.warehouse.lake import open_lake

    fleet, settings = fleet_env
    monkeypatch.delenv(key_variable("owner-002"))
    result = refresh_all(settings, 2, HowToRefresh(report=True, writeback=True))
    doc = result.to_json()
    assert list(doc["owners"]) == ["owner-001", "owner-002", "owner-003"]
    failed = doc["owners"]["owner-002"]
    assert failed["exit_code"] == 2 and "export CENTSYNC_KEY_OWNER_002=" in failed["error"]
    assert (doc["agree"], doc["failed"], doc["exit_code"]) == (2, 1, 2)
    for name in ("owner-001", "owner-003"):
        own = doc["owners"][name]
        assert (own["verdict"], own["exit_code"], own["mode"]) == ("agree", 0, "full")
        assert own["rows"] == len(fleet.owners[name].service.ledger.rows)
        assert (own["lake"]["batch"], own["lake"]["shard"]) == (2, "owner-001")
        assert default_path(Path(own["warehouse"])).exists()  # --report
    con = open_lake(settings.lake)
    assert con.execute("SELECT DISTINCT owner FROM core.transactions ORDER BY 1").fetchall() == [
        ("owner-001",),
        ("owner-003",),
    ]
    con.close()
    # the months asked for, for every owner (`refresh --all --months`), each owner's write-back
    # first: a row in owner-003's inbox is posted (its read-write key) and read back at once
    service = fleet.owners["owner-003"].service
    account = next(a for a in service.accounts.values() if not a.hidden)
    day = (START - timedelta(days=1)).date().isoformat()
    inbox = Path(doc["owners"]["owner-003"]["warehouse"]).parent / "inbox"
    inbox.mkdir(exist_ok=True)
    (inbox / "lunch.csv").write_text(
        f"event_id,account,booked_at,amount,concept,category,notes\nl-1,{account.name},{day},"
        "-4.40,Lunch together,,\n",
        "utf-8",
    )
    monkeypatch.setenv(key_variable("owner-003"), fleet.keys["owner-003"]["read_write"])
    month = START.strftime("%Y-%m")
    again = refresh_all(settings, 1, HowToRefresh(months=f"{month}..{month}", writeback=True))
    assert [(r.owner, r.mode, r.exit_code) for r in again.owners.values()][::2] == [
        ("owner-001", "months", 0),
        ("owner-003", "months", 0),
    ]
    assert again.owners["owner-003"].rows == doc["owners"]["owner-003"]["rows"] + 1
