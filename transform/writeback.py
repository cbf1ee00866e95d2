"""Write-back requests, planned: inbox CSV rows and analysts' request rows in, exact request
bodies with their derived idempotency keys (or a reason per rejected row) out.

Pure: cells and reference frames in, plans out. No files, no network, no clock. (Reading the
inbox's CSV files and writing their errors files is `pipelines/writeback/inbox_csv.py`.)

Every rule of the seed and the contract is checked here, before any request: lengths in code
points, integer cents within +/- 10^12 converted exactly from a decimal (more decimals than the
account's currency has is an error, never a rounding), real dates, a known account and
category, an Expense seen in the ledger (the API lists none), the type against the sign, an
Expense only for expenses. A bad row never blocks the good rows of its file.

Keys come from the originating event, never from a random source: a UUIDv5 over (source, the
event's id, the operation, the body schema version). A row without an event id is identified by
a hash of its normalised content plus the occurrence number of identical rows in that file, so
two identical coffees on one day stay two, and the same file imported twice (or a renamed copy
of it) maps to the same keys.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import unicodedata
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import polars as pl

from centsync.transform.contract import MAX_AMOUNT, TRANSACTION_TYPES, UUID_RE

# The body schema version: part of every key, so a change of what a body means never replays an
# old key with a new meaning.
BODY_SCHEMA = "v1"
KEY_NAMESPACE = uuid.UUID("6f1f3c8e-5b7a-5d43-9a52-63656e747379")  # fixed: keys must never change

OPERATIONS = ("create", "edit", "assign")
COLUMNS = (
    "event_id",
    "operation",
    "transaction_id",
    "account",
    "booked_at",
    "amount",
    "concept",
    "category",
    "notes",
    "expense_goal_id",
    "type",
)
REQUIRED = {
    "create": ("account", "booked_at", "amount", "concept"),
    "edit": ("transaction_id",),
    "assign": ("transaction_id",),
}
EDITABLE = ("concept", "category", "notes", "amount", "booked_at", "type")
MAX_CONCEPT, MAX_NOTES = 200, 2000
MAX_EVENT_ID = 200

# ISO 4217 minor units where they are not 2 (the amount's decimals are checked against these).
_MINOR_UNITS = {
    **dict.fromkeys(
        [
            "BIF",
            "CLP",
            "DJF",
            "GNF",
            "ISK",
            "JPY",
            "KMF",
            "KRW",
            "PYG",
            "RWF",
            "UGX",
            "UYI",
            "VND",
            "VUV",
            "XAF",
            "XOF",
            "XPF",
        ],
        0,
    ),
    **dict.fromkeys(["BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"], 3),
    **dict.fromkeys(["CLF", "UYW"], 4),
}

_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_DECIMAL_POINT = re.compile(r"^([+-]?)([0-9]+)(?:\.([0-9]+))?$")
_DECIMAL_COMMA = re.compile(r"^([+-]?)([0-9]+)(?:,([0-9]+))?$")
# The fields that hold a number, a date, an id or a keyword: only ASCII digits there (one rule
# for every such field; text fields, concept, notes and names, keep any character verbatim).
STRUCTURED = ("operation", "transaction_id", "booked_at", "amount", "expense_goal_id", "type")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_CONTROL_LINE = re.compile(r"[\x00-\x1f\x7f]")


def minor_units(currency: str) -> int:
    """Decimals of a currency's amounts (ISO 4217): 2 unless listed otherwise."""
    return _MINOR_UNITS.get(currency.upper(), 2)


class RowError(ValueError):
    """One row's reason for rejection: which field, and what to do."""

    def __init__(self, field_name: str, reason: str) -> None:
        super().__init__(f"{field_name}: {reason}")
        self.field = field_name
        self.reason = reason


def ascii_digits(value: str, name: str) -> None:
    """Refuse a digit that is not 0-9 (fullwidth `１`, Arabic-Indic `٣`): the one rule for every
    structured field, so `１２.５０` is refused as an amount just as it is in a date."""
    for ch in value:
        if ch not in "0123456789" and unicodedata.category(ch) == "Nd":
            what = unicodedata.name(ch, "a non-ASCII digit").lower()
            raise RowError(name, f"{value!r} holds {ch!r} ({what}): write the digits 0-9 (ASCII)")


