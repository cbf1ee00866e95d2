"""Marts and reconciliation: rebuild `marts.*` from `core`, prove them against the service.

Plain Python over the warehouse and transform layers (and the client for `--live` and for the
few confirmation requests a refresh may spend), so the refresh, `centsync reconcile` and the
tests run the same code. See docs/reconciliation.md for the rules.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import itertools
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal
from zoneinfo import ZoneInfo

import duckdb
import polars as pl

from centsync.extract import ApiClient, SurfaceUnavailable
from centsync.pipelines.contract_book import NOT_HERE, ContractBook, ask
from centsync.pipelines.mart_build import Ledger, rebuild_marts
from centsync.pipelines.mart_build import engine as mart_engine
from centsync.pipelines.results import ReconcileResult
from centsync.transform import bisection, shapes, shapes_rows
from centsync.transform import reconcile as rules
from centsync.transform.calendar import (
    add_months,
    month_end,
    month_start,
    months_between,
    parse_month,
)
from centsync.warehouse import marts as store
from centsync.warehouse import reads as warehouse_reads
from centsync.warehouse.contract import contract_rows
from centsync.warehouse.fingerprints import local_totals
from centsync.warehouse.session import checkpoint

# a ledger this big is written to the file before the marts are built (see `reconcile`)
CHECKPOINT_FIRST_ROWS = 100_000

Source = Literal["refresh", "offline", "live"]
# Confirmation requests a reconciliation may spend on differing months (one summary each).
CONFIRM_MONTHS = 12
# Requests a reconciliation may spend placing differing categories and merchants in their
# months (one spending request per halving, shared by every differing subject of a grouping).
NARROW_REQUESTS = 15
SUMS = ("income", "expense", "transfer", "net")


@dataclass
class Outcome:
    """One reconciliation: its verdict, every comparison and the rows behind the differences."""

    recon_id: str
    refresh_id: str
    source: Source
    verdict: str
    results: pl.DataFrame
    row_differences: pl.DataFrame
    marts: dict[str, int] = field(default_factory=dict)
    # every mart frame written, the service's and the analysts' (by table name; empty when
    # the marts were not rebuilt): the lake's rows, not read back
    mart_frames: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)
    seconds: float = 0.0
    marts_seconds: float = 0.0

    @functools.cached_property
    def differences(self) -> pl.DataFrame:
        """The comparisons that do not agree, unexplained first, narrowest scope first (once:
        `results` is not changed after the reconciliation)."""
        return rules.narrowest_first(self.results)

    def counts(self) -> dict[str, int]:
        statuses = self.results["status"].value_counts()
        got = dict(statuses.iter_rows())
        return {s: int(got.get(s, 0)) for s in ("agree", "explained", "differ", "unavailable")}

    @property
    def proved(self) -> int:
        """Numbers compared with the service's own (agreeing, explained or differing); the
        unavailable ones could not be, and are not counted as agreeing."""
        return self.results.height - self.counts()["unavailable"]

    def result(self) -> ReconcileResult:
        """What this reconciliation returns across the Dagster boundary and prints."""
        outcome = self
        diffs = outcome.differences.with_columns(
            pl.col("from_date").cast(pl.String), pl.col("to_date").cast(pl.String)
        )
        rows = outcome.row_differences.with_columns(pl.col("month").cast(pl.String)).to_dicts()
        rows.sort(key=lambda r: (r["month"] is None, r["month"] or "", r["id"] or ""))
        unavailable = outcome.results.filter(pl.col("status") == "unavailable")
        return ReconcileResult.model_validate(
            {
                "verdict": outcome.verdict,
                "refresh_id": outcome.refresh_id,
                "recon_id": outcome.recon_id,
                "source": outcome.source,
                "checked": outcome.results.height,
                "proved": outcome.proved,
                **outcome.counts(),
                "unavailable_checks": unavailable.select("check", "explanation").to_dicts(),
                "differences": diffs.to_dicts(),
                "row_differences": rows,
            }
        )


def service_today(aggregates: store.ServerAggregates) -> dt.date:
    """The service's today (net worth's as_of in the settings timezone), else the local date."""
    return aggregates.today or dt.date.today()


def fetch_aggregates(
    client: ApiClient, con: duckdb.DuckDBPyConnection, *, per_month: bool = True
) -> store.ServerAggregates:
    """The service's aggregates now (`--live`): the whole-history ones a refresh asks (6
    requests) and, with `per_month`, for every synced month its spending by category and by
    merchant and its totals per type (3 requests a month), so every month is proven on its own.
    """
    # the answers read through the contract learned by the refreshes (ops.contract): one that
    # cannot be read is done without, and its checks are listed as unavailable
    book = ContractBook(contract_rows(con))
    client.async_client.reading = book.reading
    summary = _or_none(client.accounts_summary)
    nw = _or_none(client.net_worth)
    timezone = warehouse_reads.settings_timezone(con)
    zone = ZoneInfo(timezone) if timezone else dt.UTC
    today = ((nw and nw.as_of) or dt.datetime.now(dt.UTC)).astimezone(zone).date()
    first, last = warehouse_reads.booked_range(con)
    lo = first or today
    hi = max(last or today, today)
    requests: list[dict[str, Any]] = []
    rows: list[pl.DataFrame] = []
    for group_by in ("category", "merchant", "month"):
        _add_spending(client, lo, hi, group_by, requests, rows)
    summaries = [_summary_row("all", None, None, _live_totals(client, book, None, None))]
    month = month_start(lo)
    while per_month and month <= hi:
        end = month_end(month)
        for group_by in ("category", "merchant"):
            _add_spending(client, month, end, group_by, requests, rows)
        got = _live_totals(client, book, month, end)
        summaries.append(_summary_row("month", month, end, got))
        month = add_months(month, 1)
    by_type = summary.by_type if summary is not None else {}
    return store.ServerAggregates(
        refresh_id="live",
        accounts_summary=None
        if summary is None
        else {
            "assets": summary.assets,
            "liabilities": summary.liabilities,
            "net_worth": summary.net_worth,
            "count": summary.count,
        },
        by_type=pl.DataFrame(
            {"type": list(by_type), "balance": list(by_type.values())},
            schema={"type": pl.String, "balance": pl.Int64},
        ),
        net_worth=None
        if nw is None
        else {"assets": nw.assets, "liabilities": nw.liabilities, "total": nw.total},
        spending_requests=pl.DataFrame(requests),
        spending_rows=pl.concat(rows, how="diagonal_relaxed") if rows else _no_spending(),
        summaries=pl.DataFrame(
            [s for s in summaries if s is not None],
            schema={
                "scope": pl.String,
                "from_date": pl.Date,
                "to_date": pl.Date,
                **{k: pl.Int64 for k in ("count", "income", "expense", "transfer", "net")},
            },
        ),
        today=today,
    )


def _live_totals(
    client: ApiClient, book: ContractBook, lo: dt.date | None, hi: dt.date | None
) -> Any:
    """A range's totals as the service answers them, read through the learned contract: the
    figures it does not give stay None (their checks are listed as unavailable); None when
    the answer cannot be read at all."""
    params = {"from": lo.isoformat() if lo else None, "to": hi.isoformat() if hi else None}
    doc, _ = client.gather(ask("/v1/transactions/summary", params))[0]
    mapping = book.mapping(shapes.TRANSACTIONS_SUMMARY)
    if mapping is None or shapes_rows.resolves(shapes.TRANSACTIONS_SUMMARY, doc, mapping):
        return None
    read = shapes_rows.canonical(shapes.TRANSACTIONS_SUMMARY, doc, mapping)
    return SimpleNamespace(**{k: read.get(k) for k in ("count", *SUMS)})


def _or_none(call: Any) -> Any:
    """An answer of the service, or None when it cannot be read (ops.contract)."""
    try:
        return call()
    except (SurfaceUnavailable, *NOT_HERE):
        return None


def _no_spending() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "key": pl.String,
            "label": pl.String,
            "amount": pl.Int64,
            "count": pl.Int64,
            "group_by": pl.String,
            "from_date": pl.Date,
            "to_date": pl.Date,
        }
    )


def _add_spending(
    client: ApiClient,
    lo: dt.date,
    hi: dt.date,
    group_by: str,
    requests: list[dict[str, Any]],
    rows: list[pl.DataFrame],
) -> None:
    """Ask the service's spending of lo..hi by `group_by`; add the request and its rows."""
    spending = _or_none(lambda: client.spending(lo, hi, group_by=group_by))
    if spending is None:
        return
    requests.append({"group_by": group_by, "from_date": lo, "to_date": hi})
    rows.append(
        spending.rows.select("key", "label", "amount", "count").with_columns(
            group_by=pl.lit(group_by), from_date=pl.lit(lo), to_date=pl.lit(hi)
        )
    )


