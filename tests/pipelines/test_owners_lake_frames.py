"""A refresh hands the lake the mart frames it wrote: the lake's tables from those frames are
the very rows and types a read of the working copy gives (warehouse/lake.py, `collect`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb
import polars as pl
import pytest

from centsync.pipelines.defs.resources import api_client
from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
from centsync.pipelines.settings import Settings
from centsync.sandbox import SandboxConfig
from centsync.sandbox.fleet import Fleet, key_variable, owners_toml
from centsync.sandbox.server import run_in_thread
from centsync.warehouse import lake as lake_module
from centsync.warehouse.lake import collect, publish_many
from helpers import START


def test_the_marts_from_the_refresh_frames_are_the_rows_a_read_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = Fleet.build(1, SandboxConfig(seed=43, years=1, start=START))
    lake = tmp_path / "lake"
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

    with run_in_thread(fleet) as base_url:
        owners_file = tmp_path / "owners.toml"
        owners_file.write_text(owners_toml(fleet.owners, base_url), "utf-8")
        monkeypatch.setenv("CENTSYNC_OWNERS_FILE", str(owners_file))
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        for name, keys in fleet.keys.items():
            monkeypatch.setenv(key_variable(name), keys["read_only"])
        config = Settings.from_env().for_owner("owner-001")
        with api_client(config) as client:
            summary = run_refresh(
                client, config.warehouse, RefreshOptions(mode="full", finished=finished)
            )
    assert summary.verdict == "agree"
    framed, read = seen["framed"], seen["read"]
    assert len(seen["marts"]) == 7  # type: ignore[arg-type]
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
