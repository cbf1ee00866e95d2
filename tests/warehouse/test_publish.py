"""Publishing by atomic rename: readers in other processes keep working; kills leave it whole."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from centsync.warehouse import (
    NoWarehouseError,
    RefreshInProgressError,
    Warehouse,
    connect_readonly,
    paths,
    session,
)

from .builders import transactions


def _count(path: Path) -> int:
    con = connect_readonly(path)
    try:
        return int(con.execute("SELECT count(*) FROM core.transactions").fetchall()[0][0])
    finally:
        con.close()


def _leftovers(path: Path) -> list[str]:
    return sorted(
        p.name
        for p in path.parent.iterdir()
        if p.name != path.name and not p.name.endswith(".lock")
    )


def _seed(path: Path, n: int = 10) -> None:
    with Warehouse.refreshing(path, mode="full") as wh:
        wh.replace_months(["2024-01"], transactions(n, months=["2024-01"]))


def test_a_successful_refresh_publishes_and_leaves_no_working_copy(db_path: Path) -> None:
    _seed(db_path)
    assert _count(db_path) == 10
    assert _leftovers(db_path) == []
    con = connect_readonly(db_path)
    status = con.execute("SELECT status, mode, rows_landed FROM ops.refreshes").fetchall()
    con.close()
    assert status == [("succeeded", "full", 10)]


def test_finish_refresh_records_requests_and_months(db_path: Path) -> None:
    with Warehouse.refreshing(db_path, refresh_id="abc") as wh:
        wh.replace_months(["2024-01"], transactions(3), reason="hot window")
        wh.finish_refresh(requests={"GET /v1/transactions": 2, "GET /v1/me": 1}, months_checked=12)
    con = connect_readonly(db_path)
    row = con.execute(
        "SELECT requests->>'GET /v1/me', requests_total, months_checked, months_reread->0->>'reason' "
        "FROM ops.refreshes WHERE refresh_id = 'abc'"
    ).fetchall()
    con.close()
    assert row == [("1", 3, 12, "hot window")]


def test_a_failing_refresh_leaves_the_published_data_and_records_the_failure(db_path: Path) -> None:
    _seed(db_path)
    with pytest.raises(RuntimeError, match="server went away"), Warehouse.refreshing(db_path) as wh:
        wh.replace_months(["2024-01"], transactions(50, months=["2024-01"], seed=3))
        raise RuntimeError("server went away")
    assert _count(db_path) == 10
    assert _leftovers(db_path) == []
    con = connect_readonly(db_path)
    rows = con.execute("SELECT status, error FROM ops.refreshes ORDER BY started_at").fetchall()
    con.close()
    assert rows[0][0] == "succeeded"
    assert rows[1] == ("failed", "RuntimeError: server went away")


def test_only_one_refresh_runs_at_a_time(db_path: Path) -> None:
    with (
        Warehouse.refreshing(db_path),
        pytest.raises(RefreshInProgressError),
        Warehouse.refreshing(db_path),
    ):
        pass


def test_reading_a_warehouse_that_was_never_published_says_so(db_path: Path) -> None:
    with pytest.raises(NoWarehouseError, match="centsync refresh"):
        connect_readonly(db_path)


READER = textwrap.dedent(
    """
    import sys
    from centsync.warehouse import connect_readonly
    con = connect_readonly(sys.argv[1])
    for line in sys.stdin:
        if line.strip() == "reopen":
            con.close()
            con = connect_readonly(sys.argv[1])
        n = con.execute("SELECT count(*), sum(amount) FROM core.transactions").fetchall()[0][0]
        print(n, flush=True)
    """
)


def test_a_reader_in_another_process_keeps_working_while_a_refresh_publishes(db_path: Path) -> None:
    _seed(db_path, 10)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(db_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdin is not None and reader.stdout is not None
    try:
        reader.stdin.write("query\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "10"
        # The reader holds its read-only connection open through the whole refresh.
        with Warehouse.refreshing(db_path) as wh:
            wh.replace_months(["2024-01"], transactions(25, months=["2024-01"], seed=4))
            reader.stdin.write("query\n")
            reader.stdin.flush()
            assert reader.stdout.readline().strip() == "10"
        reader.stdin.write("query\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "10"  # its snapshot is still whole
        reader.stdin.write("reopen\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "25"
    finally:
        reader.stdin.close()
        reader.wait(timeout=20)
    assert reader.returncode == 0


WRITER = textwrap.dedent(
    """
    import sys, time, uuid, datetime as dt
    import polars as pl
    from centsync.warehouse import Warehouse
    n = 2_000
    frame = pl.DataFrame({
        "id": [str(uuid.uuid4()) for _ in range(n)],
        "account_id": [str(uuid.uuid4())] * n,
        "concept": ["x"] * n, "amount": [-1] * n,
        "booked_at": [dt.date(2024, int(sys.argv[2]), 1)] * n, "type": ["expense"] * n,
    })
    with Warehouse.refreshing(sys.argv[1]) as wh:
        wh.replace_months(["2024-%02d" % int(sys.argv[2])], frame)
        if sys.argv[3] == "progress":
            wh.publish_progress()
        print("loaded", flush=True)
        time.sleep(60)
    """
)


def _killed_writer(db_path: Path, month: int, how: str) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db_path), str(month), how],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    try:
        assert writer.stdout.readline().strip() == "loaded"
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=20)
    assert writer.returncode == -signal.SIGKILL


def test_a_sigkilled_refresh_leaves_the_published_file_whole_and_the_next_one_completes(
    db_path: Path,
) -> None:
    _seed(db_path, 10)
    _killed_writer(db_path, 2, "plain")
    assert _count(db_path) == 10  # nothing of the killed refresh is visible
    assert any(".refresh-" in name for name in _leftovers(db_path))
    with Warehouse.refreshing(db_path) as wh:
        wh.replace_months(["2024-03"], transactions(5, months=["2024-03"], seed=77))
    assert _count(db_path) == 15
    assert _leftovers(db_path) == []


def _resumable(handle: Warehouse) -> list[str]:
    """Months re-read by unfinished refreshes since the last successful one: what a stopped
    refresh's published progress kept."""
    return (
        handle.query(
            """
            SELECT DISTINCT strftime(r.month, '%Y-%m') AS month FROM ops.month_reads r
            JOIN ops.refreshes f USING (refresh_id)
            WHERE f.status <> 'succeeded'
              AND f.started_at > coalesce(
                  (SELECT max(started_at) FROM ops.refreshes WHERE status = 'succeeded'),
                  '-infinity'::TIMESTAMPTZ)
            ORDER BY 1
            """
        )
        .get_column("month")
        .to_list()
    )


