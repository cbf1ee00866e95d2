"""A month re-read diffs the rows against core and raw within DuckDB's memory limit (issue 46).

The diff compares each payload as sent by its 128-bit MD5, not its text: with the texts in the
join, a full re-read of 200,000 rows (a 170,000-row window) ran out of the refresh's 160 MB
(`bench/refresh.py --transactions 200000`). Here 12,000 rows of 2 KB payloads (24 MB of text on
each side of the join) are re-read under a 48 MB limit: every row is compared, one changed
field that core does not keep is still found, and nothing else is rewritten.
"""

from __future__ import annotations

import orjson
import polars as pl

from centsync.warehouse import LoadResult, Warehouse

from .builders import transactions

MONTHS = ["2024-01", "2024-02"]
LIMIT = "48MB"  # the texts' join needs more than 64 MB here


def _padded(frame: pl.DataFrame, note: str) -> pl.DataFrame:
    pad = "x" * 2000
    raws = [
        orjson.dumps({**orjson.loads(r), "note": note, "pad": pad}).decode() for r in frame["raw"]
    ]
    return frame.with_columns(pl.Series("raw", raws, dtype=pl.String))


def _reread(wh: Warehouse, frame: pl.DataFrame) -> LoadResult:
    """As a refresh re-reads a window: the batches staged, then the months replaced."""
    stage = wh.stage_transactions()
    for batch in frame.iter_slices(3_000):
        stage.add(batch)
    return stage.commit(MONTHS)


def test_a_reread_of_big_payloads_fits_a_small_memory_limit(wh: Warehouse) -> None:
    frame = _padded(transactions(12_000, months=MONTHS, seed=3), "as sent")
    wh.replace_months(MONTHS, frame)
    wh.con.execute(f"SET memory_limit = '{LIMIT}'; SET threads = 1")
    try:
        same = _reread(wh, frame)
        assert (same.inserted, same.updated, same.deleted) == (0, 0, 0)
        first = frame["id"][0]
        edited = pl.concat(
            [_padded(frame.head(1), "edited on the service"), frame.slice(1)], how="vertical"
        )
        changed = _reread(wh, edited)
    finally:
        wh.con.execute("RESET memory_limit; RESET threads")
    assert (changed.inserted, changed.deleted) == (0, 0)
    kept = wh.con.execute(
        "SELECT raw->>'note' FROM raw.transactions WHERE id = ?::UUID", [first]
    ).fetchall()
    assert kept == [("edited on the service",)]
    counts = wh.con.execute(
        "SELECT (SELECT count(*) FROM core.transactions), (SELECT count(*) FROM raw.transactions)"
    ).fetchall()
    assert counts == [(12_000, 12_000)]
