"""Reconciliation's comparisons: every number the service also computes, against ours.

Pure Polars: one row per comparison (`RESULT_SCHEMA`), then `with_status` adds the first
status (agree or differ); `explain` (transform/explain.py) may turn a differ into explained.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from centsync.transform.calendar import month_end
from centsync.transform.marts import Engine, collect, collect_all
from centsync.transform.spending import expenses, merchant_key

RESULT_SCHEMA: dict[str, pl.DataType] = {
    "check": pl.String(),
    "scope": pl.String(),
    "subject": pl.String(),
    "label": pl.String(),
    "from_date": pl.Date(),
    "to_date": pl.Date(),
    "local_cents": pl.Int64(),
    "server_cents": pl.Int64(),
    "difference_cents": pl.Int64(),
    "local_count": pl.Int64(),
    "server_count": pl.Int64(),
    "status": pl.String(),
    "explanation": pl.String(),
}
EPOCH = dt.date(1900, 1, 1)
STATUS_ORDER = {"differ": 0, "explained": 1, "agree": 2, "unavailable": 3}
# The checks each "not shown" answer of the service feeds (docs/api-contract.md): when the
# answer could not be read, each is listed as unavailable with the reason, never as agreeing.
CHECKS_OF: dict[str, tuple[str, ...]] = {
    "GET /v1/accounts/summary": (
        "accounts.assets",
        "accounts.liabilities",
        "accounts.net_worth",
        "accounts.by_type",
    ),
    "GET /v1/analytics/net-worth": ("net_worth.assets", "net_worth.liabilities", "net_worth.total"),
    "GET /v1/transactions/summary": (
        "transactions.income",
        "transactions.expense",
        "transactions.transfer",
        "transactions.net",
    ),
    "GET /v1/analytics/spending": ("spending.category", "spending.merchant", "spending.month"),
}
UNREAD = "the service's answer does not give this figure"


# ---- scopes ----------------------------------------------------------------------------------


def period_label(
    lo: dt.date | None, hi: dt.date | None, whole: tuple[dt.date | None, dt.date | None]
) -> str:
    """A readable name for a request's range: `all`, `2024`, `2024-03`, `2024-01..2024-06`."""
    if (lo, hi) == whole or (lo in (None, EPOCH) and hi is None):
        return "all"
    if lo in (None, EPOCH):
        return f"..{hi:%Y-%m-%d}" if hi is not None else "all"
    if hi is None:
        return f"{lo:%Y-%m-%d}.."
    if lo.day == 1 and hi == month_end(hi):
        if lo.month == 1 and hi.month == 12 and lo.year == hi.year:
            return f"{lo.year}"
        if (lo.year, lo.month) == (hi.year, hi.month):
            return f"{lo:%Y-%m}"
        return f"{lo:%Y-%m}..{hi:%Y-%m}"
    return f"{lo:%Y-%m-%d}..{hi:%Y-%m-%d}"


def _in_range(lo: dt.date | None, hi: dt.date | None) -> pl.Expr:
    """booked_at within lo..hi, either end open when None."""
    d = pl.col("booked_at")
    cond = pl.lit(True)
    if lo is not None:
        cond = cond & (d >= lo)
    if hi is not None:
        cond = cond & (d <= hi)
    return cond


# ---- comparisons -----------------------------------------------------------------------------


def _compare(
    local: pl.LazyFrame,
    server: pl.LazyFrame,
    *,
    check: str,
    scope_prefix: str,
    lo: dt.date | None,
    hi: dt.date | None,
) -> pl.LazyFrame:
    """Outer-join local and server rows of one comparison on `subject`: missing means zero.

    `local`: subject, local_cents, local_count (and optionally local_label); `server`: subject,
    server_cents, server_count (and optionally label, the service's name for the subject).
    """
    both = local.join(server, on="subject", how="full", coalesce=True, nulls_equal=True)
    present = both.collect_schema().names()
    names = [pl.col(c) for c in ("label", "local_label") if c in present]
    label = pl.coalesce(*names, pl.col("subject"), pl.lit("Uncategorized"))
    return both.select(
        pl.lit(check).alias("check"),
        (pl.lit(scope_prefix + "/") + label).alias("scope"),
        pl.col("subject"),
        label.alias("label"),
        pl.lit(lo, pl.Date).alias("from_date"),
        pl.lit(hi, pl.Date).alias("to_date"),
        pl.col("local_cents").fill_null(0).cast(pl.Int64),
        pl.col("server_cents").fill_null(0).cast(pl.Int64),
        pl.col("local_count").fill_null(0).cast(pl.Int64),
        pl.col("server_count").fill_null(0).cast(pl.Int64),
    )


