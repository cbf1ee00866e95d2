"""A refresh that changed nothing keeps the analysts' marts as they were built (no plan runs,
no replace); a change to anything they are built from rebuilds them; what is kept is what a
rebuild gives. Over a real refresh of the sandbox's household (in process, ASGI) and its
DuckDB file."""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Callable
from pathlib import Path

import duckdb
import httpx
import pytest

from centsync.extract import ApiClient
from centsync.pipelines import mart_build
from centsync.pipelines.reconcile import reconcile
from centsync.pipelines.refresh.run import run_refresh
from centsync.pipelines.refresh.summary import RefreshOptions
from centsync.warehouse import analyst_marts as analyst_store
from centsync.warehouse import marts as store
from centsync.warehouse.migrate import migrate
from helpers import make_sandbox

pytestmark = pytest.mark.e2e

BASE = "http://sandbox.test"


def _tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple]]:
    return {
        name: sorted(con.execute(f"SELECT * FROM marts.{name}").fetchall(), key=repr)
        for name in analyst_store.ANALYST_TABLES
    }


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the analysts' marts were built (their plans run)."""
    calls: list[int] = []
    build = mart_build.analyst_rules.build

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return build(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(mart_build.analyst_rules, "build", counted)
    return calls


def _refreshed(tmp_path: Path) -> tuple[Callable[[], object], Path]:
    sb = make_sandbox()
    warehouse = tmp_path / "centsync.duckdb"

    def refresh() -> object:
        transport = httpx.ASGITransport(app=sb.app)
        with ApiClient(BASE, sb.keys["read_only"], transport=transport) as client:
            return run_refresh(client, warehouse, RefreshOptions(source="sandbox"))

    refresh()
    return refresh, warehouse


def test_a_refresh_that_changed_nothing_keeps_them_as_a_rebuild_gives_them(
    tmp_path: Path, builds: list[int]
) -> None:
    refresh, warehouse = _refreshed(tmp_path)
    assert builds == [1]
    with duckdb.connect(str(warehouse), read_only=True) as con:
        first = _tables(con)
        digest = analyst_store.built_from(con)
    assert digest and first["recurring_series"] and first["merchant_names"]
    summary = refresh()
    assert summary.verdict == "agree"  # type: ignore[attr-defined]
    assert builds == [1]  # nothing changed: not built again
    with duckdb.connect(str(warehouse)) as con:
        assert _tables(con) == first and analyst_store.built_from(con) == digest
        # what was kept is what a rebuild gives now
        migrate(con)
        con.execute("DELETE FROM ops.meta WHERE key = ?", [analyst_store.BUILT_FROM])
        reconcile(con, source="offline")
        assert builds == [1, 1]
        assert _tables(con) == first and analyst_store.built_from(con) == digest


def test_each_input_changed_rebuilds_them(
    tmp_path: Path, builds: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, warehouse = _refreshed(tmp_path)
    with duckdb.connect(str(warehouse)) as con:
        migrate(con)
        reconcile(con, source="offline")  # the same inputs as the refresh's build
        assert len(builds) == 1

        def rebuilt_once(change: Callable[[], object]) -> None:
            before = len(builds)
            change()
            reconcile(con, source="offline")
            assert len(builds) == before + 1, change
            reconcile(con, source="offline")  # and then kept again
            assert len(builds) == before + 1, change

        rebuilt_once(
            lambda: con.execute(
                "UPDATE core.transactions SET concept = concept || ' (edited)' "
                "WHERE id = (SELECT min(id) FROM core.transactions)"
            )
        )
        rebuilt_once(
            lambda: con.execute(
                "UPDATE core.transactions SET expense_goal_id = NULL "
                "WHERE id = (SELECT min(id) FROM core.transactions WHERE expense_goal_id "
                "IS NOT NULL)"
            )
        )
        rebuilt_once(
            lambda: con.execute(
                "UPDATE core.accounts SET name = name || ' (renamed)' "
                "WHERE id = (SELECT min(id) FROM core.accounts)"
            )
        )
        rebuilt_once(lambda: analyst_store.save_renames(warehouse, {"amazon.es": "Amazon EU"}))
        names = dict(
            con.execute("SELECT merchant, merchant_name FROM marts.merchant_names").fetchall()
        )
        assert names["amazon.es"] == "Amazon EU"
        monkeypatch.setattr(mart_build, "_code", lambda: "another version of the code")
        rebuilt_once(lambda: None)
        # another day (the service's today) is another build, as is the same day again after it
        today = dt.date(2030, 1, 1)
        before = len(builds)
        assert mart_build.rebuild_analyst_marts(con, today)
        assert mart_build.rebuild_analyst_marts(con, today) == {}
        assert len(builds) == before + 1


def test_a_big_ledgers_scan_is_always_rebuilt(tmp_path: Path, builds: list[int]) -> None:
    _, warehouse = _refreshed(tmp_path)
    today = dt.date(2030, 1, 1)
    with duckdb.connect(str(warehouse)) as con, tempfile.TemporaryDirectory() as folder:
        store.transactions_scan(con, Path(folder))
        scan = store.analyst_scan(Path(folder))
        assert scan is not None
        assert mart_build.rebuild_analyst_marts(con, today, scan)
        assert mart_build.rebuild_analyst_marts(con, today, scan)
        assert len(builds) == 3
        # its digest is not recorded: a household-sized check after it cannot match
        assert analyst_store.built_from(con) is None