def parse_amount(text: str, currency: str, *, decimal_comma: bool = False) -> int:
    """`-12.34` in EUR -> -1234 cents, exactly; anything that is not such a decimal is an error."""
    value = text.strip()
    ascii_digits(value, "amount")
    if not value:
        raise RowError("amount", "empty: write the amount in currency units, e.g. -12.34")
    m = _DECIMAL_POINT.match(value) or (_DECIMAL_COMMA.match(value) if decimal_comma else None)
    if m is None:
        hint = (
            " (a decimal comma is accepted only in semicolon-separated files)"
            if "," in value
            else ""
        )
        raise RowError(
            "amount",
            f"{value!r} is not a decimal amount such as -12.34{hint}; no exponents, thousands "
            "separators or currency symbols",
        )
    sign, whole, frac = m.group(1), m.group(2), m.group(3) or ""
    places = minor_units(currency)
    if len(frac) > places:
        raise RowError(
            "amount",
            f"{value} has {len(frac)} decimals but {currency} has {places}: amounts are never "
            "rounded; fix the amount",
        )
    cents = int(whole) * 10**places + int((frac or "0").ljust(places, "0") or "0")
    if sign == "-":
        cents = -cents
    if abs(cents) > MAX_AMOUNT:
        raise RowError("amount", f"{value} is beyond the service's limit of +/- 10^12 cents")
    return cents


def parse_date(text: str, name: str = "booked_at") -> dt.date:
    """`2026-11-02` -> a date; only ASCII digits, only real calendar dates."""
    value = text.strip()
    ascii_digits(value, name)
    if not _DATE.match(value):
        raise RowError(name, f"{value!r} is not a date written YYYY-MM-DD")
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise RowError(name, f"{value} is not a real calendar date") from None


def _text(value: str, name: str, lo: int, hi: int, *, one_line: bool) -> str:
    n = len(value)  # code points: Python strings count them, as the contract does
    if n < lo or (lo and not value.strip()):
        raise RowError(name, "empty: it is required")
    if n > hi:
        raise RowError(name, f"{n} characters; at most {hi} are allowed (counted in code points)")
    if (_CONTROL_LINE if one_line else _CONTROL).search(value):
        what = "a line break or control character" if one_line else "a control character"
        raise RowError(name, f"contains {what}")
    return value


# ---------------------------------------------------------------------------------------- source rows


@dataclass
class SourceRow:
    """One request as read: its cells by column name, where it came from."""

    line: int  # the file's line number (or the request table's row number)
    cells: dict[str, str]
    text: str  # the row as read, for the rejected file and the outbox
    problem: str | None = None  # a row-level reading problem (wrong number of fields)


# ---------------------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class Reference:
    """What the warehouse knows, to check requests against before sending them."""

    accounts: pl.DataFrame  # id, name, currency
    categories: pl.DataFrame  # id, name
    expense_ids: frozenset[str]  # Expenses seen in the ledger (the API lists none)
    transactions: Mapping[str, str]  # id -> type, for the transactions the requests name
    currency: str = "EUR"  # the settings' currency (an edited amount's decimals)
    today: dt.date | None = None  # the service's today: a later booked_at is refused ...
    allow_future: bool = False  # ... unless this is set (`--allow-future`)
    # the named transactions on an account a bank connection feeds: the service takes amount,
    # booked_at and type edits of manual transactions only (400 for a bank-feed one)
    bank_fed: frozenset[str] = frozenset()

    @classmethod
    def from_frames(
        cls,
        accounts: pl.DataFrame,
        categories: pl.DataFrame,
        expense_ids: Iterable[str],
        transactions: pl.DataFrame,
        currency: str = "EUR",
        *,
        today: dt.date | None = None,
        allow_future: bool = False,
    ) -> Reference:
        return cls(
            accounts=accounts.select(
                pl.col("id").cast(pl.String), "name", pl.col("currency").cast(pl.String)
            ),
            categories=categories.select(pl.col("id").cast(pl.String), "name"),
            expense_ids=frozenset(str(g).lower() for g in expense_ids),
            transactions=dict(
                zip(
                    transactions.get_column("id").cast(pl.String).to_list(),
                    transactions.get_column("type").to_list(),
                    strict=True,
                )
            ),
            currency=currency or "EUR",
            today=today,
            allow_future=allow_future,
            bank_fed=frozenset(
                transactions.filter(pl.col("bank_fed")).get_column("id").cast(pl.String).to_list()
                if "bank_fed" in transactions.columns
                else ()
            ),
        )


def referenced_transactions(rows: Iterable[SourceRow]) -> list[str]:
    """The transaction ids that edit and assign rows name (the reference needs only these)."""
    return sorted(
        {
            r.cells.get("transaction_id", "").strip().lower()
            for r in rows
            if UUID_RE.match(r.cells.get("transaction_id", "").strip())
        }
    )