def _spending_keys() -> dict[str, tuple[pl.Expr, pl.Expr | None]]:
    """Per group_by: what to group the expense rows by, then that group's subject (None: itself).

    Group keys that need computing are computed on the groups, not on every row: a merchant
    key and a month label per expense row were about 40 MB at 1,000,000 rows.
    """
    return {
        "category": (pl.col("category"), None),
        "merchant": (pl.col("concept"), merchant_key(pl.col("subject"))),
        "month": (pl.col("booked_at").dt.truncate("1mo"), pl.col("subject").dt.strftime("%Y-%m")),
    }


def _local_spending(
    exp: pl.LazyFrame,
    group_by: str,
    lo: dt.date | None,
    hi: dt.date | None,
    labels: pl.LazyFrame | None,
) -> pl.LazyFrame:
    """The local expense rows of lo..hi grouped as one spending request groups them."""
    group, subject = _spending_keys()[group_by]
    local = (
        exp.filter(_in_range(lo, hi))
        .group_by(group.alias("subject"))
        .agg(local_cents=pl.col("amount").sum(), local_count=pl.len())
    )
    if subject is not None:
        local = (
            local.with_columns(subject.alias("subject"))
            .group_by("subject")
            .agg(pl.col("local_cents").sum(), pl.col("local_count").sum())
        )
    if group_by == "category" and labels is not None:
        local = local.join(
            labels.rename({"id": "subject", "name": "local_label"}),
            on="subject",
            how="left",
            nulls_equal=True,
        )
    return local


def _server_spending(
    server_rows: pl.LazyFrame, group_by: str, lo: dt.date | None, hi: dt.date | None
) -> pl.LazyFrame:
    """The rows of the service's answer to one spending request (the last answer wins)."""
    return (
        server_rows.filter(
            (pl.col("group_by") == group_by)
            & (pl.col("from_date") == lo)
            & (pl.col("to_date") == hi)
        )
        .unique(["key"], keep="last")
        .select(
            pl.col("key").alias("subject"),
            "label",
            pl.col("amount").alias("server_cents"),
            pl.col("count").alias("server_count"),
        )
    )


def _spending_comparison(
    local: pl.LazyFrame,
    server: pl.LazyFrame,
    group_by: str,
    lo: dt.date | None,
    hi: dt.date | None,
    whole: tuple[dt.date | None, dt.date | None],
) -> pl.LazyFrame:
    """One spending request's comparison rows; by month, one scope per month."""
    if group_by != "month":
        label = period_label(lo, hi, whole)
        return _compare(
            local, server, check=f"spending.{group_by}", scope_prefix=label, lo=lo, hi=hi
        )
    # one scope per month: the request's range is the whole history
    cmp = _compare(
        local, server.drop("label"), check="spending.month", scope_prefix="", lo=lo, hi=hi
    ).with_columns(
        scope=pl.col("subject"),
        label=pl.col("subject"),
        from_date=pl.col("subject").str.to_date("%Y-%m"),
    )
    return cmp.with_columns(to_date=pl.col("from_date").dt.month_end())


def spending_checks(
    tx: pl.LazyFrame,
    requests: pl.DataFrame,
    rows: pl.DataFrame,
    category_labels: pl.DataFrame | None = None,
    engine: Engine = "auto",
) -> pl.DataFrame:
    """Compare every spending request of the service with the local expense rows of its range.

    `requests`: group_by, from_date, to_date (one row per request). `rows`: group_by,
    from_date, to_date, key, label, amount, count (the rows of each response). `engine`: the
    Polars engine the plans run on (a household's ledger: "in-memory", see `marts.build`).
    """
    exp = (
        expenses(tx)
        .select("booked_at", "amount", pl.col("category_id").alias("category"), "concept")
        .pipe(collect, engine)
        .lazy()
    )
    month_requests = requests.filter(pl.col("group_by") == "month")
    whole = (
        (month_requests["from_date"][0], month_requests["to_date"][0])
        if month_requests.height
        else (EPOCH, EPOCH)
    )
    # every comparison is planned lazily and collected at once: about 11 requests, each a few
    # small operations whose fixed cost was most of the check's time on a household ledger
    out: list[pl.LazyFrame] = []
    server_rows = rows.lazy()
    labels = category_labels.lazy() if category_labels is not None else None
    for req in requests.unique(["group_by", "from_date", "to_date"], keep="last").iter_rows(
        named=True
    ):
        group_by, lo, hi = req["group_by"], req["from_date"], req["to_date"]
        local = _local_spending(exp, group_by, lo, hi, labels)
        server = _server_spending(server_rows, group_by, lo, hi)
        out.append(_spending_comparison(local, server, group_by, lo, hi, whole))
    if not out:
        return _empty_results()
    return pl.concat(collect_all(out, engine), how="vertical_relaxed")


