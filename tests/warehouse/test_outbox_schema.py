"""The outbox's table is written twice (D3 of the review): in the outbox file (`SCHEMA` of
warehouse/outbox.py) and as the warehouse's read-only copy (migration 003). A refresh copies
one into the other by name, so the two must keep the same columns, types and nullability."""

from __future__ import annotations

from pathlib import Path

import duckdb

from centsync.warehouse import migrate
from centsync.warehouse.outbox import Outbox

COLUMNS = (
    "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
    "WHERE table_schema = 'ops' AND table_name = 'outbox' ORDER BY ordinal_position"
)


def test_the_outbox_file_and_the_warehouse_copy_have_the_same_columns(tmp_path: Path) -> None:
    with Outbox(tmp_path / "centsync.outbox.duckdb").connect() as con:
        in_file = con.execute(COLUMNS).fetchall()
    con = duckdb.connect(str(tmp_path / "centsync.duckdb"))
    try:
        migrate(con)
        in_warehouse = con.execute(COLUMNS).fetchall()
    finally:
        con.close()
    assert len(in_file) > 30
    assert in_file == in_warehouse
