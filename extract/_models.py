"""Typed results for the small endpoints (aggregates, single records, writes).

Every result keeps ``raw``: the response body's JSON text exactly as the server sent it, so
fields this client does not know still reach the warehouse.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import polars as pl

from ._errors import ResponseFormatError
from ._frames import SPENDING_WIRE, TRANSACTION_WIRE, frame_from_records


def _date(value: Any) -> dt.date | None:
    return None if value is None else dt.date.fromisoformat(value)


def _time(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    parsed = dt.datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed


def _int(doc: dict[str, Any], name: str) -> int:
    value = doc.get(name)
    # bool is an int in Python; money and counts must be real integers
    if not isinstance(value, int) or isinstance(value, bool):
        raise ResponseFormatError(f"field {name!r} is not an integer: {type(value).__name__}")
    return value


def _opt_int(doc: dict[str, Any], name: str) -> int | None:
    return None if doc.get(name) is None else _int(doc, name)


class SurfaceUnavailable(ResponseFormatError):
    """An answer the API document leaves "not shown" that centsync cannot read (yet): its
    shape is not known and the data has not shown it (docs/api-contract.md). The refresh does
    without it; only a caller that cannot is stopped by it (exit 5)."""

    headline = "an answer of the service could not be read"
    what_to_do = (
        "run `centsync doctor` (its contract section says why), or pin the fields in the "
        "contract file (CENTSYNC_CONTRACT_FILE, docs/api-contract.md)."
    )

    def __init__(self, surface: str, reason: str = "its shape is not known yet") -> None:
        super().__init__(f"{surface}: {reason}")
        self.surface = surface
        self.reason = reason


@dataclass(frozen=True)
class Me:
    """``GET /v1/me``: the key's owner, scopes, expiry and allowance."""

    account_id: str
    scopes: tuple[str, ...]
    key_id: str
    key_expires_at: dt.datetime | None
    minute_limit: int
    minute_remaining: int | None
    hour_limit: int
    hour_remaining: int | None
    raw: str = field(repr=False)

    @property
    def can_write(self) -> bool:
        return "data.write" in self.scopes

    @classmethod
    def parse(cls, doc: dict[str, Any], raw: str) -> Me:
        key = doc.get("key") or {}
        limits = doc.get("rate_limit") or {}
        return cls(
            account_id=doc["account_id"],
            scopes=tuple(doc.get("scopes") or ()),
            key_id=key.get("id", ""),
            key_expires_at=_time(key.get("expires_at")),
            minute_limit=_int(limits, "minute_limit"),
            minute_remaining=_opt_int(limits, "minute_remaining"),
            hour_limit=_int(limits, "hour_limit"),
            hour_remaining=_opt_int(limits, "hour_remaining"),
            raw=raw,
        )


@dataclass(frozen=True)
class Settings:
    """``GET /v1/settings``."""

    timezone: str
    currency: str
    locale: str | None
    week_start: str | None
    raw: str = field(repr=False)

    @classmethod
    def parse(cls, doc: dict[str, Any], raw: str) -> Settings:
        week_start = doc.get("week_start")
        return cls(
            timezone=doc["timezone"],
            currency=doc["currency"],
            locale=doc.get("locale"),
            week_start=None if week_start is None else str(week_start),
            raw=raw,
        )


@dataclass(frozen=True)
class AccountsSummary:
    """``GET /v1/accounts/summary``: the application's balance rollups, in cents."""

    currency: str | None
    assets: int | None
    liabilities: int | None
    net_worth: int | None
    count: int | None
    by_type: dict[str, int]
    raw: str = field(repr=False)

    @classmethod
    def parse(cls, doc: dict[str, Any], raw: str) -> AccountsSummary:
        """Every figure optional: an answer learned in part gives what it gives (the per-type
        sums without the totals, say); the rest is None, never a guess."""
        by_type = doc.get("by_type") or {}
        return cls(
            currency=doc.get("currency"),
            assets=_opt_int(doc, "assets"),
            liabilities=_opt_int(doc, "liabilities"),
            net_worth=_opt_int(doc, "net_worth"),
            count=_opt_int(doc, "count"),
            by_type={k: _int(by_type, k) for k in by_type},
            raw=raw,
        )


@dataclass(frozen=True)
class NetWorth:
    """``GET /v1/analytics/net-worth``."""

    currency: str | None
    assets: int | None
    liabilities: int | None
    total: int | None
    as_of: dt.datetime | None
    raw: str = field(repr=False)

    @classmethod
    def parse(cls, doc: dict[str, Any], raw: str) -> NetWorth:
        """Every field optional: a net worth read before its amounts are learned (or with
        some of them undecided) still gives the service's `as_of`."""
        return cls(
            currency=doc.get("currency"),
            assets=_opt_int(doc, "assets"),
            liabilities=_opt_int(doc, "liabilities"),
            total=_opt_int(doc, "total"),
            as_of=_time(doc.get("as_of")),
            raw=raw,
        )


@dataclass(frozen=True)
class Spending:
    """``GET /v1/analytics/spending``: ``rows`` has key, label, amount (cents), count."""

    from_: dt.date | None
    to: dt.date | None
    group_by: str
    currency: str
    total: int
    rows: pl.DataFrame = field(repr=False)
    raw: str = field(repr=False)

    @classmethod
    def parse(cls, doc: dict[str, Any], raw: str) -> Spending:
        rows = frame_from_records(list(doc.get("data") or []), SPENDING_WIRE, raw=False)
        return cls(
            from_=_date(doc.get("from")),
            to=_date(doc.get("to")),
            group_by=doc.get("group_by", ""),
            currency=doc.get("currency", ""),
            total=_int(doc, "total"),
            rows=rows,
            raw=raw,
        )


