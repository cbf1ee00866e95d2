"""The refresh's side of the learned contract: the service's clock and time zone at the start,
and after the ledger every "not shown" answer learned (or re-checked) against the rows and
accounts just landed, then landed in the contract's shape (docs/api-contract.md).

Only the documented surface is a hard dependency: an answer that cannot be read is kept raw
(raw.unread_answers), named in the summary with what doing without it costs, and the refresh
goes on.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import orjson
import polars as pl

from centsync.extract import ApiClient, SurfaceUnavailable
from centsync.pipelines.contract_book import NOT_HERE, ContractBook, Unanswered, ask
from centsync.pipelines.refresh.fingerprints import local_merchants
from centsync.transform import shapes
from centsync.transform import shapes_rows as rows
from centsync.warehouse import Warehouse
from centsync.warehouse.fingerprints import (
    local_category_spending,
    local_spending_by_month,
    local_totals,
)

GROUPS = ("category", "merchant", "month")
FAR_FUTURE = dt.date(2999, 12, 31)


@dataclass
class Start:
    """What a refresh needs of the service before the ledger: its time zone and today."""

    timezone: str
    currency: str | None
    now: dt.datetime
    settings: tuple[Any, str]  # the answer as sent
    readable: bool  # whether its time zone could be read
    net_worth: tuple[Any, str]  # the answer as sent, learned once the accounts are read

    @property
    def today(self) -> dt.date:
        return self.now.astimezone(ZoneInfo(self.timezone)).date()

    def settings_row(self, book: ContractBook, currency: str | None) -> pl.DataFrame | None:
        """The settings row to snapshot (None: not readable); `currency`, the accounts' one,
        decides the settings' currency field when the start did not know it yet."""
        doc, raw = self.settings
        if not self.readable:
            return None
        if self.currency is None and currency is not None:
            learned = shapes.learn_settings(doc, currency)
            read = book.read(shapes.SETTINGS, doc, book.settle(shapes.SETTINGS, learned, doc, raw))
            self.currency = (read or {}).get("currency") or currency
        extra = doc if isinstance(doc, dict) else {}
        return pl.DataFrame(
            {
                "timezone": [self.timezone],
                "currency": [self.currency],
                "locale": [_text(extra.get("locale"))],
                "week_start": [_text(extra.get("week_start"))],
                "raw": [raw],
            },
            schema={k: pl.String for k in ("timezone", "currency", "locale", "week_start", "raw")},
        )


def start(client: ApiClient, book: ContractBook, previous: dict[str, str | None]) -> Start:
    """Settings and net worth (2 requests, at once): the time zone is the answer's one IANA
    zone name, "now" net worth's one instant; each done without when it cannot be read
    (`previous`: the warehouse's last timezone and currency; a first refresh learns the
    currency once the accounts are read)."""
    (s_doc, s_raw), (n_doc, n_raw) = client.gather(
        ask("/v1/settings"), ask("/v1/analytics/net-worth")
    )
    learned = shapes.learn_settings(s_doc, previous.get("currency"))
    mapping = book.settle(shapes.SETTINGS, learned, s_doc, s_raw)
    read = book.read(shapes.SETTINGS, s_doc, mapping) or {}
    timezone = read.get("timezone") or previous.get("timezone") or "UTC"
    currency = read.get("currency") or previous.get("currency")
    return Start(
        timezone,
        currency,
        service_now(client, book, n_doc),
        (s_doc, s_raw),
        bool(read.get("timezone")),
        (n_doc, n_raw),
    )


def one_currency(accounts: pl.DataFrame) -> str | None:
    """The accounts' one currency (None: no account, or several currencies)."""
    found = {c for c in accounts.get_column("currency").to_list() if c}
    return next(iter(found)) if len(found) == 1 else None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def service_now(client: ApiClient, book: ContractBook, doc: Any) -> dt.datetime:
    """The service's now: net worth's `as_of` (as learned, else its one ISO 8601 instant),
    else the service's Date header, else this machine's clock."""
    mapping = book.mapping(shapes.NET_WORTH)
    paths = [mapping["as_of"]] if mapping and "as_of" in mapping else shapes.instants(doc)
    if len(paths) == 1:
        value = shapes.at(doc, paths[0])
        if isinstance(value, str):
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    offset = client.service_offset()
    return dt.datetime.now(dt.UTC) + (offset or dt.timedelta())