@dataclass
class Planned:
    """One request: what is sent, under which key, and where it came from."""

    source: str  # inbox | requests
    source_name: str  # file name (or ops.outbox_requests)
    line: int
    event_ref: str
    operation: str
    key: str
    text: str
    method: str = ""
    path: str = ""
    body: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None  # set: rejected, nothing is sent
    warning: str | None = None  # set: sent, but the service will likely refuse it (the plan says)
    account_id: str | None = None
    booked_at: dt.date | None = None
    amount: int | None = None
    concept: str | None = None
    transaction_id: str | None = None

    @property
    def body_json(self) -> str:
        """The exact bytes sent (sorted keys: the same request always has the same body)."""
        return orjson.dumps(self.body, option=orjson.OPT_SORT_KEYS).decode() if self.body else ""

    @property
    def body_sha256(self) -> str:
        payload = self.body_json if self.reason is None else "rejected:" + self.text
        return hashlib.sha256(payload.encode()).hexdigest()


def derive_key(source: str, event_ref: str, operation: str) -> str:
    """The idempotency key of an event: UUIDv5 over (source, event, operation, schema version)."""
    return str(uuid.uuid5(KEY_NAMESPACE, "\x1f".join((source, event_ref, operation, BODY_SCHEMA))))


def content_refs(rows: Sequence[SourceRow]) -> list[str]:
    """Event references for rows without an event id: content hash + occurrence number."""
    seen: dict[str, int] = {}
    refs = []
    for r in rows:
        given = r.cells.get("event_id", "").strip()
        if given:
            refs.append(f"event:{given}")
            continue
        normal = {k: v.strip() for k, v in sorted(r.cells.items()) if k != "event_id" and v.strip()}
        if not normal:
            normal = {"text": r.text}
        digest = hashlib.sha256(orjson.dumps(normal, option=orjson.OPT_SORT_KEYS)).hexdigest()
        seen[digest] = seen.get(digest, 0) + 1
        refs.append(f"content:{digest[:32]}#{seen[digest]}")
    return refs


def plan(
    rows: Sequence[SourceRow],
    ref: Reference,
    *,
    source: str,
    source_name: str,
    decimal_comma: bool = False,
) -> list[Planned]:
    """Every row planned: a request with its key, or a reason why nothing will be sent."""
    out = []
    for row, event_ref in zip(rows, content_refs(rows), strict=True):
        operation = (row.cells.get("operation") or "").strip().lower() or "create"
        op_for_key = operation if operation in OPERATIONS else "create"
        p = Planned(
            source=source,
            source_name=source_name,
            line=row.line,
            event_ref=event_ref,
            operation=op_for_key,
            key=derive_key(source, event_ref, op_for_key),
            text=row.text,
        )
        try:
            if row.problem:
                raise RowError("row", row.problem)
            for name in STRUCTURED:
                ascii_digits(row.cells.get(name) or "", name)
            if operation not in OPERATIONS:
                raise RowError("operation", f"{operation!r}: use create, edit or assign")
            event_id = row.cells.get("event_id", "")
            if len(event_id) > MAX_EVENT_ID or _CONTROL_LINE.search(event_id):
                raise RowError("event_id", f"at most {MAX_EVENT_ID} characters on one line")
            _fill(p, row.cells, ref, decimal_comma)
        except RowError as e:
            p.reason = str(e)
            p.body = {}
        out.append(p)
    return out


def _cell(cells: Mapping[str, str], name: str) -> str:
    return cells.get(name) or ""


def did_you_mean(value: str, names: Iterable[str]) -> str:
    """`did you mean 'Cash Wallet'? ` when `value` is one of `names` in another case (or with
    other spaces), else "": names are matched exactly, and a person types them as they say them."""
    wanted = " ".join(value.split()).casefold()
    same = sorted({n for n in names if " ".join(str(n).split()).casefold() == wanted})
    return f"did you mean {same[0]!r}? " if same and same[0] != value else ""


def _by_id_or_name(frame: pl.DataFrame, v: str) -> pl.DataFrame:
    """The rows of ``frame`` whose id (a uuid, any case) or exact name is ``v``."""
    if UUID_RE.match(v):
        return frame.filter(pl.col("id").cast(pl.String) == v.lower())
    return frame.filter(pl.col("name") == v)