@dataclass(frozen=True)
class TransactionsSummary:
    """``GET /v1/transactions/summary``: count and sums per type, in cents."""

    count: int
    income: int
    expense: int
    transfer: int
    net: int
    raw: str = field(repr=False)

    @classmethod
    def parse(cls, doc: dict[str, Any], raw: str) -> TransactionsSummary:
        return cls(
            count=_int(doc, "count"),
            income=_int(doc, "income"),
            expense=_int(doc, "expense"),
            transfer=_int(doc, "transfer"),
            net=_int(doc, "net"),
            raw=raw,
        )


@dataclass(frozen=True)
class Transaction:
    """One transaction (single GET, create, PATCH, assign); ``replayed`` marks an idempotent replay."""

    id: str
    account_id: str
    concept: str
    amount: int
    booked_at: dt.date
    type: str
    category_id: str | None
    expense_goal_id: str | None
    notes: str | None
    created_at: dt.datetime | None
    updated_at: dt.datetime | None
    raw: str = field(repr=False)
    replayed: bool = False
    # a write's answer: its status, the whole body as sent (``raw`` is the transaction's own
    # object in it), and where the transaction was found (``FOUND_*``)
    status: int | None = None
    answer: str = field(default="", repr=False)
    found: str = ""

    @classmethod
    def parse(cls, doc: dict[str, Any], raw: str, *, replayed: bool = False) -> Transaction:
        booked = _date(doc.get("booked_at"))
        if booked is None:
            raise ResponseFormatError("transaction without booked_at")
        return cls(
            id=doc["id"],
            account_id=doc["account_id"],
            concept=doc["concept"],
            amount=_int(doc, "amount"),
            booked_at=booked,
            type=doc["type"],
            category_id=doc.get("category_id"),
            expense_goal_id=doc.get("expense_goal_id"),
            notes=doc.get("notes"),
            created_at=_time(doc.get("created_at")),
            updated_at=_time(doc.get("updated_at")),
            raw=raw,
            replayed=replayed,
        )

    @classmethod
    def from_answer(
        cls, doc: Any, text: str, expect: dict[str, Any], *, status: int, replayed: bool = False
    ) -> Transaction | None:
        """The transaction in a write's (or a read-back's) answer, whatever its shape: the object
        holding the documented fields that agree with ``expect`` (what was sent: the fields of a
        create, the id of an edit), bare or under one wrapper of any name (``data``,
        ``transaction``, ``result``, a one-element list). None when no object in it is that
        transaction (an empty body, a bare status): the caller reads it back."""
        found = find_transaction(doc, expect)
        if found is None:
            return None
        where, obj = found
        raw = text if obj is doc else orjson.dumps(obj).decode()
        t = cls.parse(obj, raw, replayed=replayed)
        return replace(
            t,
            status=status,
            answer=text,
            found="in the answer" + (f" under {where!r}" * bool(where)),
        )

    def to_frame(self, *, notes: bool = True) -> pl.DataFrame:
        """The same one-row frame the list readers return (``notes=False``: its raw without
        ``notes`` too, as the list sends it)."""
        raw = self.raw
        if not notes:
            doc = orjson.loads(raw)
            doc.pop("notes", None)
            raw = orjson.dumps(doc).decode()
        frame = frame_from_records([orjson.loads(raw)], TRANSACTION_WIRE, raw=False)
        return frame.with_columns(pl.lit(raw, dtype=pl.Utf8).alias("raw"))


@dataclass(frozen=True)
class SyncRequest:
    """``POST /v1/sync``: the queued sync."""

    sync_id: str
    status: str
    providers: tuple[str, ...]
    raw: str = field(repr=False)

    @classmethod
    def parse(cls, doc: dict[str, Any], raw: str) -> SyncRequest:
        return cls(
            sync_id=doc["sync_id"],
            status=doc["status"],
            providers=tuple(doc.get("providers") or ()),
            raw=raw,
        )


# The Transaction fields the API document fixes (section 2): an object holding them all is a
# transaction, whatever wraps it.
TRANSACTION_FIELDS = ("id", "account_id", "concept", "amount", "booked_at", "type")


def is_transaction(obj: Any, expect: dict[str, Any]) -> bool:
    """Whether ``obj`` holds the documented fields with their documented types, agreeing with
    every field of ``expect`` (an omitted nullable field counts as null)."""
    if not isinstance(obj, dict) or not all(f in obj for f in TRANSACTION_FIELDS):
        return False
    amount = obj["amount"]
    if not isinstance(amount, int) or isinstance(amount, bool):
        return False
    if not all(isinstance(obj[f], str) for f in TRANSACTION_FIELDS if f != "amount"):
        return False
    return all(_same(name, obj.get(name), value) for name, value in expect.items())


def _same(name: str, got: Any, want: Any) -> bool:
    """Whether a field sent and a field answered agree (ids in any case: they are UUIDs)."""
    if name == "id" or name.endswith("_id"):
        got = got.lower() if isinstance(got, str) else got
        want = want.lower() if isinstance(want, str) else want
    return bool(got == want)


def find_transaction(doc: Any, expect: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(where, object) of the transaction in an answer: ``""`` at the top level, else the name
    of the one wrapper it is under (a one-element list counts as a wrapper too). The top level
    is tried first, then every wrapper; None when none holds it."""
    if isinstance(doc, list) and len(doc) == 1:
        doc = doc[0]
    if is_transaction(doc, expect):
        return "", doc
    if not isinstance(doc, dict):
        return None
    for name, value in doc.items():
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if is_transaction(value, expect):
            return str(name), value
    return None
