"""The CLI's Dagster storage (pipelines/dagster_storage.py): Dagster's SQLite files, its
connections kept, and WAL files committed without waiting for an fsync."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from centsync.pipelines import dagster_storage


def _synchronous(engine: object, sql: str = "PRAGMA synchronous") -> int:
    with engine.connect() as conn:  # type: ignore[attr-defined]
        return int(conn.exec_driver_sql(sql).scalar())


def test_wal_files_commit_with_normal_sync_and_journal_files_keep_full(tmp_path: Path) -> None:
    wal, journal = tmp_path / "wal.db", tmp_path / "journal.db"
    sqlite3.connect(wal).execute("PRAGMA journal_mode=WAL").close()
    sqlite3.connect(journal).execute("CREATE TABLE t (x)").close()
    # SQLite's numbering: 1 = NORMAL, 2 = FULL (the default)
    assert _synchronous(dagster_storage._kept_engine(f"sqlite:///{wal}")) == 1
    assert _synchronous(dagster_storage._kept_engine(f"sqlite:///{journal}")) == 2


def test_a_refresh_run_is_recorded_in_dagsters_own_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs made through the kept-connection storage are read back by Dagster's own classes
    (what `centsync ui` and the daemon use), and each run's event file is in WAL mode."""
    import dagster as dg
    from dagster import DagsterInstance

    home = tmp_path / "dagster"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    @dg.asset
    def one() -> int:
        return 1

    job = dg.define_asset_job("j", selection=[one])
    defs = dg.Definitions(assets=[one], jobs=[job])
    with dagster_storage.instance() as instance:
        result = defs.resolve_job_def("j").execute_in_process(instance=instance)
        assert result.success
        kept = type(instance.event_log_storage).__name__
    assert kept == "KeptConnectionsEventLogStorage"
    with DagsterInstance.get() as plain:
        assert type(plain.event_log_storage).__name__ == "SqliteEventLogStorage"
        records = plain.get_records_for_run(result.run_id).records
        success = dg.DagsterEventType.RUN_SUCCESS
        assert any(r.event_log_entry.dagster_event_type == success for r in records)
    run_db = home / "history" / "runs" / f"{result.run_id}.db"
    mode = sqlite3.connect(run_db).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
