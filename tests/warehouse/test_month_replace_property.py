"""Property: any sequence of month replaces leaves core equal to the last read of each month."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from centsync.warehouse import Warehouse

from .builders import transactions

MONTHS = ["2023-12", "2024-01", "2024-02"]

reads = st.lists(
    st.tuples(
        st.lists(st.sampled_from(MONTHS), min_size=1, max_size=3, unique=True),
        st.integers(min_value=0, max_value=12),
        st.integers(min_value=0, max_value=3),  # a small seed space makes ids recur across reads
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=reads)
def test_core_equals_the_model_after_any_sequence_of_month_replaces(
    tmp_path: Path, steps: list[tuple[list[str], int, int]]
) -> None:
    path = tmp_path / f"p{abs(hash(str(steps)))}.duckdb"
    model: dict[str, pl.DataFrame] = {}
    with Warehouse.open(path) as wh:
        wh.start_refresh(refresh_id="prop")
        for months, n, seed in steps:
            frame = transactions(n, months=months, seed=seed)
            # The same id drawn in two months of one read is a server state we never produce.
            frame = frame.unique("id", keep="first", maintain_order=True)
            wh.replace_months(months, frame)
            # The model: a month read replaces that month; an id read now leaves any other month.
            ids = set(frame.get_column("id"))
            for m in list(model):
                model[m] = model[m].filter(~pl.col("id").is_in(list(ids)))
            for m in months:
                model[m] = frame.filter(pl.col("booked_at").dt.strftime("%Y-%m") == m)
        expected = sorted(
            (r["id"], r["amount"]) for part in model.values() for r in part.iter_rows(named=True)
        )
        got = sorted(wh.con.execute("SELECT id::VARCHAR, amount FROM core.transactions").fetchall())
        raw = wh.con.execute(
            "SELECT count(*), count(DISTINCT id) FROM raw.transactions"
        ).fetchall()[0]
    assert got == expected
    assert raw == (len(expected), len(expected))
