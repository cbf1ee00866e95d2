"""The lake's shards: a shard run's owners publish in one commit per table into one partition,
keep it, replace only their rows, never conflict with another shard's batch; an old layout is
refused with what to do; maintenance compacts a shard's files back into one."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake

from centsync.pipelines.fleet.shard import batches
from centsync.warehouse.lake import (
    LakeLayoutError,
    Published,
    collect_file,
    maintain,
    open_lake,
    publish,
    publish_many,
)

from .test_owners_lake import _warehouse

A, B = ["a0", "a1", "a2"], ["b0", "b1", "b2"]


def _files(lake: Path, shard: str | None = None) -> int:
    uris = DeltaTable(lake / "core" / "transactions").file_uris()
    return sum(1 for u in uris if shard is None or f"/shard={shard}/" in u)


def _counts(lake: Path) -> dict[str, int]:
    con = open_lake(lake)
    try:
        found = con.execute("SELECT owner, count(*) FROM core.transactions GROUP BY 1").fetchall()
    finally:
        con.close()
    return {str(o): int(n) for o, n in found}


def _commits(lake: Path) -> int:
    return len(list((lake / "core" / "transactions" / "_delta_log").glob("*.json")))


def test_shards_publish_in_one_commit_each_and_stay_in_their_partition(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    rows = {o: 10 + i for i, o in enumerate(A + B)}
    files = {o: _warehouse(tmp_path / f"{o}.duckdb", i, rows[o]) for i, o in enumerate(A + B)}

    def batch(owners: list[str]) -> list[Published]:
        return publish_many([collect_file(files[o], lake, o) for o in owners], lake)

    with ThreadPoolExecutor(max_workers=2) as pool:
        first = [p for ps in pool.map(batch, [A, B]) for p in ps]
    assert {p.owner: p.shard for p in first} == {o: o[0] + "0" for o in A + B}
    assert _commits(lake) == 2  # one per batch, not one per owner
    assert _files(lake) == 2 and _counts(lake) == rows

    # the same shards again, every owner changed: each batch replaces its partition's file,
    # and two batches in different partitions do not conflict (no retry)
    for i, o in enumerate(A + B):
        files[o].unlink()
        _warehouse(files[o], i, 20 + i)
    with ThreadPoolExecutor(max_workers=2) as pool:
        again = [p for ps in pool.map(batch, [A, B]) for p in ps]
    assert [p.retries for p in again] == [0] * 6
    assert _files(lake, "a0") == 1 and _files(lake, "b0") == 1
    assert _counts(lake) == {o: 20 + i for i, o in enumerate(A + B)}

    # one owner alone (`centsync --owner a1 refresh`) keeps its shard; the others are kept
    files["a1"].unlink()
    _warehouse(files["a1"], 1, 3)
    alone = publish(files["a1"], lake, "a1")
    assert alone.shard == "a0" and alone.batch == 1
    assert _counts(lake) == {o: 3 if o == "a1" else 20 + i for i, o in enumerate(A + B)}
    assert _files(lake, "a0") == 1  # delta-rs writes the shard's other rows with a1's anew

    log = lake / "core" / "transactions" / "_delta_log"
    replaced = len(list((lake / "core" / "transactions" / "shard=a0").glob("*.parquet")))
    assert replaced == 3  # the files of every version are kept until a vacuum
    done = {m.table: m for m in maintain(lake, retain_hours=0)}
    assert done["core.transactions"].files_after == 2  # a file per shard
    assert done["core.transactions"].removed == 2 + 1  # a0's two old files, b0's one
    assert len(list((lake / "core" / "transactions" / "shard=a0").glob("*.parquet"))) == 1
    assert list(log.glob("*.checkpoint.parquet"))  # a reader starts from it
    assert _counts(lake) == {o: 3 if o == "a1" else 20 + i for i, o in enumerate(A + B)}
    # a republish after maintenance still replaces only its own rows
    publish(files["a1"], lake, "a1")
    assert sum(_counts(lake).values()) == 3 + sum(20 + i for i, o in enumerate(A + B) if o != "a1")


def test_batches_keep_each_owner_in_its_shard_when_owners_leave_and_join(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    files = {o: _warehouse(tmp_path / f"{o}.duckdb", i, 5 + i) for i, o in enumerate(A + B)}
    publish_many([collect_file(files[o], lake, o) for o in A], lake)
    publish_many([collect_file(files[o], lake, o) for o in B], lake)
    # a1 leaves the owners file, n0 joins it: plain chunks of 3 would put b0 with a0 and a2
    owners = ["a0", "a2", "b0", "b1", "b2", "n0"]
    assert batches(owners, lake, 3) == [["a0", "a2"], ["b0", "b1", "b2"], ["n0"]]
    assert batches(owners, lake, 2) == [["a0", "a2"], ["b0", "b1"], ["b2"], ["n0"]]
    assert batches(["n0", "n1", "n2"], lake, 2) == [["n0", "n1"], ["n2"]]  # all new: chunks
    files["n0"] = _warehouse(tmp_path / "n0.duckdb", 6, 4)
    before = _files(lake, "a0"), _files(lake, "b0")
    for batch in batches(owners, lake, 3):
        published = publish_many([collect_file(files[o], lake, o) for o in batch], lake)
        assert {p.shard for p in published} == {batch[0]}  # one partition per commit
    # only the shards that changed got a file: a0 (a1 still there, its rows kept) and n0;
    # b0's unchanged owners committed nothing
    assert _files(lake, "a0") == before[0] and _files(lake, "b0") == before[1]
    assert _files(lake, "n0") == 1
    assert _counts(lake) == {**{o: 5 + i for i, o in enumerate(A + B)}, "n0": 4}


def test_a_lake_of_the_old_layout_is_refused_with_what_to_do(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    path = _warehouse(tmp_path / "o.duckdb", 0, 5)
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    old = con.sql(
        "SELECT 'o' AS owner, CAST(id AS VARCHAR) AS id, amount, booked_at, month, type, "
        "CAST(category_id AS VARCHAR) AS category_id "
        "FROM core.transactions"
    ).to_arrow_table()
    con.close()
    write_deltalake(lake / "core" / "transactions", old, partition_by=["owner"])
    with pytest.raises(LakeLayoutError, match=r"move the lake aside .*refresh --all"):
        publish(path, lake, "o")
    # what it holds can still be read (a Polars scan: its owner is a partition column)
    con = open_lake(lake)
    assert con.execute("SELECT owner, count(*) FROM core.transactions GROUP BY 1").fetchall() == [
        ("o", 5)
    ]
    con.close()
