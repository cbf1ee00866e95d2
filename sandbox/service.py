"""The emulated service's state and behaviour: clock, syncs, data (keys and limits in `access.py`, aggregates in `aggregates.py`)."""

from __future__ import annotations

import math
import random
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from datetime import time as dtime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from centsync.sandbox.access import (
    IDEMPOTENCY_TTL_MS,
    Access,
    IdemEntry,
    Key,
    canonical,
)
from centsync.sandbox.aggregates import Aggregates
from centsync.sandbox.errors import ServiceError, invalid
from centsync.sandbox.household import (
    DAY_MS,
    HOUR_MS,
    Account,
    Connection,
    Expense,
    generate,
)
from centsync.sandbox.household_data import AMOUNTS, MERCHANTS
from centsync.sandbox.ledger import EXPENSE, Ledger, Tx

SYNC_EVERY_MS = 6 * HOUR_MS
PENDING_MS = 3 * DAY_MS


@dataclass
class SandboxConfig:
    """How to build a sandbox: the data (seed, size, start) and the service's limits."""

    seed: int = 1
    years: int = 3
    transactions: int | None = None
    start: datetime | None = None  # the simulated clock's start; default: now, to the hour
    timezone: str = "Europe/Madrid"
    rate_limit: bool = True
    minute_limit: int = 300
    hour_limit: int = 10_000
    providers: tuple[str, str] = ("bankfeed_eu", "openbank_uk")
    provider_quota: int = 4  # manual syncs per provider per rolling 24 hours
    # the analysts' marts' test data (sandbox/household_truth.py): off, the pinned household
    noise: bool = False


@dataclass
class Faults:
    """Injected misbehaviour of the /v1 surface (contract section 7)."""

    error_rate: float = 0.0
    error_statuses: list[int] = field(default_factory=lambda: [500, 503])
    latency_ms: int = 0
    # a delay after a write's work is done, before its response leaves: the window in which a
    # client that dies has created something without hearing about it
    latency_after_ms: int = 0
    drop_rate: float = 0.0
    rate_limit_burst: int = 0
    omit_rate_limit_headers: bool = False
    drop_extra_fields: bool = False
    # every /v1 answer gains fields the contract does not list (section 9: clients ignore them)
    unknown_fields: bool = False
    drift: dict[str, int] = field(default_factory=dict)
    # transaction id -> how the list endpoint damages that row whenever it sends it:
    # amount_string, non_integer_amount, unknown_type, missing_field, bad_date
    corrupt: dict[str, str] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        return {
            "error_rate": self.error_rate,
            "error_statuses": self.error_statuses,
            "latency_ms": self.latency_ms,
            "latency_after_ms": self.latency_after_ms,
            "drop_rate": self.drop_rate,
            "rate_limit_burst": self.rate_limit_burst,
            "omit_rate_limit_headers": self.omit_rate_limit_headers,
            "drop_extra_fields": self.drop_extra_fields,
            "unknown_fields": self.unknown_fields,
            "drift": self.drift,
            "corrupt": self.corrupt,
        }


