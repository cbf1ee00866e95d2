"""What a big ledger's window sizes rely on: DuckDB's row groups in a warehouse file (issue 46).

A first sync commits each window (one INSERT into raw.transactions, into core.transactions, then
a CHECKPOINT: pipelines/refresh/read.py). DuckDB writes a commit as whole row groups of
ROW_GROUP_ROWS and one part-filled group of the rest, and a checkpoint merges neighbouring groups
wherever t + 1 of them fit in t, rewriting them. `plan.months_per_window` picks windows whose
rest is over half a row group, which no checkpoint merges; a DuckDB release that changes either
rule fails here, and the windows should be sized again (docs/benchmarks.md).
"""

from __future__ import annotations

import duckdb

from centsync.pipelines.refresh import plan
from centsync.warehouse import Warehouse
from centsync.warehouse.instances import ROW_GROUP_ROWS
from centsync.warehouse.session import checkpoint


def _commit(con: duckdb.DuckDBPyConnection, rows: int) -> None:
    """One window's commit and checkpoint, as a first sync makes them."""
    con.execute("BEGIN")
    con.execute(
        "INSERT INTO raw.transactions SELECT uuid(), DATE '2020-01-01' + (i % 3650)::INT, 'r1', "
        "json_object('i', i)::JSON FROM range(?) t(i)",
        [rows],
    )
    con.execute("COMMIT")
    checkpoint(con)


def _groups(con: duckdb.DuckDBPyConnection) -> list[int]:
    return [
        r[0]
        for r in con.execute(
            "SELECT max(count) FROM pragma_storage_info('raw.transactions') "
            "GROUP BY row_group_id ORDER BY row_group_id"
        ).fetchall()
    ]


def test_a_warehouse_file_has_row_groups_of_row_group_rows(wh: Warehouse) -> None:
    _commit(wh.con, ROW_GROUP_ROWS + 10)
    assert _groups(wh.con) == [ROW_GROUP_ROWS, 10]


def test_windows_of_the_planned_size_are_never_merged(wh: Warehouse) -> None:
    per_month = 8_300  # 1,000,000 rows over ten years
    rows = plan.months_per_window(per_month) * per_month
    assert ROW_GROUP_ROWS * 1.5 < rows < ROW_GROUP_ROWS * 2
    for _ in range(3):
        _commit(wh.con, rows)
    assert _groups(wh.con) == [ROW_GROUP_ROWS, rows - ROW_GROUP_ROWS] * 3


def test_windows_with_a_small_rest_are_merged_again(wh: Warehouse) -> None:
    # the windows before: 170,000 rows, a rest of 47,120 merged into its neighbours
    for _ in range(3):
        _commit(wh.con, 170_000)
    groups = _groups(wh.con)
    assert sum(groups) == 3 * 170_000
    assert len(groups) < 6