def summary_checks(
    tx: pl.LazyFrame, summaries: pl.DataFrame, *, engine: Engine = "auto"
) -> pl.DataFrame:
    """Compare every transactions summary of the service (count, sums per type, net).

    The ledger is summed per day and type first (a few thousand rows whatever its size; a
    summary's range is whole days), on `engine`: the rows themselves, read whole, were 150 MB
    of a 2,000,000-row ledger's checks."""
    whole = (None, None)
    out: list[dict[str, object]] = []
    frame = (
        tx.group_by("booked_at", "type")
        .agg(pl.col("amount").sum(), rows=pl.len().cast(pl.Int64))
        .pipe(collect, engine)
    )
    for s in summaries.unique(["from_date", "to_date"], keep="last").iter_rows(named=True):
        lo, hi = s["from_date"], s["to_date"]
        part = frame.filter(_in_range(lo, hi))
        sums = {
            t: int(part.filter(pl.col("type") == t)["amount"].sum() or 0)
            for t in ("income", "expense", "transfer")
        }
        net = int(part["amount"].sum() or 0)
        scope = period_label(lo, hi, whole) if (lo, hi) != (None, None) else "all"
        for name, local_cents, server_cents in (
            ("income", sums["income"], s["income"]),
            ("expense", sums["expense"], s["expense"]),
            ("transfer", sums["transfer"], s["transfer"]),
            ("net", net, s["net"]),
        ):
            out.append(
                {
                    "check": f"transactions.{name}",
                    "scope": scope,
                    "subject": name,
                    "label": name,
                    "from_date": lo,
                    "to_date": hi,
                    "local_cents": local_cents,
                    "server_cents": None if server_cents is None else int(server_cents),
                    "local_count": int(part["rows"].sum()) if name == "net" else None,
                    "server_count": int(s["count"])
                    if name == "net" and s["count"] is not None
                    else None,
                }
            )
    return _frame(out)


def account_checks(
    accounts: pl.DataFrame,
    summary: dict[str, int | None] | None,
    by_type: pl.DataFrame,
    net_worth: dict[str, int | None] | None,
) -> pl.DataFrame:
    """Compare the accounts summary (totals and by type) and net worth with the local accounts."""
    b = accounts["balance"]
    assets = int(b.filter(b > 0).sum() or 0)
    liabilities = -int(b.filter(b < 0).sum() or 0)
    count = accounts.height
    out: list[dict[str, object]] = []

    def add(
        check: str, scope: str, local: int, server: int | None, lc: int | None, sc: int | None
    ) -> None:
        out.append(
            {
                "check": check,
                "scope": scope,
                "subject": scope,
                "label": scope,
                "from_date": None,
                "to_date": None,
                "local_cents": local,
                "server_cents": server,
                "local_count": lc,
                "server_count": sc,
            }
        )

    if summary is not None:
        sc = _int(summary.get("count"))
        add("accounts.assets", "all", assets, _int(summary.get("assets")), None, None)
        add(
            "accounts.liabilities", "all", liabilities, _int(summary.get("liabilities")), None, None
        )
        nw = _int(summary.get("net_worth"))
        add("accounts.net_worth", "all", assets - liabilities, nw, count, sc)
        local_types = dict(accounts.group_by("type").agg(pl.col("balance").sum()).iter_rows())
        server_types = dict(by_type.select("type", "balance").iter_rows())
        for t in sorted(set(local_types) | set(server_types)):
            lc = accounts.filter(pl.col("type") == t).height
            add(
                "accounts.by_type",
                t,
                int(local_types.get(t, 0)),
                int(server_types.get(t, 0)),
                lc,
                None,
            )
    if net_worth is not None:
        add("net_worth.assets", "all", assets, _int(net_worth.get("assets")), None, None)
        add(
            "net_worth.liabilities",
            "all",
            liabilities,
            _int(net_worth.get("liabilities")),
            None,
            None,
        )
        add(
            "net_worth.total", "all", assets - liabilities, _int(net_worth.get("total")), None, None
        )
    return _frame(out)


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def unavailable_checks(unread: dict[str, str], present: set[str]) -> pl.DataFrame:
    """One row per check whose service side could not be read this time (`unread`: surface ->
    why, and what doing without costs), unless the check has rows from elsewhere (`present`)."""
    rows: list[dict[str, object]] = []
    why: list[str] = []
    for surface, reason in sorted(unread.items()):
        for check in CHECKS_OF.get(surface, ()):
            if check not in present:
                rows.append({"check": check, "scope": "all", "subject": "all", "label": "all"})
                why.append(f"{surface} could not be read: {reason}")
    return (
        _frame(rows)
        .with_columns(
            difference_cents=pl.lit(None, pl.Int64),
            status=pl.lit("unavailable"),
            explanation=pl.Series(why, dtype=pl.String),
        )
        .select(list(RESULT_SCHEMA))
    )