class Service(Access, Aggregates):
    """Everything the emulated service knows and does, independent of HTTP."""

    advanced_s: float = 0.0  # a state saved before rate windows followed the clock has none

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        start = config.start or datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        self.now_ms = int(start.timestamp() * 1000)
        hh = generate(
            config.seed,
            self.now_ms,
            years=config.years,
            transactions=config.transactions,
            timezone=config.timezone,
            providers=config.providers,
            noise=config.noise,
        )
        self.truth = hh.truth  # for tests only: which rows are which series and pair
        self.owner = hh.owner_id
        self.timezone = hh.timezone
        self.currency = hh.currency
        self.categories = hh.categories
        self.accounts: dict[str, Account] = {a.id: a for a in hh.accounts}
        self.connections = hh.connections
        self.expenses: dict[str, Expense] = {e.id: e for e in hh.expenses}
        self.ledger = Ledger(self.timezone)
        hidden = {a.id for a in hh.accounts if a.hidden}
        self.hidden_rows: dict[str, list[Tx]] = {a: [] for a in hidden}
        visible: list[Tx] = []
        for t in hh.transactions:
            if t.account_id in hidden:
                self.hidden_rows[t.account_id].append(t)
            else:
                visible.append(t)
            # Recent bank-feed rows are still pending: syncs may change or cancel them.
            if t.provider is not None and t.instant_ms > self.now_ms - PENDING_MS:
                t.pending_until_ms = t.created_ms + PENDING_MS
        self.ledger.load(visible)
        self.last_created_ms = max((t.created_ms for t in hh.transactions), default=self.now_ms)
        self.faults = Faults()
        self.fault_rng = random.Random(config.seed * 7919 + 1)
        self.idempotency: dict[tuple[str, str], IdemEntry] = {}
        self.manual_syncs: dict[str, list[int]] = {p: [] for p in config.providers}
        self.id_rng = random.Random(config.seed * 104729 + 3)
        self.keys: list[Key] = []
        self.admin_token = secrets.token_urlsafe(32)
        self.key_values: dict[str, str] = {}
        year_ms = 365 * DAY_MS
        self.key_values["read_only"] = self.create_key(
            ["data.read"], name="read only", expires_ms=self.now_ms + year_ms
        )
        self.key_values["read_write"] = self.create_key(
            ["data.read", "data.write"], name="read and write", expires_ms=self.now_ms + year_ms
        )
        self.key_values["expired"] = self.create_key(
            ["data.read", "data.write"], name="expired", expires_ms=self.now_ms - DAY_MS
        )

    # ---- ids and time ----------------------------------------------------------------------
    def new_id(self) -> str:
        return str(uuid.UUID(int=self.id_rng.getrandbits(128), version=4))

    def next_created_ms(self) -> int:
        """Creation stamps strictly increase so `sort=created_at` is a total order."""
        self.last_created_ms = max(self.now_ms, self.last_created_ms + 1)
        return self.last_created_ms

    def local_date(self, ms: int | None = None) -> date:
        return date.fromordinal(self.ledger.tz.ordinal(self.now_ms if ms is None else ms))

    def noon_ms(self, d: date) -> int:
        """The instant stored for a transaction given only a date: local noon, far from midnight."""
        dt = datetime.combine(d, dtime(12, 0), tzinfo=ZoneInfo(self.timezone))
        return int(dt.timestamp() * 1000)

    # ---- reference data --------------------------------------------------------------------
    def visible_account(self, account_id: str) -> Account | None:
        a = self.accounts.get(account_id)
        return a if a is not None and not a.hidden else None

    def visible_accounts(self) -> list[Account]:
        accs = [a for a in self.accounts.values() if not a.hidden]
        accs.sort(key=lambda a: (a.name.casefold(), a.id))
        return accs

    def transaction(self, tx_id: str) -> Tx | None:
        return self.ledger.by_id.get(tx_id)

    def settings(self) -> dict[str, Any]:
        return {
            "timezone": self.timezone,
            "currency": self.currency,
            "locale": "es-ES",
            "week_start": "monday",
        }

    def set_timezone(self, tz: str) -> None:
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise invalid(
                f"Unknown IANA timezone: {tz!r}.", "timezone", "unknown timezone"
            ) from None
        self.ledger.set_timezone(tz)  # first: if re-dating failed, the setting would stay as it was
        self.timezone = tz

    # ---- transactions ----------------------------------------------------------------------
    def add_transaction(
        self,
        account_id: str,
        concept: str,
        amount: int,
        typ: str,
        instant_ms: int,
        category_id: str | None = None,
        expense_goal_id: str | None = None,
        notes: str | None = None,
        manual: bool = True,
        pending_ms: int = 0,
    ) -> Tx:
        acc = self.accounts[account_id]
        provider = None
        if not manual and acc.connection_id is not None:
            provider = next(c.provider for c in self.connections if c.id == acc.connection_id)
        t = Tx(
            self.new_id(),
            account_id,
            concept,
            amount,
            typ,
            instant_ms,
            self.next_created_ms(),
            category_id=category_id,
            expense_goal_id=expense_goal_id,
            notes=notes,
            manual=manual,
            provider=provider,
            pending_until_ms=pending_ms,
        )
        if acc.hidden:
            self.hidden_rows[account_id].append(t)
        else:
            self.ledger.insert(t)
        acc.balance += amount
        acc.updated_ms = self.now_ms
        return t

    def change_transaction(self, t: Tx, changes: dict[str, Any]) -> None:
        acc = self.accounts[t.account_id]
        if "amount" in changes:
            acc.balance += changes["amount"] - t.amount
            acc.updated_ms = self.now_ms
        if not changes:
            return
        if acc.hidden:
            for k, v in changes.items():
                setattr(t, k, v)
            t.updated_ms = self.now_ms
        else:
            self.ledger.update(t, changes, self.now_ms)

    def delete_transaction(self, t: Tx) -> None:
        acc = self.accounts[t.account_id]
        if acc.hidden:
            self.hidden_rows[t.account_id].remove(t)
        else:
            self.ledger.remove(t)
        acc.balance -= t.amount
        acc.updated_ms = self.now_ms

    def find_any_transaction(self, tx_id: str) -> Tx | None:
        t = self.ledger.by_id.get(tx_id)
        if t is not None:
            return t
        for rows in self.hidden_rows.values():
            for r in rows:
                if r.id == tx_id:
                    return r
        return None

    def set_account_hidden(self, acc: Account, hidden: bool) -> None:
        if acc.hidden == hidden:
            return
        acc.hidden = hidden
        if hidden:
            moved = [t for t in self.ledger.rows if t.account_id == acc.id]
            keep = [t for t in self.ledger.rows if t.account_id != acc.id]
            self.hidden_rows[acc.id] = moved
            self.ledger.load(keep)
        else:
            rows = self.hidden_rows.pop(acc.id, [])
            self.ledger.load([*self.ledger.rows, *rows])

    def delete_account(self, acc: Account) -> None:
        if not acc.hidden:
            self.ledger.load([t for t in self.ledger.rows if t.account_id != acc.id])
        self.hidden_rows.pop(acc.id, None)
        del self.accounts[acc.id]
        for c in self.connections:
            if acc.id in c.account_ids:
                c.account_ids.remove(acc.id)

    def expense_balance(self, e: Expense) -> int:
        return e.budget + sum(t.amount for t in self.ledger.rows if t.expense_goal_id == e.id)

    # ---- clock and syncs -------------------------------------------------------------------
    def advance(self, ms: int) -> int:
        """Move the simulated clock forward, running every scheduled sync that falls due; how
        many bank syncs ran."""
        target = self.now_ms + ms
        self.advanced_s += ms / 1000
        syncs = 0
        while True:
            due = [c for c in self.connections if c.next_sync_ms <= target]
            if not due:
                break
            c = min(due, key=lambda c: (c.next_sync_ms, c.id))
            self.now_ms = max(self.now_ms, c.next_sync_ms)
            self.sync_connection(c)
            syncs += 1
            c.next_sync_ms = max(c.next_sync_ms + SYNC_EVERY_MS, self.now_ms + 1)
        self.now_ms = target
        return syncs

    def manual_sync(self, providers: list[str]) -> list[str]:
        """POST /v1/sync: quota per provider per rolling 24 hours, then sync now."""
        day_ago = self.now_ms - DAY_MS
        for p in providers:
            used = [t for t in self.manual_syncs[p] if t > day_ago]
            self.manual_syncs[p] = used
            if len(used) >= self.config.provider_quota:
                frees_at = used[0] + DAY_MS
                for c in self.connections:
                    if c.provider == p:
                        c.next_sync_ms = max(c.next_sync_ms, frees_at)
                wait_s = max(1, math.ceil((frees_at - self.now_ms) / 1000))
                raise ServiceError(
                    429,
                    "provider_quota_exhausted",
                    f"Provider {p} allows {self.config.provider_quota} manual syncs per 24 hours; its quota frees in {wait_s} s.",
                    headers={"Retry-After": str(wait_s)},
                )
        for p in providers:
            self.manual_syncs[p].append(self.now_ms)
            for c in self.connections:
                if c.provider == p:
                    self.sync_connection(c)
        return providers

    def sync_connection(self, c: Connection) -> None:
        """Bring in bank-feed rows since the last sync; settle, change or cancel pending ones."""
        rng = random.Random(f"{self.config.seed}:{c.id}:{self.now_ms}")
        accounts = {a for a in c.account_ids if a in self.accounts and not self.accounts[a].hidden}
        # Pending rows of this connection: settle those whose window passed, some changed.
        pending = [t for t in self.ledger.rows if t.pending_until_ms and t.account_id in accounts]
        for t in pending:
            if t.pending_until_ms > self.now_ms:
                continue
            roll = rng.random()
            if roll < 0.06:
                self.delete_transaction(t)  # a cancelled pending charge
                continue
            changes: dict[str, Any] = {"pending_until_ms": 0}
            if roll < 0.26 and t.type == EXPENSE and t.amount < 0:
                changes["amount"] = t.amount - rng.randint(1, max(2, -t.amount // 8))  # a tip
            elif roll < 0.40:
                changes["instant_ms"] = min(t.instant_ms + DAY_MS, self.now_ms)  # posted next day
            self.change_transaction(t, changes)
        # New rows that happened since the last sync.
        since = max(c.last_synced_ms, self.now_ms - 30 * DAY_MS)
        span = self.now_ms - since
        spenders = [a for a in accounts if self.accounts[a].type in ("depository", "credit")]
        if span > 0 and spenders:
            n = _poisson(rng, 2.0 * span / DAY_MS)
            cats = {v: k for k, v in self.categories.items()}
            for _ in range(n):
                category = rng.choice(["Groceries", "Restaurants", "Transport", "Shopping"])
                lo, hi = AMOUNTS[category]
                self.add_transaction(
                    rng.choice(sorted(spenders)),
                    rng.choice(MERCHANTS[category]),
                    -rng.randint(lo, hi),
                    EXPENSE,
                    since + int(rng.random() * span),
                    category_id=None if rng.random() < 0.06 else cats.get(category),
                    manual=False,
                    pending_ms=self.now_ms + PENDING_MS,
                )
        c.last_synced_ms = self.now_ms
        c.status = "active"

    # ---- drift injection -------------------------------------------------------------------
    def apply_drift(self, lo: int | None, hi: int | None) -> None:
        """Mutate rows inside a page window, as a bank would between two page reads."""
        drift = self.faults.drift
        if drift.get("pages", 0) <= 0:
            return
        drift["pages"] -= 1
        rng = self.fault_rng
        lo_ = lo if lo is not None else self.local_date().toordinal() - 60
        hi_ = hi if hi is not None else self.local_date().toordinal()
        hi_ = min(hi_, self.local_date().toordinal())
        visible = [a.id for a in self.visible_accounts() if a.type in ("depository", "credit")]
        for _ in range(drift.get("inserts", 0)):
            if hi_ < lo_ or not visible:
                break
            d = date.fromordinal(rng.randint(lo_, hi_))
            self.add_transaction(
                rng.choice(visible),
                rng.choice(MERCHANTS["Groceries"]),
                -rng.randint(100, 9000),
                EXPENSE,
                self.noon_ms(d),
                manual=False,
            )
        for _ in range(drift.get("updates", 0)):
            s, e = self.ledger.window(lo, hi)
            if e > s:
                t = self.ledger.rows[rng.randrange(s, e)]
                self.change_transaction(
                    t,
                    {
                        "amount": t.amount - rng.randint(1, 500)
                        if t.amount <= 0
                        else t.amount + rng.randint(1, 500)
                    },
                )
        for _ in range(drift.get("deletes", 0)):
            s, e = self.ledger.window(lo, hi)
            if e > s:
                self.delete_transaction(self.ledger.rows[rng.randrange(s, e)])


def _poisson(rng: random.Random, lam: float) -> int:
    # Knuth's method is fine for the small rates a sync window has.
    limit, k, p = math.exp(-min(lam, 50.0)), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


__all__ = [
    "IDEMPOTENCY_TTL_MS",
    "Faults",
    "IdemEntry",
    "Key",
    "SandboxConfig",
    "Service",
    "canonical",
]