def _summary_row(
    scope: str, lo: dt.date | None, hi: dt.date | None, summary: Any
) -> dict[str, Any] | None:
    """A transactions summary as a row of ServerAggregates.summaries (None: not readable)."""
    if summary is None:
        return None
    return {
        "scope": scope,
        "from_date": lo,
        "to_date": hi,
        "count": summary.count,
        "income": summary.income,
        "expense": summary.expense,
        "transfer": summary.transfer,
        "net": summary.net,
    }


def compare(
    con: duckdb.DuckDBPyConnection, aggregates: store.ServerAggregates, tx: Ledger
) -> pl.DataFrame:
    """Every comparison of the local copy with the aggregates, before explanations."""
    accounts = store.accounts(con)
    parts = [
        rules.spending_checks(
            tx.lazy(),
            aggregates.spending_requests,
            aggregates.spending_rows,
            store.categories(con),
            engine=mart_engine(tx),
        ),
        rules.summary_checks(tx.lazy(), aggregates.summaries, engine=mart_engine(tx)),
        rules.account_checks(
            accounts, aggregates.accounts_summary, aggregates.by_type, aggregates.net_worth
        ),
    ]
    checked = rules.with_status(pl.concat(parts, how="vertical_relaxed"))
    # the checks whose answer could not be read at all: listed, with why (ops.contract)
    unread = {
        s: str(r.get("reason") or "")
        for s, r in contract_rows(con).items()
        if r.get("state") == "unavailable"
    }
    present = set(checked.filter(pl.col("status") != "unavailable")["check"].to_list())
    return pl.concat([checked, rules.unavailable_checks(unread, present)], how="vertical_relaxed")


