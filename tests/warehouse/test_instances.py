"""A small warehouse's working copy is attached to its thread's DuckDB instance, not opened in
an instance of its own (warehouse/instances.py): same files, same rows, one instance start per
thread; a failure starts a new instance; threads never share one."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pytest

from centsync.warehouse import NoWarehouseError, Warehouse, connect_readonly, instances, paths

from .builders import transactions

MONTHS = ["2024-01", "2024-02"]
WORK = paths._WORK_MARK  # a working copy's name


def _refresh(path: Path, seed: int) -> None:
    with Warehouse.refreshing(path, mode="full" if seed == 1 else "incremental") as wh:
        wh.refresh_settings(memory="200MB", single_thread=True)
        wh.replace_months(MONTHS, transactions(50, months=MONTHS, seed=seed))


def _rows(path: Path) -> list[tuple[object, ...]]:
    con = connect_readonly(path)
    try:
        return con.execute("SELECT id, amount FROM core.transactions ORDER BY id").fetchall()
    finally:
        con.close()


@pytest.fixture(autouse=True)
def _fresh_thread_instance() -> None:
    instances._thread.home = None  # each test starts without this thread's instance


def test_refreshes_of_small_warehouses_share_their_threads_instance(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "centsync.duckdb", tmp_path / "b" / "centsync.duckdb"
    _refresh(a, 1)  # a first sync: no published file to size, an instance of its own
    assert instances.thread_instance() is None
    _refresh(b, 1)
    _refresh(a, 2)
    home = instances.thread_instance()
    assert home is not None
    _refresh(b, 2)
    _refresh(a, 3)
    assert instances.thread_instance() is home  # started once for three refreshes
    assert instances.attached_files() == []  # every working copy detached
    assert not [p for p in a.parent.iterdir() if WORK in p.name or p.suffix == ".wal"]
    expected = sorted(
        (r["id"], r["amount"]) for r in transactions(50, months=MONTHS, seed=3).to_dicts()
    )
    assert [(str(i), amt) for i, amt in _rows(a)] == expected


def test_a_failed_refresh_starts_a_new_instance_and_leaves_the_published_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "centsync.duckdb"
    _refresh(path, 1)
    _refresh(path, 2)
    before, home = _rows(path), instances.thread_instance()
    assert home is not None
    with pytest.raises(RuntimeError, match="boom"), Warehouse.refreshing(path) as wh:
        wh.replace_months(MONTHS, transactions(50, months=MONTHS, seed=9))
        raise RuntimeError("boom")
    assert instances.thread_instance() is None  # closed: nothing of the failure lingers
    with pytest.raises(duckdb.ConnectionException):
        home.execute("SELECT 1")
    assert _rows(path) == before
    assert not [p for p in path.parent.iterdir() if WORK in p.name or p.suffix == ".wal"]
    _refresh(path, 3)  # the next refresh gets a new instance and works
    assert instances.thread_instance() is not None


def test_a_setting_already_in_effect_is_not_set_again(tmp_path: Path) -> None:
    path = tmp_path / "centsync.duckdb"
    _refresh(path, 1)
    _refresh(path, 2)
    home = instances.thread_instance()
    assert home is not None
    assert instances.applied_settings() == {
        "memory_limit": "'200MB'",
        "threads": "1",
        "enable_optimizer": "false",
    }
    with Warehouse.refreshing(path) as wh:
        # the last refresh's settings are in effect: as DuckDB reports them
        assert wh.con.execute("SELECT current_setting('threads')").fetchall() == [(1,)]
        wh.refresh_settings(memory="300MB", single_thread=False)
        got = wh.con.execute(
            "SELECT current_setting('threads'), current_setting('enable_optimizer'), "
            "current_setting('memory_limit')"
        ).fetchall()[0]
        fresh = duckdb.connect()
        default_threads = fresh.execute("SELECT current_setting('threads')").fetchall()[0][0]
        fresh.close()
        assert got[0] == default_threads and got[1] is True
        assert got[2] == "286.1 MiB"  # 300 MB
    assert instances.applied_settings() == {"memory_limit": "'300MB'"}


def test_a_big_warehouse_keeps_an_instance_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "centsync.duckdb"
    _refresh(path, 1)
    monkeypatch.setattr(instances, "SHARED_MAX_BYTES", path.stat().st_size - 1)
    _refresh(path, 2)
    assert instances.thread_instance() is None
    assert len(_rows(path)) == 50


def test_threads_refreshing_at_once_each_have_their_own_instance(tmp_path: Path) -> None:
    paths = [tmp_path / f"o{i}" / "centsync.duckdb" for i in range(2)]
    for p in paths:
        _refresh(p, 1)
    homes: dict[int, list[int]] = {}
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def owner(i: int) -> None:
        try:
            for seed in (2, 3):
                with Warehouse.refreshing(paths[i]) as wh:
                    barrier.wait(timeout=30)  # both working copies attached at once
                    wh.refresh_settings(memory="200MB", single_thread=i == 0)
                    wh.replace_months(MONTHS, transactions(50, months=MONTHS, seed=seed + i))
                    home = instances.thread_instance()
                    assert home is not None
                    homes.setdefault(i, []).append(id(home))
                    assert len(instances.attached_files()) == 1
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=owner, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(homes[0])) == 1 and len(set(homes[1])) == 1
    assert set(homes[0]) != set(homes[1])
    for i, p in enumerate(paths):
        expected = transactions(50, months=MONTHS, seed=3 + i)
        assert sorted(str(r[0]) for r in _rows(p)) == sorted(expected.get_column("id").to_list())


def test_a_publishing_session_nested_in_a_refresh_shares_the_instance(tmp_path: Path) -> None:
    outer, inner = tmp_path / "a" / "centsync.duckdb", tmp_path / "b" / "centsync.duckdb"
    for p in (outer, inner):
        _refresh(p, 1)
    with Warehouse.refreshing(outer) as wh:
        wh.replace_months(MONTHS, transactions(50, months=MONTHS, seed=2))
        with Warehouse.publishing(inner) as other:
            assert len(instances.attached_files()) == 2
            other.replace_months(MONTHS, transactions(50, months=MONTHS, seed=4))
        assert len(instances.attached_files()) == 1
    assert instances.attached_files() == []
    assert len(_rows(outer)) == 50 and len(_rows(inner)) == 50


def test_a_read_of_a_small_warehouse_attaches_it_read_only_to_the_threads_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = tmp_path / "a" / "centsync.duckdb"
    _refresh(a, 1)
    _refresh(a, 2)  # a daily refresh: the thread's instance is started
    home = instances.thread_instance()
    assert home is not None
    with paths.reading(a) as con:
        assert instances.attached_files() == [str(a)]
        got = con.execute("SELECT id, amount FROM core.transactions ORDER BY id").fetchall()
        assert got == _rows(a)
        with pytest.raises(duckdb.Error, match="read-only"):
            con.execute("DELETE FROM core.transactions")
        with paths.reading(a) as again:  # the same file twice: an instance of its own
            assert again.execute("SELECT count(*) FROM core.transactions").fetchone() == (50,)
        monkeypatch.chdir(a.parent)
        with paths.reading(Path(a.name)) as again:  # named another way: the same file
            assert again.execute("SELECT count(*) FROM core.transactions").fetchone() == (50,)
    assert instances.thread_instance() is home  # no new instance for the reads
    assert instances.attached_files() == []
    _refresh(a, 3)  # the published file is free to be replaced
    with paths.reading(a) as con:
        assert con.execute("SELECT count(*) FROM core.transactions").fetchone() == (50,)
    assert instances.attached_files() == []


def test_a_read_of_a_big_warehouse_opens_an_instance_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = tmp_path / "a" / "centsync.duckdb"
    _refresh(a, 1)
    monkeypatch.setattr(instances, "SHARED_MAX_BYTES", 1)
    with paths.reading(a) as con:
        assert con.execute("SELECT count(*) FROM core.transactions").fetchone() == (50,)
    assert instances.thread_instance() is None  # never started for the read
    with pytest.raises(NoWarehouseError), paths.reading(tmp_path / "none.duckdb"):
        pass