def test_a_killed_refresh_resumes_from_its_published_progress(db_path: Path) -> None:
    _seed(db_path, 10)
    _killed_writer(db_path, 2, "progress")
    assert _count(db_path) == 2_010  # the progress it published is whole
    with Warehouse.refreshing(db_path, mode="full") as wh:
        assert _resumable(wh) == ["2024-02"]
        statuses = wh.query("SELECT status FROM ops.refreshes ORDER BY started_at").get_column(
            "status"
        )
        assert statuses.to_list() == ["succeeded", "interrupted", "running"]
    assert _leftovers(db_path) == []


def test_a_failure_after_published_progress_keeps_the_progress_and_says_failed(
    db_path: Path,
) -> None:
    _seed(db_path, 10)
    with pytest.raises(KeyError), Warehouse.refreshing(db_path, refresh_id="r-progress") as wh:
        wh.replace_months(["2024-02"], transactions(7, months=["2024-02"], seed=12))
        wh.publish_progress()
        wh.replace_months(["2024-03"], transactions(9, months=["2024-03"], seed=13))
        raise KeyError("boom")
    assert _count(db_path) == 17  # the published progress, not the unpublished tail
    with Warehouse.open(db_path, read_only=True) as ro:
        assert ro.refresh_status("r-progress") == "failed"
        assert _resumable(ro) == ["2024-02"]
        assert ro.months_present() == ["2024-01", "2024-02"]
    assert _leftovers(db_path) == []


