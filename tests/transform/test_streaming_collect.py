"""A big ledger's plans run on the streaming engine without shared subplans (issue 46).

Where two branches of one plan read the same scan (the recurring candidates: a group-by over
the ledger and the join that keeps its rows), Polars' common-subplan elimination caches the
scan whole for both: a plan that returns a few hundred rows held the ledger's columns. The
marts' `collect` turns it off on the streaming engine only, and the rows are the same.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from centsync.transform.marts import _STREAMING, collect, collect_all


def _plan(path: Path) -> pl.LazyFrame:
    rows = pl.scan_parquet(path).filter(pl.col("v") % 5 != 0)  # a branch both sides share
    busy = rows.group_by("k").agg(n=pl.len()).filter(pl.col("n") < 30).select("k")
    return rows.join(busy, on="k", how="semi").select("k", "v").sort("k", "v")


def _ledger(tmp_path: Path) -> Path:
    path = tmp_path / "t.parquet"
    pl.DataFrame({"k": [i % 97 for i in range(5_000)], "v": list(range(5_000))}).write_parquet(path)
    return path


def test_the_streaming_plan_does_not_cache_the_scan(tmp_path: Path) -> None:
    plan = _plan(_ledger(tmp_path))
    assert "CACHE" in plan.explain(engine="streaming")  # what Polars does by default
    assert "CACHE" not in plan.explain(engine="streaming", optimizations=_STREAMING)


def test_the_rows_are_the_same_on_every_engine(tmp_path: Path) -> None:
    plan = _plan(_ledger(tmp_path))
    expected = plan.collect(engine="in-memory")
    assert collect(plan, "streaming").equals(expected)
    assert collect(plan, "in-memory").equals(expected)
    both = collect_all([plan, plan.head(3)], "streaming")
    assert both[0].equals(expected) and both[1].equals(expected.head(3))