def _checked(
    con: duckdb.DuckDBPyConnection,
    aggregates: store.ServerAggregates,
    tx: Ledger,
    client: ApiClient | None,
    source: Source,
    rid: str,
) -> pl.DataFrame:
    """Every comparison, and the months the differing categories and merchants differ in
    (asked of the service within NARROW_REQUESTS, or offline the refresh's replayed)."""
    results = compare(con, aggregates, tx)
    narrowed = None
    if client is not None and source != "live":  # live compares every month already
        # spending that cannot be asked by range (not learned whole) is not narrowed
        narrowed = _or_none(lambda: narrow(results, tx, client, NARROW_REQUESTS))
    elif source == "offline":  # no service: the months the refresh's narrowing found
        narrowed = replay_narrowing(store.narrowed_by_refresh(con, rid), results, tx)
    if narrowed is not None and narrowed.height:
        results = pl.concat([results, narrowed], how="vertical_relaxed")
    return results


def narrow(results: pl.DataFrame, tx: Ledger, client: ApiClient, budget: int) -> pl.DataFrame:
    """Place each category and merchant that differs over a range in the months it differs
    in, with the service's own aggregates: bisection over the range's months, one spending
    request per halving for every differing subject of a grouping at once (the other half is
    the range less the asked one), at most `budget` requests in all. Month rows, or none."""
    wide = rules.to_narrow(results)
    found: list[tuple[str, dt.date, str | None, str, rules.Cell, rules.Cell]] = []
    left = budget
    for (check,), rows in wide.group_by("check", maintain_order=True):
        group_by = str(check).split(".", 1)[1]
        for (lo, hi), part in rows.group_by(["from_date", "to_date"], maintain_order=True):
            server = {
                r["subject"]: (r["server_cents"], r["server_count"])
                for r in part.iter_rows(named=True)
            }
            labels = {r["subject"]: r["label"] for r in part.iter_rows(named=True)}
            months = months_between(lo, hi)
            located, spent = _bisect(client, tx.lazy(), group_by, months, server, left)
            left -= spent
            for month, subject, local, there in located:
                found.append((str(check), month, subject, labels[subject], local, there))
    return rules.month_rows(found)


def replay_narrowing(recorded: pl.DataFrame, results: pl.DataFrame, tx: Ledger) -> pl.DataFrame:
    """Offline, the refresh's narrowing replayed without a request: each category and merchant
    that differs over a range, in the months the refresh's reconciliation placed it, the
    service's spending recorded there against the local rows now. Month rows, or none."""
    wide = rules.to_narrow(results)
    if wide.is_empty() or recorded.is_empty():
        return rules.month_rows([])
    wanted = set(wide.select("check", "subject").iter_rows())
    present = set(results.select("check", "scope").iter_rows())
    found: list[tuple[str, dt.date, str | None, str, rules.Cell, rules.Cell]] = []
    for r in recorded.iter_rows(named=True):
        check, month, label = str(r["check"]), r["from_date"], str(r["label"])
        if (check, r["subject"]) not in wanted or (check, f"{month:%Y-%m}/{label}") in present:
            continue
        group_by = check.split(".", 1)[1]
        here = rules.subject_spending(tx.lazy(), group_by, month, month_end(month))
        there = (int(r["server_cents"]), int(r["server_count"]))
        found.append((check, month, r["subject"], label, here.get(r["subject"], (0, 0)), there))
    return rules.month_rows(found)


