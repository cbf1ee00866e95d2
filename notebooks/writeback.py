"""Write-back: the outbox by state, and the rejected rows with their reasons.

A marimo notebook over the centsync warehouse, opened read only. `centsync notebook writeback`
opens it; `python notebooks/writeback.py` runs it as a script.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="centsync: write-back")


@app.cell(hide_code=True)
def _():
    import altair as alt
    import marimo as mo
    import polars as pl

    return alt, mo, pl


@app.cell(hide_code=True)
def _(mo):
    # the opening every notebook here shares (notebooks/notebook_warehouse.py)
    from notebook_warehouse import ReadOnlyWarehouse, warehouse_path

    path = warehouse_path()
    mo.stop(
        not path.exists(),
        mo.md(f"**No warehouse at `{path}`.** Run `make demo` or `centsync refresh` first."),
    )
    wh = ReadOnlyWarehouse(path)
    con, currency, money, q, table = wh.con, wh.currency, wh.money, wh.q, wh.table
    return con, currency, money, path, q, table


@app.cell(hide_code=True)
def _(mo, path, q):
    has_outbox = bool(
        q(
            "SELECT count(*) AS n FROM duckdb_tables() "
            "WHERE schema_name = 'ops' AND table_name = 'outbox'"
        ).item()
    )
    outbox = (
        q("SELECT * EXCLUDE (body, response_body) FROM ops.outbox ORDER BY id")
        if has_outbox
        else None
    )
    mo.md(
        f"""
        # Write-back

        Warehouse `{path}` (read only). `ops.outbox` is the outbox as of the last refresh: a
        copy of `centsync.outbox.duckdb` beside the warehouse, which is the truth
        (`docs/writeback.md`). Drop a CSV into the inbox and run `centsync writeback`.
        """
    )
    return (outbox,)


@app.cell(hide_code=True)
def _(alt, mo, outbox, pl):
    if outbox is None or outbox.is_empty():
        _out = mo.md("## The outbox by state\n\nNothing yet: no request has been written back.")
    else:
        _states = (
            outbox.group_by("state", "operation").agg(pl.len().alias("requests")).sort("state")
        )
        _chart = (
            alt.Chart(_states, title="Requests per state")
            .mark_bar()
            .encode(
                x=alt.X("requests:Q", title="requests"),
                y=alt.Y("state:N", title=None),
                color="operation:N",
                tooltip=["state:N", "operation:N", "requests:Q"],
            )
            .properties(width="container", height=40 + 30 * _states.get_column("state").n_unique())
        )
        _out = mo.vstack([mo.md("## The outbox by state"), _chart, _states])
    _out
    return


@app.cell(hide_code=True)
def _(mo, money, outbox, pl):
    _bad = (
        None
        if outbox is None
        else outbox.filter(pl.col("state").is_in(["rejected", "needs_attention"]))
    )
    if _bad is None or _bad.is_empty():
        _out = mo.md("## Rejected rows and their reasons\n\nNothing yet: no row was rejected.")
    else:
        _out = mo.vstack(
            [
                mo.md(f"## Rejected rows and their reasons ({_bad.height})"),
                _bad.select("state", "source_name", "source_line", "reason", "row_text"),
            ]
        )
    _out
    return


@app.cell(hide_code=True)
def _(mo, outbox, table):
    if outbox is None or outbox.is_empty():
        _out = mo.md("## Every request\n\nNothing yet.")
    else:
        _out = mo.vstack(
            [
                mo.md(f"## Every request ({outbox.height})"),
                table(
                    outbox.select(
                        "id",
                        "state",
                        "operation",
                        "source_name",
                        "source_line",
                        "booked_at",
                        "amount",
                        "concept",
                        "attempts",
                        "replayed",
                        "created_at",
                        "confirmed_at",
                    ),
                    money=("amount",),
                ),
            ]
        )
    _out
    return


if __name__ == "__main__":
    app.run()
