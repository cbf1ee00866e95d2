"""Reconciliation: every number the service also computes, compared with ours to the cent.

Pure Polars. `pipelines` reads the local tables and the service's aggregates (`server.*`, or
freshly fetched ones), and these functions return one row per comparison:

    check, scope, subject, label, from_date, to_date,
    local_cents, server_cents, difference_cents, local_count, server_count, status, explanation

`status` is `agree` (same cents and count), or, for a difference, `explained` when the evidence
shows the local copy is exactly what the service sent and the service changed afterwards, else
`differ`. `difference_cents` is local minus server. The rules:

- spending (`spending.month`, `spending.category`, `spending.merchant`): each spending request
  the refresh made, over its own from..to, against the local expense rows of the same range;
- transaction totals (`transactions.income`, `.expense`, `.transfer`, `.net`, with the counts
  on `.net`): each `/v1/transactions/summary` the refresh made;
- accounts (`accounts.assets`, `.liabilities`, `.net_worth`, `.by_type`) and net worth
  (`net_worth.assets`, `.liabilities`, `.total`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

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
ROW_DIFF_SCHEMA: dict[str, pl.DataType] = {
    "entity": pl.String(),  # transactions or accounts
    "id": pl.String(),
    "kind": pl.String(),  # only_local, only_server, different
    "month": pl.Date(),
    "category_id": pl.String(),
    "fields": pl.String(),  # the differing fields, comma-separated ("" for only_* rows)
    "local": pl.String(),  # the local row as JSON (null when only on the server)
    "server": pl.String(),  # the reference row as JSON (null when only local)
    "source": pl.String(),  # received (what the service sent, raw.*) or server (read now)
}
TX_FIELDS = ("account_id", "concept", "amount", "booked_at", "type", "category_id")
ACCOUNT_FIELDS = ("name", "type", "balance")
EPOCH = dt.date(1900, 1, 1)
STATUS_ORDER = {"differ": 0, "explained": 1, "agree": 2}


# ---- scopes ----------------------------------------------------------------------------------


def _month_end(d: dt.date) -> dt.date:
    nxt = dt.date(d.year + d.month // 12, d.month % 12 + 1, 1)
    return nxt - dt.timedelta(days=1)


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
    if lo.day == 1 and hi == _month_end(hi):
        if lo.month == 1 and hi.month == 12 and lo.year == hi.year:
            return f"{lo.year}"
        if (lo.year, lo.month) == (hi.year, hi.month):
            return f"{lo:%Y-%m}"
        return f"{lo:%Y-%m}..{hi:%Y-%m}"
    return f"{lo:%Y-%m-%d}..{hi:%Y-%m-%d}"


def _in_range(lo: dt.date | None, hi: dt.date | None) -> pl.Expr:
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


def spending_checks(
    tx: pl.LazyFrame,
    requests: pl.DataFrame,
    rows: pl.DataFrame,
    category_labels: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Compare every spending request of the service with the local expense rows of its range.

    `requests`: group_by, from_date, to_date (one row per request). `rows`: group_by,
    from_date, to_date, key, label, amount, count (the rows of each response).
    """
    exp = (
        expenses(tx)
        .select("booked_at", "amount", pl.col("category_id").alias("category"), "concept")
        .collect()
        .lazy()
    )
    # Group keys that need computing are computed on the groups, not on every row: a merchant
    # key and a month label per expense row were about 40 MB at 1,000,000 rows. Per key: what
    # to group the rows by, then what that group's subject is (None: itself).
    keys: dict[str, tuple[pl.Expr, pl.Expr | None]] = {
        "category": (pl.col("category"), None),
        "merchant": (pl.col("concept"), merchant_key(pl.col("subject"))),
        "month": (pl.col("booked_at").dt.truncate("1mo"), pl.col("subject").dt.strftime("%Y-%m")),
    }
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
        group, subject = keys[group_by]
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
        server = (
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
        label = period_label(lo, hi, whole)
        if group_by == "month":
            # one scope per month: the request's range is the whole history
            cmp = _compare(
                local, server.drop("label"), check="spending.month", scope_prefix="", lo=lo, hi=hi
            ).with_columns(
                scope=pl.col("subject"),
                label=pl.col("subject"),
                from_date=pl.col("subject").str.to_date("%Y-%m"),
            )
            cmp = cmp.with_columns(
                to_date=pl.col("from_date").dt.month_end(),
            )
        else:
            cmp = _compare(
                local, server, check=f"spending.{group_by}", scope_prefix=label, lo=lo, hi=hi
            )
        out.append(cmp)
    return pl.concat(pl.collect_all(out), how="vertical_relaxed") if out else _empty_results()


def summary_checks(tx: pl.LazyFrame, summaries: pl.DataFrame) -> pl.DataFrame:
    """Compare every transactions summary of the service (count, sums per type, net)."""
    whole = (None, None)
    out: list[dict[str, object]] = []
    frame = tx.select("booked_at", "amount", "type").collect()
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
                    "server_cents": int(server_cents),
                    "local_count": part.height if name == "net" else None,
                    "server_count": int(s["count"]) if name == "net" else None,
                }
            )
    return _frame(out)