# a grouping's spending by subject (category or merchant), and each differing subject's
# (local, server) spending
Spending = dict[str | None, rules.Cell]
Differing = dict[str | None, tuple[rules.Cell, rules.Cell]]


def _bisect(
    client: ApiClient,
    tx: pl.LazyFrame,
    group_by: str,
    months: list[dt.date],
    server: Spending,
    budget: int,
) -> tuple[list[tuple[dt.date, str | None, rules.Cell, rules.Cell]], int]:
    """The (month, subject, local, server) that differ among `months`, given the service's
    spending of each subject over them, and the requests spent placing them (at most `budget`):
    the one halving search (transform/bisection.py) asking for spending, one request a halving
    for every differing subject at once."""

    def differs(part: list[dt.date], there: Spending) -> Differing:
        local = rules.subject_spending(tx, group_by, part[0], month_end(part[-1]))
        return {s: (local.get(s, (0, 0)), v) for s, v in there.items() if local.get(s, (0, 0)) != v}

    def ask(older: list[dt.date], differ: Differing) -> Spending:
        got = client.spending(older[0], month_end(older[-1]), group_by=group_by)
        asked = {r["key"]: (r["amount"], r["count"]) for r in got.rows.iter_rows(named=True)}
        return {s: asked.get(s, (0, 0)) for s in differ}

    def rest(whole: Spending, part: Spending) -> Spending:
        return {s: (whole[s][0] - v[0], whole[s][1] - v[1]) for s, v in part.items()}

    search = bisection.locate(months, server, differs=differs, ask=ask, rest=rest, budget=budget)
    located, spent = bisection.collect(search)
    return [(f.leaves[0], s, *cells) for f in located for s, cells in f.differ.items()], spent


def gather_evidence(
    con: duckdb.DuckDBPyConnection,
    results: pl.DataFrame,
    client: ApiClient | None,
    refresh_id: str,
) -> rules.Evidence:
    """What it takes to explain the differences: each piece only when something differs.

    The months' local totals come from the warehouse's fingerprint, the one the refresh compares.
    """
    ev = rules.Evidence()
    differ = results.filter(pl.col("status") == "differ")
    if differ.is_empty():
        return ev
    if client is None:
        ev.prior = store.explained_by_refresh(con, refresh_id)
    tx_checks = differ.filter(
        pl.col("check").str.starts_with("spending.")
        | pl.col("check").str.starts_with("transactions.")
    )
    acc_checks = differ.filter(
        pl.col("check").str.starts_with("accounts.") | pl.col("check").str.starts_with("net_worth.")
    )
    tampered = []
    if tx_checks.height:
        local_rows, received_rows = store.differing_transactions(con)
        tampered.append(
            rules.diff_rows(
                local_rows,
                received_rows,
                entity="transactions",
                fields=rules.TX_FIELDS,
                source="received",
            )
        )
        ev.read_at = store.month_reads(con)
        ev.rejected = store.rejected_transactions(con, refresh_id)
        months = (
            tx_checks.filter(pl.col("check") == "spending.month")["subject"]
            .unique()
            .sort()
            .to_list()
        )
        if client is not None and months:
            _confirm(con, client, months[:CONFIRM_MONTHS], ev)
    if acc_checks.height:
        local_acc = store.accounts(con)
        local_rows, received_rows = store.differing_accounts(con)
        tampered.append(
            rules.diff_rows(
                local_rows,
                received_rows,
                entity="accounts",
                fields=rules.ACCOUNT_FIELDS,
                source="received",
            )
        )
        ev.accounts_gone = _hidden_accounts(local_acc, results)
        if client is not None and not ev.accounts_gone:
            listed = client.accounts(raw=False)
            seen = set(local_acc.select("id", "balance").iter_rows())
            current = set(listed.select(pl.col("id").cast(pl.String), "balance").iter_rows())
            ev.accounts_moved = seen != current
    if tampered:
        ev.tampered = pl.concat(tampered, how="vertical_relaxed")
    return ev


def _confirm(
    con: duckdb.DuckDBPyConnection, client: ApiClient, months: list[str], ev: rules.Evidence
) -> None:
    """Ask the service's summary of each differing month (a request each): the months whose
    count, net or spending no longer match the local rows changed on the service."""
    for month in months:
        lo = parse_month(month)
        hi = month_end(lo)
        now = _or_none(lambda lo=lo, hi=hi: client.transactions_summary(lo, hi))
        if now is None:  # its totals cannot be read: the month stays unconfirmed
            continue
        ev.confirmed.add(month)
        # the warehouse's fingerprint of the month, the one the refresh compares
        count, income, expense, transfer = local_totals(con, lo, hi)
        if (now.count, now.net, now.expense) != (count, income + expense + transfer, expense):
            ev.changed_on_server.add(month)


