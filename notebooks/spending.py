"""Spending: by month and category, top merchants, and one category drilled into.

A marimo notebook over the centsync warehouse, opened read only. `centsync notebook spending`
opens it; `python notebooks/spending.py` runs it as a script.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="centsync: spending")


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
def _(mo, money, path, pl, q):
    last12 = q("SELECT * FROM marts.spending_last_12_months ORDER BY amount_cents")
    _total = int(last12.get_column("amount_cents").sum() or 0)
    months = q("SELECT * FROM marts.spending_by_month ORDER BY month")
    # the month still running (the marts' `partial`): its spending is so far, not a month's
    _running = [
        f"{m:%Y-%m}" for m in months.filter(pl.col("partial")).get_column("month").to_list()
    ]
    _so_far = (
        f"{', '.join(_running)} is still running: its figures are so far, not a whole "
        "month's (pale in the chart below)."
        if _running
        else ""
    )
    mo.md(
        f"""
        # Spending

        Warehouse `{path}` (read only). Spending follows the service's own rule: every
        expense, refunds included; income and transfers excluded. Money spent is shown as a
        positive amount (the warehouse stores it negative, in cents).

        **Last 12 months: {money(-_total)} spent** in {last12.height} categories,
        {int(last12.get_column("transactions").sum() or 0):,} expenses
        ({months.height} months of history in all). {_so_far}
        """
    )
    return last12, months


@app.cell(hide_code=True)
def _(alt, mo, pl, q):
    _by_month_category = q(
        """
        SELECT month, category_name, -amount_cents / 100.0 AS spent,
               CASE WHEN partial THEN 'so far (still running)' ELSE 'whole month' END AS counted
        FROM marts.spending_by_month_category
        WHERE month > (SELECT max(month) FROM marts.spending_by_month_category) - INTERVAL 24 MONTH
        ORDER BY month
        """
    )
    _top = (
        _by_month_category.group_by("category_name")
        .agg(pl.col("spent").sum())
        .sort("spent", descending=True)
        .head(8)
        .get_column("category_name")
        .to_list()
    )
    _stacked = _by_month_category.with_columns(
        pl.when(pl.col("category_name").is_in(_top))
        .then(pl.col("category_name"))
        .otherwise(pl.lit("other"))
        .alias("category")
    )
    _chart = (
        alt.Chart(_stacked, title="Spent per month and category (last 24 months)")
        .mark_bar()
        .encode(
            x=alt.X("yearmonth(month):T", title="month"),
            y=alt.Y("sum(spent):Q", title="spent"),
            color=alt.Color("category:N", sort=[*_top, "other"]),
            opacity=alt.condition(
                "datum.counted == 'whole month'", alt.value(1.0), alt.value(0.45)
            ),
            tooltip=[
                alt.Tooltip("yearmonth(month):T", title="month"),
                "counted:N",
                "category:N",
                alt.Tooltip("sum(spent):Q", format=",.2f", title="spent"),
            ],
        )
        .properties(width="container", height=320)
    )
    mo.vstack([mo.md("## By month and category"), _chart])
    return


@app.cell(hide_code=True)
def _(alt, last12, mo, pl, table):
    _shares = last12.with_columns(
        (-pl.col("amount_cents") / 100).alias("spent"),
        (-pl.col("amount_cents")).alias("total"),
    )
    _bars = (
        alt.Chart(_shares, title="Spent per category, last 12 months")
        .mark_bar()
        .encode(
            x=alt.X("spent:Q", title="spent"),
            y=alt.Y("category_name:N", sort="-x", title=None),
            tooltip=["category_name:N", "total:N", "transactions:Q"],
        )
        .properties(width="container", height=max(120, 22 * _shares.height))
    )
    mo.vstack(
        [
            mo.md("## Categories over the last 12 months"),
            _bars,
            table(
                _shares.select(
                    "category_name", "total", "transactions", "first_month", "last_month"
                ),
                money=("total",),
            ),
        ]
    )
    return


@app.cell(hide_code=True)
def _(mo, pl, q, table):
    # merchants by their display names (marts.merchant_names groups the feed's variants)
    _merchants = q(
        """
        SELECT coalesce(n.merchant_name, s.merchant) AS merchant,
               sum(s.amount_cents)::BIGINT AS amount_cents,
               sum(s.transactions)::BIGINT AS expenses,
               min(s.month) AS first_month, max(s.month) AS last_month
        FROM marts.spending_by_month_merchant s
        LEFT JOIN marts.merchant_names n USING (merchant)
        WHERE s.month > (SELECT max(month) FROM marts.spending_by_month_merchant) - INTERVAL 12 MONTH
        GROUP BY 1 ORDER BY amount_cents LIMIT 15
        """
    ).with_columns((-pl.col("amount_cents")).alias("spent"))
    mo.vstack(
        [
            mo.md("## Top merchants, last 12 months"),
            table(
                _merchants.select("merchant", "spent", "expenses", "first_month", "last_month"),
                money=("spent",),
            ),
        ]
    )
    return


@app.cell(hide_code=True)
def _(last12, mo):
    _names = last12.get_column("category_name").to_list() or ["(no spending yet)"]
    # the category with the most expenses first: the richest drill-down
    _busiest = last12.sort("transactions", descending=True).get_column("category_name").to_list()
    category = mo.ui.dropdown(
        options=_names,
        value=(_busiest or _names)[0],
        label="Category",
    )
    mo.vstack([mo.md("## Drill down into one category"), category])
    return (category,)


@app.cell(hide_code=True)
def _(alt, category, mo, money, q, table):
    _chosen = category.value
    _per_month = q(
        """
        SELECT month, -amount_cents / 100.0 AS spent, amount_cents, transactions
        FROM marts.spending_by_month_category WHERE category_name = ? ORDER BY month
        """,
        [_chosen],
    )
    _rows = q(
        """
        SELECT t.booked_at, coalesce(n.merchant_name, t.concept) AS merchant, t.concept,
               a.name AS account, t.amount
        FROM core.transactions t
        LEFT JOIN marts.merchant_names n
               ON n.merchant = lower(trim(regexp_replace(t.concept, '\\s+', ' ', 'g')))
        JOIN core.accounts a ON a.id = t.account_id
        LEFT JOIN (SELECT DISTINCT category_id, category_name FROM marts.spending_by_month_category) c
               ON c.category_id IS NOT DISTINCT FROM t.category_id
        WHERE t.type = 'expense' AND c.category_name = ?
        ORDER BY t.booked_at DESC LIMIT 25
        """,
        [_chosen],
    )
    _line = (
        alt.Chart(_per_month, title=f"{_chosen}: spent per month")
        .mark_line(point=True)
        .encode(
            x=alt.X("month:T", title="month"),
            y=alt.Y("spent:Q", title="spent"),
            tooltip=[
                alt.Tooltip("month:T", format="%Y-%m"),
                alt.Tooltip("spent:Q", format=",.2f"),
                "transactions:Q",
            ],
        )
        .properties(width="container", height=240)
    )
    _total = int(_per_month.get_column("amount_cents").sum() or 0)
    mo.vstack(
        [
            mo.md(f"**{_chosen}**: {money(-_total)} spent in {_per_month.height} months."),
            _line,
            mo.md("The latest expenses in it:"),
            table(_rows, money=("amount",)),
        ]
    )
    return


if __name__ == "__main__":
    app.run()
