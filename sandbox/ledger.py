"""The sandbox's in-memory ledger: transactions kept sorted and indexed for fast pages and sums."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

import orjson

EXPENSE, INCOME, TRANSFER = "expense", "income", "transfer"
TYPES = (EXPENSE, INCOME, TRANSFER)


def _compact(b: bytes) -> bytes:
    # orjson's bytes keep their ~4 KiB write buffer; a copy is exact-size (10x less memory).
    return bytes(memoryview(b))


@lru_cache(maxsize=65536)
def _day_iso(days_since_epoch: int) -> str:
    return date.fromordinal(days_since_epoch + 719_163).isoformat()


def iso_ms(ms: int) -> str:
    """ISO 8601 UTC with milliseconds, the contract's timestamp format (hot path: no datetime)."""
    days, rem = divmod(ms, 86_400_000)
    h, rem = divmod(rem, 3_600_000)
    m, rem = divmod(rem, 60_000)
    sec, milli = divmod(rem, 1000)
    return f"{_day_iso(days)}T{h:02d}:{m:02d}:{sec:02d}.{milli:03d}Z"


def merchant_key(concept: str) -> str:
    """Spending's merchant key: trimmed, lower-cased, inner whitespace collapsed."""
    return " ".join(concept.split()).lower()


class Tx:
    """One transaction as the service stores it (a UTC instant; booked_at derives from it)."""

    __slots__ = (
        "account_id",
        "amount",
        "booked",
        "category_id",
        "concept",
        "created_ms",
        "expense_goal_id",
        "id",
        "instant_ms",
        "js",
        "manual",
        "notes",
        "pending_until_ms",
        "provider",
        "type",
        "updated_ms",
    )

    def __init__(
        self,
        id: str,
        account_id: str,
        concept: str,
        amount: int,
        type: str,
        instant_ms: int,
        created_ms: int,
        category_id: str | None = None,
        expense_goal_id: str | None = None,
        notes: str | None = None,
        manual: bool = False,
        provider: str | None = None,
        pending_until_ms: int = 0,
    ) -> None:
        self.id = id
        self.account_id = account_id
        self.concept = concept
        self.amount = amount
        self.type = type
        self.instant_ms = instant_ms
        self.created_ms = created_ms
        self.updated_ms = created_ms
        self.category_id = category_id
        self.expense_goal_id = expense_goal_id
        self.notes = notes
        self.manual = manual
        self.provider = provider
        self.pending_until_ms = pending_until_ms
        self.booked = 0  # date ordinal in the settings timezone, set by the ledger
        self.js: bytes | None = None  # cached list representation

    def sort_key(self) -> tuple[int, int, str]:
        return (-self.booked, -self.created_ms, self.id)

    def booked_iso(self) -> str:
        return _day_iso(self.booked - 719_163)

    def record(self, *, notes: bool, extra: bool = True) -> dict[str, object]:
        """The JSON record; the list omits `notes` (contract section 4)."""
        rec: dict[str, object] = {
            "id": self.id,
            "account_id": self.account_id,
            "concept": self.concept,
            "amount": self.amount,
            "booked_at": self.booked_iso(),
            "type": self.type,
            "category_id": self.category_id,
            "expense_goal_id": self.expense_goal_id,
        }
        if notes:
            rec["notes"] = self.notes
        if extra:
            rec["created_at"] = iso_ms(self.created_ms)
            rec["updated_at"] = iso_ms(self.updated_ms)
        return rec

    def list_json(self) -> bytes:
        js = self.js
        if js is None:
            js = self.js = _compact(orjson.dumps(self.record(notes=False)))
        return js


@dataclass
class DayStats:
    """Aggregates of one booked day, so summaries over date ranges need no row scan."""

    count: int = 0
    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TYPES, 0))
    # expense spending per category id (None for uncategorised): [amount, count]
    spend_cat: dict[str | None, list[int]] = field(default_factory=dict)
    # expense spending per merchant key (see merchant_key): [amount, count]
    spend_merchant: dict[str, list[int]] = field(default_factory=dict)


class TzDates:
    """Maps UTC instants to local date ordinals, caching the UTC offset per hour."""

    def __init__(self, tz: str) -> None:
        self.zone = ZoneInfo(tz)
        self._offsets: dict[int, int] = {}

    def ordinal(self, instant_ms: int) -> int:
        hour = instant_ms // 3_600_000
        off = self._offsets.get(hour)
        if off is None:
            dt = datetime.fromtimestamp(hour * 3600, tz=UTC).astimezone(self.zone)
            off = self._offsets[hour] = int(dt.utcoffset().total_seconds() * 1000)  # type: ignore[union-attr]
        return (instant_ms + off) // 86_400_000 + 719_163  # 719163 = date(1970,1,1).toordinal()


