"""Recurring payments, transfers between one's own accounts, and Expenses drawn down.

A marimo notebook over the centsync warehouse, opened read only. `centsync notebook recurring`
opens it; `python notebooks/recurring.py` runs it as a script. The marts it reads are ours,
not the service's (docs/analysts.md): marts.recurring_series, marts.transfer_pairs,
marts.unpaired_transfers, marts.expense_goals_by_month, marts.spending_without_transfers.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="centsync: recurring")


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
    series = q("SELECT * FROM marts.recurring_series ORDER BY status, typical_amount_cents")
    _active = series.filter(pl.col("status") == "active")
    _monthly = {"weekly": 52 / 12, "monthly": 1.0, "quarterly": 1 / 3, "yearly": 1 / 12}
    _out = _active.filter(pl.col("type") == "expense").select(
        (pl.col("last_amount_cents") * pl.col("cadence").replace_strict(_monthly)).sum()
    )
    _per_month = int(_out.item() or 0)
    mo.md(
        f"""
        # Recurring payments and transfers

        Warehouse `{path}` (read only). A series is one merchant, account and cadence that
        repeats (weekly, monthly, quarterly, yearly); a one-off purchase at the same merchant
        is not in it. These marts are ours, not the service's: docs/analysts.md says how they
        are found.

        **{_active.height} active series** ({series.height - _active.height} ended); the
        active payments come to about **{money(-_per_month)} a month** at their last amounts.
        """
    )
    return (series,)


@app.cell(hide_code=True)
def _(mo, pl, series, table):
    _cols = (
        "merchant_name", "account_name", "cadence", "typical_amount_cents", "last_amount_cents",
        "occurrences", "last_booked_at", "next_expected_on", "status",
    )  # fmt: skip
    mo.vstack(
        [
            mo.md("## Every series (due next first)"),
            table(
                series.sort("status", "next_expected_on").select(_cols),
                money=("typical_amount_cents", "last_amount_cents"),
            ),
        ]
    )
    return


@app.cell(hide_code=True)
def _(mo, pl, series, table):
    _changed = series.filter(
        pl.col("previous_amount_cents").is_not_null()
        & (pl.col("previous_amount_cents") != pl.col("last_amount_cents"))
    ).sort("changed_on", descending=True)
    mo.vstack(
        [
            mo.md("## The last change of amount (a price rise, a varying bill)"),
            table(
                _changed.select(
                    "merchant_name",
                    "cadence",
                    "previous_amount_cents",
                    "last_amount_cents",
                    "changed_on",
                    "status",
                ),
                money=("previous_amount_cents", "last_amount_cents"),
            ),
        ]
    )
    return


@app.cell(hide_code=True)
def _(alt, mo, q, table):
    _pairs = q(
        """
        SELECT date_trunc('month', p.booked_at)::DATE AS month, f.name AS from_account,
               t.name AS to_account, count(*) AS transfers,
               sum(p.amount_cents)::BIGINT AS amount_cents
        FROM marts.transfer_pairs p
        LEFT JOIN core.accounts f ON f.id = p.from_account_id
        LEFT JOIN core.accounts t ON t.id = p.to_account_id
        GROUP BY ALL ORDER BY month
        """
    )
    _routes = q(
        """
        SELECT f.name AS from_account, t.name AS to_account, count(*) AS transfers,
               sum(p.amount_cents)::BIGINT AS amount_cents, max(p.booked_at) AS last
        FROM marts.transfer_pairs p
        LEFT JOIN core.accounts f ON f.id = p.from_account_id
        LEFT JOIN core.accounts t ON t.id = p.to_account_id
        GROUP BY ALL ORDER BY amount_cents DESC
        """
    )
    _chart = (
        alt.Chart(_pairs, title="Money moved between own accounts per month")
        .mark_bar()
        .transform_calculate(moved="datum.amount_cents / 100")
        .encode(
            x=alt.X("yearmonth(month):T", title="month"),
            y=alt.Y("sum(moved):Q", title="moved"),
            color=alt.Color("to_account:N", title="into"),
            tooltip=["from_account:N", "to_account:N", "transfers:Q"],
        )
        .properties(width="container", height=260)
    )
    mo.vstack(
        [
            mo.md("## Transfers paired (both legs in your own visible accounts)"),
            _chart,
            table(_routes, money=("amount_cents",)),
        ]
    )
    return


@app.cell(hide_code=True)
def _(mo, q, table):
    _unpaired = q(
        """
        SELECT u.reason, u.booked_at, a.name AS account, t.concept, u.amount_cents
        FROM marts.unpaired_transfers u
        LEFT JOIN core.accounts a ON a.id = u.account_id
        LEFT JOIN core.transactions t ON t.id = u.transaction_id
        ORDER BY u.reason, u.booked_at DESC
        """
    )
    mo.vstack(
        [
            mo.md(
                f"## Transfer legs without a pair ({_unpaired.height})\n\n"
                "`no_matching_leg`: the other side is in an account the service does not show "
                "(or was never booked); `ambiguous`: two legs fit equally; "
                "`card_payment_typed_as_expense`: the service counts it as spending."
            ),
            table(_unpaired, money=("amount_cents",)),
        ]
    )
    return


@app.cell(hide_code=True)
def _(mo, q, table):
    _compare = q(
        """
        SELECT s.month, s.amount_cents AS service_rule_cents,
               coalesce(o.amount_cents, 0)::BIGINT AS without_transfers_cents
        FROM marts.spending_by_month s
        LEFT JOIN (SELECT month, sum(amount_cents)::BIGINT AS amount_cents
                   FROM marts.spending_without_transfers GROUP BY month) o USING (month)
        ORDER BY s.month DESC LIMIT 12
        """
    )
    _goals = q(
        """
        SELECT expense_goal_id, month, assigned_cents, transactions, running_assigned_cents
        FROM marts.expense_goals_by_month ORDER BY expense_goal_id, month
        """
    )
    mo.vstack(
        [
            mo.md("## Spending, the service's rule against ours (card payments left out)"),
            table(_compare, money=("service_rule_cents", "without_transfers_cents")),
            mo.md("## Expenses drawn down (running total per Expense)"),
            table(_goals, money=("assigned_cents", "running_assigned_cents")),
        ]
    )
    return


if __name__ == "__main__":
    app.run()