def _account(value: str, ref: Reference) -> tuple[str, str]:
    v = value.strip()
    acc = ref.accounts
    hit = _by_id_or_name(acc, v)
    if hit.height == 0:
        every = acc.get_column("name").to_list()
        names = ", ".join(sorted(every)[:8])
        raise RowError(
            "account",
            f"no account {v!r}: {did_you_mean(v, every)}use an account's id or exact name "
            f"({names})",
        )
    if hit.height > 1:
        raise RowError("account", f"{hit.height} accounts are named {v!r}: use the account's id")
    return str(hit.item(0, "id")), str(hit.item(0, "currency") or "EUR")


def _category(value: str, ref: Reference) -> str:
    v = value.strip()
    cats = ref.categories
    hit = _by_id_or_name(cats, v)
    if hit.height != 1:
        names = ", ".join(sorted(cats.get_column("name").to_list())[:15])
        why = "several categories" if hit.height else "no category"
        hint = did_you_mean(v, cats.get_column("name").to_list()) if not hit.height else ""
        raise RowError(
            "category", f"{why} {v!r}: {hint}use a category's id or exact name ({names})"
        )
    return str(hit.item(0, "id"))


def _goal(value: str, ref: Reference) -> str:
    v = value.strip().lower()
    if not UUID_RE.match(v):
        raise RowError("expense_goal_id", f"{value!r} is not a uuid")
    if v not in ref.expense_ids:
        raise RowError(
            "expense_goal_id",
            f"Expense {v} was never seen in the ledger (the API lists no Expenses): use the "
            "id of an Expense that transactions are assigned to",
        )
    return v


def _type_against_sign(typ: str | None, amount: int) -> str | None:
    if typ is not None and typ not in TRANSACTION_TYPES:
        raise RowError("type", f"{typ!r}: use expense, income or transfer")
    if typ is None and amount == 0:
        raise RowError("type", "an amount of 0 needs an explicit type")
    # A positive expense is a refund (money back for a purchase): the service accepts it and
    # its spending counts it ("refunds (positive amounts) included"), so it is posted as is.
    if typ == "income" and amount < 0:
        raise RowError(
            "type", "income is positive (money in): drop the minus sign, or type expense"
        )
    return typ


def _fill(p: Planned, cells: Mapping[str, str], ref: Reference, decimal_comma: bool) -> None:
    """Check a row against its operation's rules and set the request it makes on `p`."""
    op = p.operation
    missing = [c for c in REQUIRED[op] if not _cell(cells, c).strip()]
    if missing:
        raise RowError(missing[0], f"empty: a {op} needs {', '.join(REQUIRED[op])}")
    if op == "create":
        _plan_create(p, cells, ref, decimal_comma)
        return
    tid = _known_transaction(_cell(cells, "transaction_id").strip().lower(), ref)
    p.transaction_id = tid
    if op == "assign":
        _plan_assign(p, cells, ref, tid)
    else:
        _plan_edit(p, cells, ref, tid, decimal_comma)


def _plan_create(p: Planned, cells: Mapping[str, str], ref: Reference, decimal_comma: bool) -> None:
    """A new transaction: POST /v1/transactions with every field the row gives."""
    account_id, currency = _account(_cell(cells, "account"), ref)
    amount = parse_amount(_cell(cells, "amount"), currency, decimal_comma=decimal_comma)
    booked = _booked(_cell(cells, "booked_at"), ref)
    concept = _text(_cell(cells, "concept"), "concept", 1, MAX_CONCEPT, one_line=True)
    typ = _type_against_sign(_cell(cells, "type").strip().lower() or None, amount)
    body: dict[str, Any] = {
        "account_id": account_id,
        "amount": amount,
        "concept": concept,
        "booked_at": booked.isoformat(),
    }
    if typ:
        body["type"] = typ
    if _cell(cells, "category").strip():
        body["category_id"] = _category(_cell(cells, "category"), ref)
    if _cell(cells, "notes"):
        body["notes"] = _text(_cell(cells, "notes"), "notes", 0, MAX_NOTES, one_line=False)
    if _cell(cells, "expense_goal_id").strip():
        body["expense_goal_id"] = _goal(_cell(cells, "expense_goal_id"), ref)
        effective = typ or ("expense" if amount < 0 else "income")
        if effective != "expense":
            raise RowError("expense_goal_id", "only an expense can be assigned to an Expense")
    if _cell(cells, "transaction_id").strip():
        raise RowError("transaction_id", "a create makes a new transaction: leave it empty")
    p.method, p.path, p.body = "POST", "/v1/transactions", body
    p.account_id, p.booked_at, p.amount, p.concept = account_id, booked, amount, concept