def account_checks(
    accounts: pl.DataFrame,
    summary: dict[str, int] | None,
    by_type: pl.DataFrame,
    net_worth: dict[str, int] | None,
) -> pl.DataFrame:
    """Compare the accounts summary (totals and by type) and net worth with the local accounts."""
    b = accounts["balance"]
    assets = int(b.filter(b > 0).sum() or 0)
    liabilities = -int(b.filter(b < 0).sum() or 0)
    count = accounts.height
    out: list[dict[str, object]] = []

    def add(
        check: str, scope: str, local: int, server: int, lc: int | None, sc: int | None
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
        sc = int(summary["count"])
        add("accounts.assets", "all", assets, int(summary["assets"]), None, None)
        add("accounts.liabilities", "all", liabilities, int(summary["liabilities"]), None, None)
        add("accounts.net_worth", "all", assets - liabilities, int(summary["net_worth"]), count, sc)
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
        add("net_worth.assets", "all", assets, int(net_worth["assets"]), None, None)
        add("net_worth.liabilities", "all", liabilities, int(net_worth["liabilities"]), None, None)
        add("net_worth.total", "all", assets - liabilities, int(net_worth["total"]), None, None)
    return _frame(out)


def _frame(rows: list[dict[str, object]]) -> pl.DataFrame:
    base = {
        k: v
        for k, v in RESULT_SCHEMA.items()
        if k not in ("difference_cents", "status", "explanation")
    }
    return pl.DataFrame(rows, schema=base) if rows else pl.DataFrame(schema=base)


def _empty_results() -> pl.DataFrame:
    return _frame([])


def with_status(results: pl.DataFrame) -> pl.DataFrame:
    """Add difference_cents and the first status: agree, or differ until explained."""
    differs = (pl.col("local_cents") != pl.col("server_cents")) | (
        pl.col("local_count").is_not_null()
        & pl.col("server_count").is_not_null()
        & (pl.col("local_count") != pl.col("server_count"))
    )
    return results.with_columns(
        difference_cents=pl.col("local_cents") - pl.col("server_cents"),
        status=pl.when(differs).then(pl.lit("differ")).otherwise(pl.lit("agree")),
        explanation=pl.lit(None, pl.String),
    ).select(list(RESULT_SCHEMA))


# ---- row-level differences -------------------------------------------------------------------


def diff_rows(
    local: pl.DataFrame,
    reference: pl.DataFrame,
    *,
    entity: str,
    fields: Iterable[str],
    source: str,
) -> pl.DataFrame:
    """The rows that are only local, only in the reference, or different (by `id`).

    Both frames have `id` and the `fields`; transactions also `booked_at` and `category_id`
    (which name the month and category a differing row belongs to).
    """
    fields = [f for f in fields if f in local.columns and f in reference.columns]
    cols = ["id", *fields]
    joined = local.select(cols).join(
        reference.select(cols), on="id", how="full", coalesce=True, suffix="_ref"
    )
    only_local = joined.filter(pl.all_horizontal([pl.col(f"{f}_ref").is_null() for f in fields]))
    only_ref = joined.filter(pl.all_horizontal([pl.col(f).is_null() for f in fields]))
    both = joined.filter(
        ~pl.all_horizontal([pl.col(f"{f}_ref").is_null() for f in fields])
        & ~pl.all_horizontal([pl.col(f).is_null() for f in fields])
    )
    changed = [
        pl.when(pl.col(f).ne_missing(pl.col(f"{f}_ref"))).then(pl.lit(f)).otherwise(None)
        for f in fields
    ]
    both = both.with_columns(
        fields_differing=pl.concat_str(changed, separator=",", ignore_nulls=True)
    )
    both = both.filter(pl.col("fields_differing") != "")
    date_field = "booked_at" if "booked_at" in fields else None

    def as_json(suffix: str) -> pl.Expr:
        return pl.struct([pl.col(f + suffix).alias(f) for f in fields]).struct.json_encode()

    def shape(
        frame: pl.DataFrame, kind: str, suffix_for_month: str, differing: pl.Expr
    ) -> pl.DataFrame:
        return frame.select(
            pl.lit(entity).alias("entity"),
            pl.col("id").cast(pl.String),
            pl.lit(kind).alias("kind"),
            (
                pl.col(date_field + suffix_for_month).dt.truncate("1mo")
                if date_field
                else pl.lit(None, pl.Date)
            ).alias("month"),
            (
                pl.col("category_id" + suffix_for_month)
                if "category_id" in fields
                else pl.lit(None, pl.String)
            ).alias("category_id"),
            differing.alias("fields"),
            (as_json("") if kind != "only_server" else pl.lit(None, pl.String)).alias("local"),
            (as_json("_ref") if kind != "only_local" else pl.lit(None, pl.String)).alias("server"),
            pl.lit(source).alias("source"),
        )

    parts = [
        shape(only_local, "only_local", "", pl.lit("")),
        shape(only_ref, "only_server", "_ref", pl.lit("")),
        shape(both, "different", "", pl.col("fields_differing")),
    ]
    return (
        pl.concat(parts, how="vertical_relaxed")
        .cast(pl.Schema(ROW_DIFF_SCHEMA))
        .sort("month", "id")
    )


# ---- explanations ----------------------------------------------------------------------------


@dataclass
class Evidence:
    """What pipelines found out about the differences, to explain them or not."""

    # rows whose local copy differs from what the service sent (raw.*): local tampering or a
    # landing fault, never explained
    tampered: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=ROW_DIFF_SCHEMA))
    # month ('YYYY-MM') -> when it was last read from the service, verified
    read_at: dict[str, str] = field(default_factory=dict)
    # months whose server fingerprint, fetched after the aggregates, differs from the local rows
    changed_on_server: set[str] = field(default_factory=set)
    # the months whose fingerprint the service was asked again (a refresh or --live)
    confirmed: set[str] = field(default_factory=set)
    # rows of the ledger the service sent that validation rejected (raw.rejected_rows), by
    # month ('YYYY-MM', or '' when the row's date was unreadable)
    rejected: dict[str, int] = field(default_factory=dict)
    # local accounts the service no longer shows, by id -> name (hidden since the snapshot)
    accounts_gone: dict[str, str] = field(default_factory=dict)
    # the accounts the service shows now differ from the snapshot (re-fetched)
    accounts_moved: bool = False
    # net worth was fetched at the start of the refresh (it dates the run), the accounts and
    # their summary after the ledger: accounts that moved in between explain a difference
    net_worth_read_first: bool = False
    # the reconciliation the same refresh made with the service at hand: (check, scope) ->
    # (difference_cents, explanation) of what it explained; it stands while the local copy
    # is untouched (offline runs have no service to ask again)
    prior: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)