def summary(client: ApiClient, lo: dt.date | None = None, hi: dt.date | None = None) -> Any:
    """The service's transaction totals of a range, or None when they cannot be read."""
    try:
        return client.transactions_summary(lo, hi)
    except (SurfaceUnavailable, *NOT_HERE):
        return None


def moved(
    client: ApiClient, book: ContractBook, warehouse: Warehouse, total: int
) -> tuple[bool, Any]:
    """After a first read counted with the list's `total`: the whole ledger's totals, learned
    from the rows just landed, and whether the service's count moved during the read (its
    totals' count, else the list's `total` asked again, against `total`). Rows the refresh
    rejected make the local count smaller without the service moving: reconciliation's to
    explain, not a reason to read again."""
    found = whole(book, warehouse, client.gather(ask("/v1/transactions/summary"))[0])
    if found is None or found.count is None:
        return list_total(client) != total, found
    return found.count != total, found


def list_total(client: ApiClient) -> int:
    """The ledger's row count from the documented list envelope (one request, limit=1)."""
    _, envelope = client.transactions_page(1, limit=1, raw=False)
    return int(envelope.get("total") or 0)


def or_none(call: Any, book: ContractBook | None = None, surface: str = "") -> Any:
    """A call whose answer the refresh can do without: None when it cannot be read (a refusal
    is recorded in `book` as `surface` unavailable)."""

    async def run(a: Any) -> Any:
        try:
            return await call(a)
        except SurfaceUnavailable:
            return None
        except NOT_HERE as exc:
            if book is not None:
                why = f"the service refused it: {exc}"
                book.settle(surface, shapes.Refused(why), Unanswered(why), "{}")
            return None

    return run


def records(book: ContractBook, surface: str) -> Any:
    """The connections or the sync status as a frame, or None when they cannot be read."""
    if surface == shapes.CONNECTIONS:
        return or_none(lambda a: a.connections(), book, surface)
    return or_none(lambda a: a.sync_status(), book, surface)


def connections_then_sync(book: ContractBook) -> Any:
    """A call for `client.gather`: (the connections, the sync status), each a frame or None;
    the sync status is asked once the connections are read, as it is learned from them."""
    connections, sync = records(book, shapes.CONNECTIONS), records(book, shapes.SYNC_STATUS)

    async def run(a: Any) -> tuple[Any, Any]:
        return await connections(a), await sync(a)

    return run


@dataclass
class Aggregates:
    """The service's aggregates after the ledger, each in the contract's shape (None: not
    readable), ready for server.*."""

    accounts_summary: dict[str, Any] | None
    net_worth: dict[str, Any] | None
    spendings: list[dict[str, Any]]
    whole: Any  # count and sums per type (None where the answer does not give one), or None
    currency: str | None


def aggregate_calls(span: tuple[dt.date, dt.date], ask_whole: bool) -> list[Any]:
    """The calls for `client.gather` that ask the aggregates as sent, for `aggregates`: the
    accounts summary, spending by each of GROUPS over `span`, and (`ask_whole`) the
    whole-ledger summary. None needs the accounts: they are asked with them, at once."""
    lo, hi = span
    calls: list[Any] = [ask("/v1/accounts/summary")]
    calls += [
        ask("/v1/analytics/spending", {"from": lo.isoformat(), "to": hi.isoformat(), "group_by": g})
        for g in GROUPS
    ]
    if ask_whole:
        calls.append(ask("/v1/transactions/summary"))
    return calls