def _booked(text: str, ref: Reference) -> dt.date:
    """A booked_at: a real date, not after the service's today unless allowed."""
    booked = parse_date(text)
    if ref.today is not None and booked > ref.today and not ref.allow_future:
        raise RowError(
            "booked_at",
            f"{booked} is after the service's today ({ref.today}): a date in the future is "
            "refused; fix the date, or run with --allow-future if it is meant",
        )
    return booked


def _known_transaction(tid: str, ref: Reference) -> str:
    """The transaction an edit or assign names: a uuid the warehouse holds."""
    if not UUID_RE.match(tid):
        raise RowError("transaction_id", f"{tid!r} is not a uuid")
    if tid not in ref.transactions:
        raise RowError(
            "transaction_id",
            f"no transaction {tid} in the warehouse: refresh first, or check the id",
        )
    return tid


def _plan_assign(p: Planned, cells: Mapping[str, str], ref: Reference, tid: str) -> None:
    """An Expense assignment (or clearing one): POST /v1/transactions/{id}/expense."""
    for c in ("account", "booked_at", "amount", "concept", "category", "notes", "type"):
        if _cell(cells, c).strip():
            raise RowError(c, "an assign sets only expense_goal_id (empty clears it)")
    goal = _cell(cells, "expense_goal_id").strip()
    if ref.transactions[tid] != "expense":
        raise RowError(
            "transaction_id",
            f"only an expense can be assigned to an Expense; this transaction is {ref.transactions[tid]}",
        )
    p.method, p.path = "POST", f"/v1/transactions/{tid}/expense"
    p.body = {"expense_goal_id": _goal(goal, ref) if goal else None}


def _plan_edit(
    p: Planned, cells: Mapping[str, str], ref: Reference, tid: str, decimal_comma: bool
) -> None:
    """An edit: PATCH /v1/transactions/{id} with only the given fields."""
    for c in ("account", "expense_goal_id"):
        if _cell(cells, c).strip():
            what = (
                "the account cannot be changed"
                if c == "account"
                else "assign an Expense with operation assign"
            )
            raise RowError(c, what)
    body: dict[str, Any] = {}
    if _cell(cells, "concept"):
        body["concept"] = _text(_cell(cells, "concept"), "concept", 1, MAX_CONCEPT, one_line=True)
    if _cell(cells, "category").strip():
        body["category_id"] = _category(_cell(cells, "category"), ref)
    if _cell(cells, "notes"):
        body["notes"] = _text(_cell(cells, "notes"), "notes", 0, MAX_NOTES, one_line=False)
    if _cell(cells, "booked_at").strip():
        body["booked_at"] = _booked(_cell(cells, "booked_at"), ref).isoformat()
    typ = _cell(cells, "type").strip().lower() or None
    if _cell(cells, "amount").strip():
        body["amount"] = parse_amount(
            _cell(cells, "amount"), ref.currency, decimal_comma=decimal_comma
        )
        _type_against_sign(typ or ref.transactions[tid], body["amount"])
    if typ:
        if typ not in TRANSACTION_TYPES:
            raise RowError("type", f"{typ!r}: use expense, income or transfer")
        body["type"] = typ
    if not body:
        raise RowError("row", f"an edit needs at least one of {', '.join(EDITABLE)}")
    p.method, p.path, p.body = "PATCH", f"/v1/transactions/{tid}", body
    manual_only = [f for f in MANUAL_ONLY if f in body]
    if manual_only and tid in ref.bank_fed:
        p.warning = (
            f"{', '.join(manual_only)}: this transaction is on a bank-fed account, and the "
            "service takes amount, booked_at and type edits of manual transactions only: it "
            "will refuse this edit (400) unless the row was entered by hand; change only "
            "concept, category or notes"
        )


# the fields of an edit the service takes for manual transactions only (docs/api-contract.md)
MANUAL_ONLY = ("amount", "booked_at", "type")


def request_rows(records: Iterable[Mapping[str, Any]]) -> list[SourceRow]:
    """Rows of ops.outbox_requests as source rows (the same columns as an inbox file)."""
    out = []
    for rec in records:
        cells = {c: ("" if rec.get(c) is None else str(rec.get(c))) for c in COLUMNS}
        text = orjson.dumps(
            {k: v for k, v in cells.items() if v}, option=orjson.OPT_SORT_KEYS
        ).decode()
        out.append(SourceRow(int(rec["request_no"]), cells, text))
    return out
