"""Net worth: the daily curve, by account type, assets against liabilities, per-refresh snapshots.

A marimo notebook over the centsync warehouse, opened read only. `centsync notebook net_worth`
opens it; `python notebooks/net_worth.py` runs it as a script.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="centsync: net worth")


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
def _(mo, money, path, q):
    accounts = q("SELECT * FROM marts.accounts_current ORDER BY balance_cents DESC")
    latest = q("SELECT * FROM marts.net_worth_daily ORDER BY date DESC LIMIT 1")
    mo.stop(latest.is_empty(), mo.md(f"# Net worth\n\nNothing yet: `{path}` has no balances."))
    _row = latest.row(0, named=True)
    mo.md(
        f"""
        # Net worth

        Warehouse `{path}` (read only). Balances are rolled back from today's through every
        transaction; a negative balance (a credit card, a loan) is a liability.

        **Net worth on {_row["date"]}: {money(_row["net_worth_cents"])}**: assets
        {money(_row["assets_cents"])}, liabilities {money(_row["liabilities_cents"])},
        {accounts.height} accounts.
        """
    )
    return (accounts,)


@app.cell(hide_code=True)
def _(alt, mo, q):
    daily = q(
        """
        SELECT date, net_worth_cents / 100.0 AS net_worth, assets_cents / 100.0 AS assets,
               -liabilities_cents / 100.0 AS liabilities
        FROM marts.net_worth_daily ORDER BY date
        """
    )
    snapshots = q(
        "SELECT snapshot_at::DATE AS date, net_worth_cents / 100.0 AS net_worth, refresh_id "
        "FROM marts.net_worth_snapshots ORDER BY snapshot_at"
    )
    _curve = (
        alt.Chart(daily)
        .mark_line()
        .encode(
            x=alt.X("date:T", title="day"),
            y=alt.Y("net_worth:Q", title="net worth"),
            tooltip=["date:T", alt.Tooltip("net_worth:Q", format=",.2f")],
        )
    )
    _points = (
        alt.Chart(snapshots)
        .mark_point(color="#d62728", size=80, filled=True)
        .encode(
            x="date:T",
            y="net_worth:Q",
            tooltip=["refresh_id:N", "date:T", alt.Tooltip("net_worth:Q", format=",.2f")],
        )
    )
    _chart = (_curve + _points).properties(
        title="Net worth per day (line) and as each refresh saw it (red points)",
        width="container",
        height=300,
    )
    mo.vstack([mo.md("## The daily curve"), _chart])
    return daily, snapshots


@app.cell(hide_code=True)
def _(alt, daily, mo):
    _long = daily.unpivot(
        index="date", on=["assets", "liabilities"], variable_name="side", value_name="amount"
    )
    _chart = (
        alt.Chart(_long, title="Assets (above zero) against liabilities (below zero)")
        .mark_area(opacity=0.7)
        .encode(
            x=alt.X("date:T", title="day"),
            y=alt.Y("amount:Q", title="amount", stack=None),
            color=alt.Color(
                "side:N",
                scale=alt.Scale(domain=["assets", "liabilities"], range=["#2ca02c", "#d62728"]),
            ),
            tooltip=["date:T", "side:N", alt.Tooltip("amount:Q", format=",.2f")],
        )
        .properties(width="container", height=260)
    )
    mo.vstack([mo.md("## Assets against liabilities"), _chart])
    return


@app.cell(hide_code=True)
def _(alt, mo, q):
    # month ends (and today) only: the daily rows per account are too many to draw
    by_type = q(
        """
        SELECT date, account_type, sum(balance_cents) / 100.0 AS balance
        FROM marts.balance_daily
        WHERE date = last_day(date) OR date = (SELECT max(date) FROM marts.balance_daily)
        GROUP BY ALL ORDER BY date, account_type
        """
    )
    _chart = (
        alt.Chart(by_type, title="Balance per account type, at each month end")
        .mark_line(point=True)
        .encode(
            x=alt.X("date:T", title="month end"),
            y=alt.Y("balance:Q", title="balance"),
            color="account_type:N",
            tooltip=["date:T", "account_type:N", alt.Tooltip("balance:Q", format=",.2f")],
        )
        .properties(width="container", height=280)
    )
    mo.vstack([mo.md("## By account type"), _chart])
    return


@app.cell(hide_code=True)
def _(accounts, mo, pl, table):
    _table = accounts.with_columns(pl.col("balance_cents").alias("balance")).select(
        "account_name",
        "account_type",
        "subtype",
        "institution",
        "side",
        "balance",
        "connection_status",
    )
    mo.vstack([mo.md("## The accounts now"), table(_table, money=("balance",))])
    return


@app.cell(hide_code=True)
def _(mo, pl, q, table):
    _snaps = q("SELECT * FROM marts.net_worth_snapshots ORDER BY snapshot_at DESC").with_columns(
        *[pl.col(f"{c}_cents").alias(c) for c in ("assets", "liabilities", "net_worth")]
    )
    mo.vstack(
        [
            mo.md("## Per-refresh snapshots (as each refresh read the accounts)"),
            table(
                _snaps.select(
                    "snapshot_at",
                    "refresh_id",
                    "assets",
                    "liabilities",
                    "net_worth",
                    "account_count",
                ),
                money=("assets", "liabilities", "net_worth"),
            ),
        ]
    )
    return


if __name__ == "__main__":
    app.run()