def aggregates(
    client: ApiClient,
    warehouse: Warehouse,
    book: ContractBook,
    accounts: pl.DataFrame,
    net_worth: tuple[Any, str],
    span: tuple[dt.date, dt.date],
    got: list[Any],
) -> Aggregates:
    """The aggregates `aggregate_calls` asked for (`got`, as sent), each learned or re-checked
    against the rows and accounts landed, and read through what was learned."""
    balances = [(str(t), int(b)) for t, b in accounts.select("type", "balance").iter_rows()]
    currency = one_currency(accounts)
    out = Aggregates(None, None, [], None, currency)
    out.accounts_summary = _balances(book, shapes.ACCOUNTS_SUMMARY, got[0], balances, currency)
    if not isinstance(
        shapes.learn_balances(shapes.NET_WORTH, net_worth[0], balances, currency), shapes.Learned
    ) and not book.trusted(shapes.NET_WORTH):
        # the balances moved since the start (or it is not learnable): ask it again, beside
        # the accounts just read (1 request, only when the first answer did not agree)
        net_worth = client.gather(ask("/v1/analytics/net-worth"))[0]
    out.net_worth = _balances(book, shapes.NET_WORTH, net_worth, balances, currency)
    out.spendings = _spendings(book, warehouse, got[1:4], span, currency)
    if len(got) > 4:  # the whole-ledger summary was asked
        out.whole = whole(book, warehouse, got[4])
    return out


def _balances(
    book: ContractBook,
    surface: str,
    answer: tuple[Any, str],
    balances: list[tuple[str, int]],
    currency: str | None,
) -> dict[str, Any] | None:
    doc, raw = answer
    mapping = book.settle(
        surface, shapes.learn_balances(surface, doc, balances, currency), doc, raw
    )
    read = book.read(surface, doc, mapping)
    if read is not None:
        read.setdefault("currency", currency)
        read["currency"] = read.get("currency") or currency
    return read


def _spendings(
    book: ContractBook,
    warehouse: Warehouse,
    answers: list[tuple[Any, str]],
    span: tuple[dt.date, dt.date],
    currency: str | None,
) -> list[dict[str, Any]]:
    """Spending by category, merchant and month: one surface, learned from the grouping the
    local rows support best (each grouping's key field may be its own: `key@merchant`)."""
    lo, hi = span
    known = local_spending(warehouse, lo, hi)
    learned: dict[str, shapes.Learned | shapes.Refused] = {
        g: rows.learn_spending(doc, known[g], rows.KEY_OF.get(g, rows.same_key))
        for g, (doc, _) in zip(GROUPS, answers, strict=True)
    }
    base = next((x for x in learned.values() if isinstance(x, shapes.Learned)), None)
    doc0, raw0 = answers[0]
    if base is None:
        mapping = book.settle(shapes.SPENDING, learned["category"], doc0, raw0)
    else:
        merged = dict(base.mapping)
        for g, x in learned.items():
            if isinstance(x, shapes.Learned) and x.mapping["key"] != merged["key"]:
                merged[f"key@{g}"] = x.mapping["key"]
        words = "; ".join(
            f"{g}: {x.evidence}" for g, x in learned.items() if isinstance(x, shapes.Learned)
        )
        mapping = book.settle(shapes.SPENDING, shapes.Learned(merged, words), doc0, raw0)
    out = []
    for g, (doc, _) in zip(GROUPS, answers, strict=True):
        read = book.read(shapes.SPENDING, doc, mapping, group_by=g)
        if read is None or rows.resolves(shapes.SPENDING, doc, mapping or {}) is not None:
            continue
        out.append(
            {
                **read,
                "group_by": g,
                "from": lo.isoformat(),
                "to": hi.isoformat(),
                "currency": currency,
            }
        )
    return out