def _hidden_accounts(accounts: pl.DataFrame, results: pl.DataFrame) -> dict[str, str]:
    """Local accounts (at most two) whose absence on the service accounts for the difference."""
    nw = results.filter(pl.col("check") == "accounts.net_worth")
    if nw.is_empty():
        return {}
    row = nw.row(0, named=True)
    missing = (row["local_count"] or 0) - (row["server_count"] or 0)
    if not 0 < missing <= 2:
        return {}
    rows = list(accounts.select("id", "name", "balance").iter_rows())
    for combo in itertools.combinations(rows, missing):
        if sum(b for _, _, b in combo) == row["difference_cents"]:
            return {i: n for i, n, _ in combo}
    return {}


def _ledger(con: duckdb.DuckDBPyConnection, made: contextlib.ExitStack) -> tuple[Path, Ledger]:
    """The ledger the marts and checks run on, and the folder of its copy: a big ledger's is
    scanned from a Parquet copy in a private temporary folder, removed when `made` closes
    (store.ledger)."""
    folder = Path(made.enter_context(tempfile.TemporaryDirectory(prefix="centsync-ledger-")))
    return folder, store.ledger(con, folder)


def reconcile(
    con: duckdb.DuckDBPyConnection,
    *,
    source: Source,
    client: ApiClient | None = None,
    refresh_id: str | None = None,
    build_marts: bool = True,
    ledger_copy: store.LedgerCopy | None = None,
) -> Outcome:
    """Rebuild the marts, compare with the service's aggregates, explain, record in `recon.*`.

    `offline` and `refresh` compare with the aggregates the refresh landed (`refresh_id`, by
    default the latest that succeeded); `live` fetches them now. A client, when given, may spend
    a few requests confirming which months changed on the service. `ledger_copy`: a big
    ledger's copy the refresh started once its ledger was final (`store.ledger_copy`).
    """
    # the refresh's copy, once made: its transaction ends before the checkpoint below
    ahead = (ledger_copy.folder, ledger_copy.scan()) if ledger_copy is not None else None
    # Write what the refresh loaded to the file first: until a checkpoint DuckDB keeps it in
    # memory (about 230 MB at 1,000,000 rows, over its memory limit), and the marts would be
    # built on top of it. The checkpoint at publish then has nearly nothing left to do. A
    # small ledger's few MB stay in memory: its checkpoint cost a household's refresh 30 ms,
    # and its warehouse is then copied compact at publish anyway (warehouse/session.py).
    if warehouse_reads.transaction_count(con) >= CHECKPOINT_FIRST_ROWS:
        checkpoint(con)
    started = time.perf_counter()
    rid = refresh_id or store.latest_refresh(con)
    if rid is None:
        raise LookupError(
            "the warehouse has no successful refresh yet: run `centsync refresh` first"
        )
    if source == "live":
        if client is None:
            raise ValueError("--live needs the service")
        aggregates = fetch_aggregates(client, con)
    else:
        aggregates = store.server_aggregates(con, rid)
    with contextlib.ExitStack() as made:
        folder, tx = ahead if ahead is not None else _ledger(con, made)
        mart_frames: dict[str, pl.DataFrame] = {}
        marts_seconds = 0.0
        if build_marts:
            t0 = time.perf_counter()
            mart_frames = rebuild_marts(
                con, service_today(aggregates), tx, analyst_ledger=store.analyst_scan(folder)
            )
            marts_seconds = time.perf_counter() - t0
        results = _checked(con, aggregates, tx, client, source, rid)
        del tx
    evidence = gather_evidence(con, results, client, rid)
    evidence.net_worth_read_first = source != "live"
    results = rules.explain(results, evidence)
    verdict = rules.verdict(results)
    outcome = Outcome(
        recon_id=f"recon-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}",
        refresh_id=rid,
        source=source,
        verdict=verdict,
        results=results,
        row_differences=evidence.tampered,
        marts={n: frame.height for n, frame in mart_frames.items() if n in store.MART_TABLES},
        mart_frames=mart_frames,
        marts_seconds=marts_seconds,
    )
    outcome.seconds = time.perf_counter() - started
    store.write_reconciliation(
        con,
        {
            "recon_id": outcome.recon_id,
            "refresh_id": rid,
            "source": source,
            "verdict": verdict,
            "seconds": outcome.seconds,
        },
        results,
        evidence.tampered,
    )
    return outcome
