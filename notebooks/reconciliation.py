"""Reconciliation: the latest verdict against the service's own numbers, the months and rows that differ, and the history of verdicts.

A marimo notebook over the centsync warehouse, opened read only. `centsync notebook reconciliation`
opens it; `python notebooks/reconciliation.py` runs it as a script.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="centsync: reconciliation")


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
    run = q("SELECT * FROM recon.latest_run")
    mo.stop(
        run.is_empty(),
        mo.md(
            f"# Reconciliation\n\nNothing yet: `{path}` has no reconciliation (run `centsync refresh`)."
        ),
    )
    latest = run.row(0, named=True)
    _words = {
        "agree": ("success", "AGREE: every number the service also computes matches, to the cent"),
        "explained": ("warn", "EXPLAINED: every difference has a known cause"),
        "differ": ("danger", "DIFFER: some differences nobody can explain"),
    }
    _kind, _text = _words.get(latest["verdict"], ("neutral", latest["verdict"]))
    mo.vstack(
        [
            mo.md(f"# Reconciliation\n\nWarehouse `{path}` (read only)."),
            mo.callout(
                mo.md(
                    f"**{_text}.** {latest['checked']:,} comparisons: {latest['agree']:,} agree, "
                    f"{latest['explained']:,} explained, {latest['differ']:,} differ. "
                    f"Refresh `{latest['refresh_id']}`, {latest['source']}, at {latest['ran_at']:%Y-%m-%d %H:%M} UTC."
                ),
                kind=_kind,
            ),
        ]
    )
    return (latest,)


@app.cell(hide_code=True)
def _(alt, latest, mo, pl, q):
    months = q(
        """
        SELECT strptime(scope, '%Y-%m')::DATE AS month, local_cents / 100.0 AS local,
               server_cents / 100.0 AS service, difference_cents, status
        FROM recon.results WHERE recon_id = ? AND "check" = 'spending.month' ORDER BY month
        """,
        [latest["recon_id"]],
    )
    _long = months.unpivot(
        index=["month", "status"], on=["local", "service"], variable_name="side", value_name="spent"
    ).with_columns(-pl.col("spent"))
    _lines = (
        alt.Chart(_long)
        .mark_line()
        .encode(
            x=alt.X("month:T", title="month"),
            y=alt.Y("spent:Q", title="spent"),
            color=alt.Color("side:N", title=None),
            strokeDash="side:N",
            tooltip=[
                alt.Tooltip("month:T", format="%Y-%m"),
                "side:N",
                alt.Tooltip("spent:Q", format=",.2f"),
            ],
        )
    )
    _bad = (
        alt.Chart(_long.filter((pl.col("status") != "agree") & (pl.col("side") == "local")))
        .mark_point(color="#d62728", size=90, filled=True)
        .encode(
            x="month:T", y="spent:Q", tooltip=[alt.Tooltip("month:T", format="%Y-%m"), "status:N"]
        )
    )
    _chart = (_lines + _bad).properties(
        title="Spending per month: ours against the service's (one line when they agree; red: months that do not)",
        width="container",
        height=280,
    )
    mo.vstack([mo.md("## Month by month"), _chart])
    return


@app.cell(hide_code=True)
def _(mo, q, table):
    differences = q(
        """
        SELECT "check", scope, label, local_cents, server_cents, difference_cents, status, explanation
        FROM recon.latest_differences ORDER BY status DESC, "check", scope
        """
    )
    if differences.is_empty():
        _out = mo.md(
            "## What differs\n\nNothing: every comparison agrees to the cent and the count."
        )
    else:
        _out = mo.vstack(
            [
                mo.md(f"## What differs ({differences.height})"),
                table(
                    differences,
                    money=("local_cents", "server_cents", "difference_cents"),
                ),
            ]
        )
    _out
    return


@app.cell(hide_code=True)
def _(latest, mo, q):
    rows = q(
        """
        SELECT entity, id::VARCHAR AS id, kind, month, fields, "local"::VARCHAR AS ours,
               server::VARCHAR AS service
        FROM recon.row_differences WHERE recon_id = ? ORDER BY month, id
        """,
        [latest["recon_id"]],
    )
    (
        mo.md("## The rows behind them\n\nNothing yet: no row differs from what the service sent.")
        if rows.is_empty()
        else mo.vstack([mo.md(f"## The rows behind them ({rows.height})"), rows])
    )
    return


@app.cell(hide_code=True)
def _(alt, mo, q):
    history = q(
        """
        SELECT strftime(ran_at AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S') AS run, recon_id, refresh_id, source, verdict, checked, agree, explained, differ,
               round(seconds, 2) AS seconds
        FROM recon.runs ORDER BY run
        """
    )
    _chart = (
        alt.Chart(history, title="Comparisons per run, coloured by its verdict")
        .mark_bar()
        .encode(
            x=alt.X("run:O", title="run (UTC)", sort=None, axis=alt.Axis(labelAngle=0)),
            y=alt.Y("checked:Q", title="comparisons"),
            color=alt.Color(
                "verdict:N",
                scale=alt.Scale(
                    domain=["agree", "explained", "differ"], range=["#2ca02c", "#ff7f0e", "#d62728"]
                ),
            ),
            tooltip=["run:O", "verdict:N", "checked:Q", "explained:Q", "differ:Q", "source:N"],
        )
        .properties(width="container", height=200)
    )
    mo.vstack([mo.md(f"## History of verdicts ({history.height} runs)"), _chart, history])
    return


@app.cell(hide_code=True)
def _(alt, con, mo, q):
    # a month's spending as each refresh saw it (history.ledger_as_of_refresh, migration 014):
    # the month the service changed most, else the newest
    _kept = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'history' "
        "AND table_name = 'transaction_versions'"
    ).fetchall()[0][0]
    mo.stop(
        not _kept, mo.md("## A month's total over time\n\nThis warehouse keeps no history yet.")
    )
    _month = q(
        """
        SELECT coalesce(
            (SELECT month FROM history.transaction_versions WHERE kind <> 'first seen'
             GROUP BY 1 ORDER BY count(*) DESC, 1 DESC LIMIT 1),
            (SELECT max(month) FROM core.transactions)) AS month
        """
    ).item()
    over_time = q(
        """
        SELECT r.refresh_no AS refresh, strftime(r.seen_at AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M')
                   AS seen,
               coalesce(sum(t.amount) FILTER (WHERE t.type = 'expense'), 0) / 100.0 AS spending,
               count(t.id) AS transactions
        FROM history.refreshes r
        LEFT JOIN history.transaction_timeline t
               ON t.month = ? AND t.kind <> 'deleted' AND t.valid_from_no <= r.refresh_no
              AND (t.valid_to_no IS NULL OR t.valid_to_no > r.refresh_no)
        GROUP BY ALL ORDER BY refresh
        """,
        [_month],
    )
    _chart = (
        alt.Chart(over_time, title=f"Spending of {_month:%Y-%m} as each refresh saw it")
        .mark_line(point=True, interpolate="step-after")
        .encode(
            x=alt.X("refresh:Q", title="refresh", axis=alt.Axis(tickMinStep=1)),
            y=alt.Y("spending:Q", title="spending", scale=alt.Scale(zero=False)),
            tooltip=["refresh:Q", "seen:N", "spending:Q", "transactions:Q"],
        )
        .properties(width="container", height=200)
    )
    mo.vstack(
        [
            mo.md(
                f"## A month's total over time\n\n{_month:%Y-%m}'s spending after each refresh "
                f"(the ledger as of that refresh). Why it moved: `centsync changes --since N`."
            ),
            _chart,
            over_time,
        ]
    )
    return


if __name__ == "__main__":
    app.run()