def test_a_publishing_session_writes_without_a_refresh_row(db_path: Path) -> None:
    _seed(db_path, 3)
    with Warehouse.publishing(db_path) as wh:
        wh.con.execute("CREATE SCHEMA IF NOT EXISTS recon")
        wh.con.execute("CREATE TABLE recon.example AS SELECT 1 AS ok")
    con = connect_readonly(db_path)
    try:
        assert con.execute("SELECT ok FROM recon.example").fetchall() == [(1,)]
        assert con.execute("SELECT count(*) FROM ops.refreshes").fetchall() == [(1,)]
    finally:
        con.close()


def test_a_failed_first_refresh_publishes_only_its_failure(db_path: Path) -> None:
    with pytest.raises(ValueError), Warehouse.refreshing(db_path) as wh:
        wh.replace_months(["2024-01"], transactions(3))
        raise ValueError("no network")
    assert _count(db_path) == 0
    con = connect_readonly(db_path)
    try:
        assert con.execute("SELECT status, error FROM ops.refreshes").fetchall() == [
            ("failed", "ValueError: no network")
        ]
    finally:
        con.close()


def _fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """Every fsync from now on: the file's inode and the thread that asked."""
    calls: list[tuple[int, str]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        calls.append((os.fstat(fd).st_ino, threading.current_thread().name))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def _join(name: str) -> None:
    for t in threading.enumerate():
        if t.name == name:
            t.join(30)


def test_a_big_warehouse_goes_to_disk_ahead_of_its_publish_and_the_old_file_is_freed_aside(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(db_path, 50)
    old_inode = db_path.stat().st_ino
    # what counts as big, made small: this warehouse is published as it is, not compacted
    monkeypatch.setattr(session, "COMPACT_MAX_BYTES", 0)
    monkeypatch.setattr(paths, "FREE_AHEAD_BYTES", 0)
    calls = _fsyncs(monkeypatch)
    freed: list[int] = []  # inodes closed by the thread that frees a replaced file
    real_close = os.close

    def close(fd: int) -> None:
        if threading.current_thread().name == "centsync-free-replaced":
            freed.append(os.fstat(fd).st_ino)
        real_close(fd)

    monkeypatch.setattr(os, "close", close)
    with Warehouse.refreshing(db_path) as wh:
        work = wh.path.stat().st_ino
        _join("centsync-flush-ahead")  # started on the copy, before anything else
        assert (work, "centsync-flush-ahead") in calls
        wh.replace_months(["2024-02"], transactions(7, months=["2024-02"], seed=2))
        wh.flush_ahead()  # as a first sync's window does after its checkpoint
        _join("centsync-flush-ahead")
    _join("centsync-free-replaced")
    ahead = [c for c in calls if c == (work, "centsync-flush-ahead")]
    assert len(ahead) == 2
    # durability is still the publish's: the file published was fsynced by the refresh itself
    assert (work, threading.main_thread().name) in calls
    assert db_path.stat().st_ino == work != old_inode
    assert _count(db_path) == 57
    # the replaced file was let go by a thread of its own, and is not held open after
    assert freed == [old_inode]
    held = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the listing's own descriptor
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
    assert not any(h.startswith(str(db_path)) and h.endswith("(deleted)") for h in held), held


def test_a_household_warehouse_is_neither_flushed_ahead_nor_freed_aside(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(db_path)
    calls = _fsyncs(monkeypatch)
    with Warehouse.refreshing(db_path) as wh:
        wh.replace_months(["2024-02"], transactions(3, months=["2024-02"], seed=2))
        wh.flush_ahead()
    names = {t.name for t in threading.enumerate()}
    assert {"centsync-flush-ahead", "centsync-free-replaced"}.isdisjoint(names)
    assert calls and all(name == threading.main_thread().name for _, name in calls)
    assert _count(db_path) == 13


def test_flush_ahead_of_a_file_gone_and_outside_a_refresh_is_no_error(tmp_path: Path) -> None:
    errors: list[BaseException | None] = []
    hook = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)
    try:
        paths.FlushAhead().start(tmp_path / "gone.duckdb")
        _join("centsync-flush-ahead")
    finally:
        threading.excepthook = hook
    assert errors == []
    with Warehouse.open(tmp_path / "plain.duckdb") as wh:
        wh.flush_ahead()  # not a refresh's working copy: nothing to flush ahead of
        assert wh._flush._thread is None