def _months_of(row: dict[str, object]) -> list[str]:
    lo, hi = row["from_date"], row["to_date"]
    if not isinstance(lo, dt.date) or not isinstance(hi, dt.date):
        return []
    out, m = [], dt.date(lo.year, lo.month, 1)
    while m <= hi:
        out.append(f"{m:%Y-%m}")
        m = dt.date(m.year + m.month // 12, m.month % 12 + 1, 1)
    return out


def explain(results: pl.DataFrame, ev: Evidence) -> pl.DataFrame:
    """Turn each `differ` into `explained` where the evidence allows, with a sentence why."""
    if results.filter(pl.col("status") == "differ").is_empty():
        return results
    tampered_tx = ev.tampered.filter(pl.col("entity") == "transactions")
    tampered_acc = ev.tampered.filter(pl.col("entity") == "accounts")
    tampered_months = {f"{m:%Y-%m}" for m in tampered_tx["month"].drop_nulls().to_list()}
    account_rows = results.filter(pl.col("check").str.starts_with("accounts."))
    accounts_agree = account_rows.height > 0 and (account_rows["status"] == "agree").all()
    rows = []
    for row in results.iter_rows(named=True):
        if row["status"] != "differ":
            rows.append(row)
            continue
        check = row["check"]
        tampering = False  # the local copy differs from what the service sent: never explained
        if check.startswith(("spending.", "transactions.")):
            months = _months_of(row)
            here = [m for m in (months or sorted(tampered_months)) if m in tampered_months]
            read = [m for m in (months or sorted(ev.read_at)) if m in ev.read_at]
            rows_here = tampered_tx.filter(pl.col("month").dt.strftime("%Y-%m").is_in(here))
            if check == "spending.category":
                # only the rows of this category (on either side of the difference)
                subject = row["subject"]
                needle = '"category_id":' + ("null" if subject is None else f'"{subject}"')
                rows_here = rows_here.filter(
                    pl.col("server").str.contains(needle, literal=True).fill_null(False)
                    | pl.col("local").str.contains(needle, literal=True).fill_null(False)
                )
                here = sorted(set(rows_here["month"].dt.strftime("%Y-%m").to_list()))
            if here:
                tampering = True
                n = rows_here.height
                row["explanation"] = (
                    f"the local copy differs from what the service sent: {n} row{'s' * (n != 1)} in "
                    f"{', '.join(here[:6])} (recon.row_differences)"
                )
            elif rejected := {
                m: n for m, n in ev.rejected.items() if m == "" or not months or m in months
            }:
                row["status"] = "explained"
                row["explanation"] = (
                    f"{sum(rejected.values())} rows the service sent were rejected by validation "
                    "(raw.rejected_rows): fix or report them, then refresh"
                )
            elif (
                len(months) == 1
                and months[0] in ev.confirmed
                and months[0] not in ev.changed_on_server
            ):
                row["explanation"] = (
                    "the local rows are what the service sent and its month fingerprint agrees "
                    "with them, yet its aggregate differs"
                )
            elif read:
                row["status"] = "explained"
                which = ", ".join(months[:6]) if 0 < len(months) <= 6 else row["scope"]
                row["explanation"] = (
                    f"the service changed {which} after it was read ({ev.read_at[read[-1]]}): "
                    "the local rows are exactly what it sent; the next refresh re-reads it"
                )
            else:
                row["explanation"] = "no month of this scope was ever read from the service"
        elif check.startswith(("accounts.", "net_worth.")):
            if tampered_acc.height:
                tampering = True
                names = ", ".join(
                    tampered_acc.select(
                        pl.coalesce(
                            pl.col("local").str.json_path_match("$.name"),
                            pl.col("server").str.json_path_match("$.name"),
                            pl.col("id"),
                        )
                    )
                    .to_series()
                    .to_list()[:6]
                )
                row["explanation"] = (
                    f"local accounts differ from what the service sent ({names}; see "
                    "recon.row_differences)"
                )
            elif check.startswith("net_worth.") and ev.net_worth_read_first and accounts_agree:
                row["status"] = "explained"
                row["explanation"] = (
                    "net worth was read at the start of the refresh; the accounts moved before "
                    "their snapshot, and the accounts summary read after it agrees"
                )
            elif ev.accounts_gone:
                row["status"] = "explained"
                row["explanation"] = (
                    "hidden or removed on the service since the snapshot: "
                    + ", ".join(sorted(ev.accounts_gone.values()))
                )
            elif ev.accounts_moved:
                row["status"] = "explained"
                row["explanation"] = (
                    "the service's accounts changed between the snapshot and its summary: the "
                    "next refresh takes the new balances"
                )
            else:
                row["explanation"] = (
                    "the local accounts are what the service sent, yet its summary differs"
                )
        before = ev.prior.get((check, row["scope"]))
        if (
            row["status"] == "differ"
            and not tampering
            and before is not None
            and before[0] == row["difference_cents"]
        ):
            row["status"] = "explained"
            row["explanation"] = f"{before[1]} (found by the refresh's own reconciliation)"
        rows.append(row)
    return pl.DataFrame(rows, schema=RESULT_SCHEMA)


def verdict(results: pl.DataFrame) -> str:
    """`differ` if anything differs unexplained, else `explained` if anything was, else `agree`."""
    statuses = set(results["status"].to_list())
    return "differ" if "differ" in statuses else "explained" if "explained" in statuses else "agree"


def narrowest_first(results: pl.DataFrame) -> pl.DataFrame:
    """The differences, unexplained first, narrowest scope first (a month before a year)."""
    return (
        results.filter(pl.col("status") != "agree")
        .with_columns(
            _rank=pl.col("status").replace_strict(STATUS_ORDER, return_dtype=pl.Int8),
            _span=(pl.col("to_date") - pl.col("from_date")).dt.total_days().fill_null(1_000_000),
        )
        .sort("_rank", "_span", "check", "scope")
        .drop("_rank", "_span")
    )