def from_a_month(
    client: ApiClient, warehouse: Warehouse, book: ContractBook, before: dt.date
) -> None:
    """Learn the totals and spending answers on the local month with the most rows among those
    read whole before `before` (4 requests at once): what a refresh resumed after a first sync
    that stopped early needs to prove the months it kept instead of re-reading them."""
    if book.trusted(shapes.TRANSACTIONS_SUMMARY) and book.trusted(shapes.SPENDING):
        return  # learned, and simply without some figure: a month would not add it
    months = [
        (rows_, month)
        for month, rows_, verified in warehouse.verification_order().iter_rows()
        if verified is not None and month < f"{before:%Y-%m}" and rows_ > 0
    ]
    if not months:
        return
    lo = dt.date.fromisoformat(max(months)[1] + "-01")
    hi = (lo.replace(day=28) + dt.timedelta(days=4)).replace(day=1) - dt.timedelta(days=1)
    span = {"from": lo.isoformat(), "to": hi.isoformat()}
    got = client.gather(
        ask("/v1/transactions/summary", span),
        *(ask("/v1/analytics/spending", {**span, "group_by": g}) for g in GROUPS),
    )
    count, income, expense, transfer = local_totals(warehouse.con, lo, hi)
    facts = {"count": count, "income": income, "expense": expense, "transfer": transfer}
    facts["net"] = income + expense + transfer
    doc, raw = got[0]
    book.settle(shapes.TRANSACTIONS_SUMMARY, shapes.learn_totals([(doc, facts)]), doc, raw)
    _spendings(book, warehouse, got[1:], (lo, hi), None)


def why_not_provable(book: ContractBook) -> str:
    """The reason a refresh re-reads the history instead of proving it by fingerprints."""
    for surface in (shapes.TRANSACTIONS_SUMMARY, shapes.SPENDING):
        if not book.trusted(surface):
            return f"{surface} cannot be read: the history is re-read instead of proven"
        missing = sorted(set(shapes.FULL[surface]) - set(book.mapping(surface) or {}))
        if missing:
            return (
                f"{surface} does not give {', '.join(missing)}: the history is re-read "
                "instead of proven"
            )
    return ""


def local_spending(
    warehouse: Warehouse, lo: dt.date | None, hi: dt.date
) -> dict[str, dict[Any, tuple[int, int]]]:
    """The local rows' spending of a range per grouping ({key: (cents, rows)}): the facts a
    spending answer must equal."""
    con = warehouse.con
    categories = {
        k: (int(a), int(c)) for k, a, c in local_category_spending(con, lo, hi).iter_rows()
    }
    merchants = local_merchants(con, lo, hi)
    return {
        "category": {None if k in ("", None) else str(k): v for k, v in categories.items()},
        "merchant": {k: (int(a), int(c)) for k, a, c in merchants.iter_rows()},
        "month": dict(local_spending_by_month(con, lo, hi)),
    }


def whole(book: ContractBook, warehouse: Warehouse, answer: tuple[Any, str]) -> Any:
    """The whole ledger's totals, learned from the rows just landed (count: the list's
    total, which the read checked; sums per type)."""
    doc, raw = answer
    count, income, expense, transfer = local_totals(warehouse.con, None, FAR_FUTURE)
    facts = {
        "count": count,
        "income": income,
        "expense": expense,
        "transfer": transfer,
        "net": income + expense + transfer,
    }
    mapping = book.settle(
        shapes.TRANSACTIONS_SUMMARY, shapes.learn_totals([(doc, facts)]), doc, raw
    )
    read = book.read(shapes.TRANSACTIONS_SUMMARY, doc, mapping)
    if read is None:
        return None
    # what the answer gives: a figure it does not give stays None (reconciled as unavailable)
    return SimpleNamespace(
        **{k: read.get(k) for k in ("count", "income", "expense", "transfer", "net")}
    )


def land_unread(warehouse: Warehouse, book: ContractBook) -> None:
    """Answers that could not be read, whole, with why (raw.unread_answers), and the book."""
    for surface, raw, reason in book.unread:
        warehouse.land_unread(surface, raw if _is_json(raw) else orjson.dumps(raw).decode(), reason)
    book.unread.clear()
    warehouse.save_contract(book.records())


def _is_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True