class Ledger:
    """Visible transactions sorted newest first, with per-day aggregates and a query cache."""

    def __init__(self, tz: str) -> None:
        self.tz = TzDates(tz)
        self.rows: list[Tx] = []
        self.keys: list[tuple[int, int, str]] = []
        self.by_id: dict[str, Tx] = {}
        self.days: dict[int, DayStats] = {}
        self.version = 0
        self._cache: dict[tuple[object, ...], list[Tx]] = {}
        self._by_created: list[Tx] | None = None

    # ---- building and mutation -------------------------------------------------------------
    def load(self, txs: Iterable[Tx]) -> None:
        """Replace the whole content (startup and timezone changes)."""
        rows = list(txs)
        for t in rows:
            t.booked = self.tz.ordinal(t.instant_ms)
            t.js = None
        rows.sort(key=Tx.sort_key)
        self.rows = rows
        # Serialise every row now: a page is then a join of cached bytes.
        for t in rows:
            t.js = _compact(orjson.dumps(t.record(notes=False)))
        self.keys = [t.sort_key() for t in rows]
        self.by_id = {t.id: t for t in rows}
        self.days = {}
        for t in rows:
            self._account(t, +1)
        self._touch()

    def set_timezone(self, tz: str) -> None:
        self.tz = TzDates(tz)
        self.load(self.rows)

    def insert(self, t: Tx) -> None:
        t.booked = self.tz.ordinal(t.instant_ms)
        t.js = None
        k = t.sort_key()
        i = bisect.bisect_left(self.keys, k)
        self.keys.insert(i, k)
        self.rows.insert(i, t)
        self.by_id[t.id] = t
        self._account(t, +1)
        self._touch()

    def remove(self, t: Tx) -> None:
        k = t.sort_key()
        i = bisect.bisect_left(self.keys, k)
        if i >= len(self.rows) or self.rows[i] is not t:
            raise KeyError(t.id)
        del self.keys[i]
        del self.rows[i]
        del self.by_id[t.id]
        self._account(t, -1)
        self._touch()

    def update(self, t: Tx, changes: dict[str, object], now_ms: int) -> None:
        """Apply field changes to a row, keeping order and aggregates right."""
        self.remove(t)
        for name, value in changes.items():
            setattr(t, name, value)
        t.updated_ms = now_ms
        self.insert(t)

    def _touch(self) -> None:
        self.version += 1
        self._cache.clear()
        self._by_created = None

    # ---- aggregates --------------------------------------------------------------------------
    def _account(self, t: Tx, sign: int, booked: int | None = None) -> None:
        day = booked if booked is not None else t.booked
        st = self.days.get(day)
        if st is None:
            st = self.days[day] = DayStats()
        st.count += sign
        st.sums[t.type] += sign * t.amount
        if t.type == EXPENSE:
            cell = st.spend_cat.setdefault(t.category_id, [0, 0])
            cell[0] += sign * t.amount
            cell[1] += sign
            if cell[1] == 0:
                del st.spend_cat[t.category_id]
            merchant = merchant_key(t.concept)
            cell = st.spend_merchant.setdefault(merchant, [0, 0])
            cell[0] += sign * t.amount
            cell[1] += sign
            if cell[1] == 0:
                del st.spend_merchant[merchant]
        if st.count == 0:
            del self.days[day]

    # ---- queries -----------------------------------------------------------------------------
    def window(self, lo: int | None, hi: int | None) -> tuple[int, int]:
        """Index range of rows with lo <= booked <= hi (ordinals; None is unbounded)."""
        start = 0 if hi is None else bisect.bisect_left(self.keys, (-hi,))
        end = len(self.rows) if lo is None else bisect.bisect_left(self.keys, (-lo + 1,))
        return start, max(start, end)

    def select(
        self,
        lo: int | None,
        hi: int | None,
        preds: tuple[tuple[str, object], ...],
        sort: str = "booked_at",
    ) -> list[Tx] | tuple[int, int]:
        """Matching rows: an index range when only dates filter, else a cached list."""
        if not preds and sort == "booked_at":
            return self.window(lo, hi)
        key = (lo, hi, preds, sort)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if sort == "created_at":
            if self._by_created is None:
                self._by_created = sorted(self.rows, key=lambda t: (-t.created_ms, t.id))
            source: Iterable[Tx] = self._by_created
            if lo is not None or hi is not None:
                lo_ = lo if lo is not None else -(10**9)
                hi_ = hi if hi is not None else 10**9
                source = (t for t in source if lo_ <= t.booked <= hi_)
        else:
            s, e = self.window(lo, hi)
            source = self.rows[s:e]
        out = [t for t in source if _matches(t, preds)]
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = out
        return out

    def iter_range(self, lo: int | None, hi: int | None) -> Iterator[Tx]:
        s, e = self.window(lo, hi)
        return iter(self.rows[s:e])

    def day_range(self, lo: int | None, hi: int | None) -> Iterator[tuple[int, DayStats]]:
        lo_ = lo if lo is not None else -(10**9)
        hi_ = hi if hi is not None else 10**9
        if hi_ - lo_ < len(self.days):
            for d in range(lo_, hi_ + 1):
                st = self.days.get(d)
                if st is not None:
                    yield d, st
        else:
            for d, st in self.days.items():
                if lo_ <= d <= hi_:
                    yield d, st


def _matches(t: Tx, preds: tuple[tuple[str, object], ...]) -> bool:
    for name, value in preds:
        if name == "search":
            if str(value) not in t.concept.lower():
                return False
        elif getattr(t, name) != value:
            return False
    return True
