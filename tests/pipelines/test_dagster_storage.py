"""The CLI's Dagster storage (pipelines/dagster_storage.py): Dagster's SQLite files, its
connections kept, and WAL files committed without waiting for an fsync."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from centsync.pipelines.cli import instance as dagster_storage


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


def test_new_run_databases_start_from_an_empty_one_at_dagsters_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's event database is a copy of an empty one Dagster's own `_initdb` made: stamped
    at the head revision Dagster checks for, invisible to Dagster's listing of runs, and left
    alone when another process created the run's file first."""
    import dagster as dg
    from dagster import DagsterInstance
    from dagster._core.storage.event_log.sqlite import sqlite_event_log
    from dagster._core.storage.sql import check_alembic_revision, get_alembic_config

    home = tmp_path / "dagster"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    @dg.asset
    def one() -> int:
        return 1

    defs = dg.Definitions(assets=[one], jobs=[dg.define_asset_job("j", selection=[one])])
    run_ids = []
    for _ in range(2):
        with dagster_storage.instance() as instance:
            result = defs.resolve_job_def("j").execute_in_process(instance=instance)
            assert result.success
            run_ids.append(result.run_id)
    runs_dir = home / "history" / "runs"
    assert [p.name for p in runs_dir.glob(".empty-*.sqlite")] == [f".empty-{dg.__version__}.sqlite"]
    config = get_alembic_config(sqlite_event_log.__file__)
    with DagsterInstance.get() as plain:
        assert sorted(plain.event_log_storage.get_all_run_ids()) == sorted(run_ids)  # type: ignore[attr-defined]
        for run_id in run_ids:
            engine = dagster_storage.create_engine(f"sqlite:///{runs_dir / f'{run_id}.db'}")
            with engine.connect() as conn:
                db, head = check_alembic_revision(config, conn)
            engine.dispose()
            assert db == head and db is not None
            assert plain.get_run_by_id(run_id) is not None
            assert plain.get_records_for_run(run_id).records
    # a file another process made first is not replaced by the copy
    storage = dagster_storage.KeptConnectionsEventLogStorage(str(runs_dir))
    (runs_dir / "made-elsewhere.db").write_bytes(b"")
    assert not storage._start_from_empty("made-elsewhere")
    assert (runs_dir / "made-elsewhere.db").read_bytes() == b""
    assert storage._start_from_empty("fresh")
    assert not list(runs_dir.glob("*.tmp"))


def test_cli_runs_skip_stdout_capture_and_keep_every_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CLI run's output is on the terminal: its instance captures no stdout/stderr (no
    helper processes), while the instance the UI and the daemon load keeps Dagster's capture;
    the run's event log, warnings included, is whole either way."""
    import dagster as dg
    from dagster import DagsterInstance

    home = tmp_path / "dagster"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    @dg.asset
    def noisy(context) -> int:  # type: ignore[no-untyped-def]  # (a local name: no string annotation)
        print("to stdout")
        context.log.warning("a warning the UI must show")
        return 1

    defs = dg.Definitions(assets=[noisy], jobs=[dg.define_asset_job("j", selection=[noisy])])
    with dagster_storage.instance() as instance:
        assert type(instance.compute_log_manager).__name__ == "NoOpComputeLogManager"
        result = defs.resolve_job_def("j").execute_in_process(instance=instance)
        assert result.success
    with DagsterInstance.get() as plain:
        assert type(plain.compute_log_manager).__name__ == "LocalComputeLogManager"
        records = plain.get_records_for_run(result.run_id).records
        messages = [r.event_log_entry.user_message for r in records]
        assert any("a warning the UI must show" in m for m in messages)
        types = {r.event_log_entry.dagster_event_type for r in records}
        assert dg.DagsterEventType.ASSET_MATERIALIZATION in types
        assert dg.DagsterEventType.RUN_SUCCESS in types


def test_has_table_keeps_a_yes_and_asks_again_after_a_no(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    storage = dagster_storage.KeptConnectionsEventLogStorage(str(tmp_path / "runs"))
    try:
        assert storage.has_table("event_logs")
        assert not storage.has_table("made_later")
        index = tmp_path / "runs" / "index.db"
        sqlite3.connect(index).execute("CREATE TABLE made_later (x)").connection.commit()
        assert storage.has_table("made_later")
        assert storage._tables >= {"event_logs", "made_later"}
    finally:
        storage.dispose()