def _frame(rows: list[dict[str, object]]) -> pl.DataFrame:
    """Comparison rows as a frame of RESULT_SCHEMA without the status columns."""
    base = {
        k: v
        for k, v in RESULT_SCHEMA.items()
        if k not in ("difference_cents", "status", "explanation")
    }
    return pl.DataFrame(rows, schema=base) if rows else pl.DataFrame(schema=base)


def _empty_results() -> pl.DataFrame:
    """No comparison rows."""
    return _frame([])


def with_status(results: pl.DataFrame) -> pl.DataFrame:
    """Add difference_cents and the first status: agree, or differ until explained."""
    differs = (pl.col("local_cents") != pl.col("server_cents")) | (
        pl.col("local_count").is_not_null()
        & pl.col("server_count").is_not_null()
        & (pl.col("local_count") != pl.col("server_count"))
    )
    unread = pl.col("server_cents").is_null()
    return results.with_columns(
        difference_cents=pl.col("local_cents") - pl.col("server_cents"),
        status=pl.when(unread)
        .then(pl.lit("unavailable"))
        .when(differs)
        .then(pl.lit("differ"))
        .otherwise(pl.lit("agree")),
        explanation=pl.when(unread).then(pl.lit(UNREAD)).otherwise(pl.lit(None, pl.String)),
    ).select(list(RESULT_SCHEMA))


def verdict(results: pl.DataFrame) -> str:
    """`differ` if anything differs unexplained, else `explained` if anything was, else `agree`."""
    statuses = set(results["status"].to_list())
    return "differ" if "differ" in statuses else "explained" if "explained" in statuses else "agree"


def narrowest_first(results: pl.DataFrame) -> pl.DataFrame:
    """The differences, unexplained first, narrowest scope first (a month before a year)."""
    return (
        results.filter(~pl.col("status").is_in(["agree", "unavailable"]))
        .with_columns(
            _rank=pl.col("status").replace_strict(STATUS_ORDER, return_dtype=pl.Int8),
            _span=(pl.col("to_date") - pl.col("from_date")).dt.total_days().fill_null(1_000_000),
        )
        .sort("_rank", "_span", "check", "scope")
        .drop("_rank", "_span")
    )


# ---- narrowing a category or merchant to its months (issue 26) --------------------------------

# (cents, rows) of one subject of a spending grouping
Cell = tuple[int, int]


def subject_spending(
    tx: pl.LazyFrame, group_by: str, lo: dt.date, hi: dt.date
) -> dict[str | None, Cell]:
    """The local spending of lo..hi grouped as the service groups it (subject: (cents, rows))."""
    exp = expenses(tx).select(
        "booked_at", "amount", pl.col("category_id").alias("category"), "concept"
    )
    local = _local_spending(exp, group_by, lo, hi, None).collect()
    return {
        r["subject"]: (int(r["local_cents"]), int(r["local_count"]))
        for r in local.iter_rows(named=True)
    }


def to_narrow(results: pl.DataFrame) -> pl.DataFrame:
    """The differing categories and merchants compared over more than one month: the widest
    comparison of each (group, subject), to be placed in its months."""
    return (
        results.filter(
            pl.col("check").is_in(["spending.category", "spending.merchant"])
            & (pl.col("status") == "differ")
            & pl.col("from_date").is_not_null()
            & pl.col("to_date").is_not_null()
            & ((pl.col("to_date") - pl.col("from_date")).dt.total_days() > 31)
        )
        .with_columns(_span=(pl.col("to_date") - pl.col("from_date")).dt.total_days())
        .sort("_span", descending=True)
        .unique(["check", "subject"], keep="first", maintain_order=True)
        .drop("_span")
    )


def month_rows(found: list[tuple[str, dt.date, str | None, str, Cell, Cell]]) -> pl.DataFrame:
    """Comparison rows of single months, from (check, month, subject, label, local, server):
    what narrowing found, scoped `YYYY-MM/label` like a month's own spending request."""
    rows: list[dict[str, object]] = [
        {
            "check": check,
            "scope": f"{month:%Y-%m}/{label}",
            "subject": subject,
            "label": label,
            "from_date": month,
            "to_date": month_end(month),
            "local_cents": local[0],
            "server_cents": server[0],
            "local_count": local[1],
            "server_count": server[1],
        }
        for check, month, subject, label, local, server in found
    ]
    return with_status(_frame(rows))
