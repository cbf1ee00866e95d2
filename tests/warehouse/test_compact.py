"""A small warehouse is published compact: the same catalog and rows as a checkpointed working
copy, without the blocks the refresh freed (docs/scale.md, Storage)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from centsync.warehouse import Warehouse, connect_readonly
from centsync.warehouse import session as warehouse_session

from .builders import catalog, transactions

MONTHS = ["2024-01", "2024-02", "2024-03"]


def _refreshes(path: Path) -> None:
    """A first sync, then two refreshes that rewrite every month (as a household's daily one)."""
    for seed in (1, 2, 3):
        with Warehouse.refreshing(path, mode="full" if seed == 1 else "incremental") as wh:
            wh.replace_months(MONTHS, transactions(400, months=MONTHS, seed=seed))


def _inventory(path: Path) -> dict[str, Any]:
    con = connect_readonly(path)
    try:
        out = catalog(con)
        out["rows"] = con.execute(
            "SELECT id, amount, booked_at FROM core.transactions ORDER BY id"
        ).fetchall()
        out["refreshes"] = con.execute(
            "SELECT status, mode, rows_landed FROM ops.refreshes ORDER BY started_at"
        ).fetchall()
        out["free_blocks"] = con.execute(
            "SELECT free_blocks FROM pragma_database_size()"
        ).fetchall()
    finally:
        con.close()
    return out


def test_a_small_warehouse_is_published_compact_and_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compact = tmp_path / "compact" / "centsync.duckdb"
    _refreshes(compact)
    monkeypatch.setattr(warehouse_session, "COMPACT_MAX_BYTES", 0)  # the checkpointed copy
    plain = tmp_path / "plain" / "centsync.duckdb"
    _refreshes(plain)

    a, b = _inventory(compact), _inventory(plain)
    assert a.pop("free_blocks") == [(0,)]
    assert b.pop("free_blocks")[0][0] > 0  # what compacting saves
    assert a == b  # every table, column, comment, constraint, view and row
    assert len(a["rows"]) == 400 and len(a["constraints"]) > 100
    assert compact.stat().st_size < plain.stat().st_size
    # nothing left beside the published file
    assert sorted(p.name for p in compact.parent.iterdir() if not p.name.endswith(".lock")) == [
        "centsync.duckdb"
    ]
