"""A deterministic synthetic household: accounts, connections, categories, Expenses and history."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from centsync.sandbox.household_data import (
    ACCOUNTS,
    AMOUNTS,
    CASH_CONCEPTS,
    CATEGORY_NAMES,
    EXPENSES,
    INSTITUTIONS,
    MERCHANTS,
    MONTHLY_VARIABLE,
    OTHER_INCOME_CONCEPTS,
    RESTAURANT_HOURS,
    SUBSCRIPTIONS,
    VARIABLE_WEIGHTS,
)
from centsync.sandbox.household_truth import Truth, add_noise
from centsync.sandbox.ledger import EXPENSE, INCOME, TRANSFER, Tx

DAY_MS = 86_400_000
HOUR_MS = 3_600_000


@dataclass
class Account:
    id: str
    name: str
    type: str
    subtype: str | None
    institution: str | None
    connection_id: str | None
    opening: int  # balance before the first generated transaction, cents
    hidden: bool = False
    balance: int = 0
    updated_ms: int = 0

    def record(self, currency: str, extra: bool = True) -> dict[str, object]:
        rec: dict[str, object] = {
            "id": self.id,
            "name": self.name,
            "type": self.type,
            "subtype": self.subtype,
            "currency": currency,
            "balance": self.balance,
        }
        if extra:
            from centsync.sandbox.ledger import iso_ms

            rec["connection_id"] = self.connection_id
            rec["institution"] = self.institution
            rec["updated_at"] = iso_ms(self.updated_ms)
        return rec


@dataclass
class Connection:
    id: str
    provider: str
    institution: str
    status: str = "active"
    last_synced_ms: int = 0
    next_sync_ms: int = 0
    account_ids: list[str] = field(default_factory=list)


@dataclass
class Expense:
    id: str
    name: str
    budget: int


@dataclass
class Household:
    timezone: str
    currency: str
    categories: dict[str, str]  # id -> name
    cat_by_name: dict[str, str]
    accounts: list[Account]
    connections: list[Connection]
    expenses: list[Expense]
    transactions: list[Tx]
    owner_id: str
    # for tests only: which visible rows belong to which recurring series and transfer pair
    truth: Truth = field(default_factory=Truth)


class Ids:
    """Deterministic uuids from the seed (uuid4-shaped, drawn from the seeded RNG)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def new(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))


def generate(
    seed: int,
    now_ms: int,
    years: int = 3,
    transactions: int | None = None,
    timezone: str = "Europe/Madrid",
    providers: tuple[str, str] = ("bankfeed_eu", "openbank_uk"),
    noise: bool = False,
) -> Household:
    """Build the household and its history up to `now_ms`, deterministically from `seed`.

    `noise` (tests and benchmarks of the analysts' marts): price rises, skipped and moved
    occurrences, an ended subscription, one-off purchases at recurring merchants and lone
    transfer legs of equal amounts, drawn from a second RNG after the household is built
    (sandbox/household_truth.py): without it the household is byte for byte the pinned one.
    """
    builder = HouseholdBuilder(seed, now_ms, years, timezone, providers)
    builder.noise = noise
    return builder.build(transactions)


class HouseholdBuilder:
    """Draws a household from one seeded RNG, one method per event stream.

    Every draw comes from the one RNG in a fixed order, so the methods' call order is part of the
    household's identity: the same seed must give the same household byte for byte (every test and
    benchmark figure is measured against it; tests/sandbox/test_household_pinned.py pins a hash).
    """

    def __init__(
        self, seed: int, now_ms: int, years: int, timezone: str, providers: tuple[str, str]
    ) -> None:
        self.rng = random.Random(seed)
        self.ids = Ids(self.rng)
        self.now_ms = now_ms
        self.timezone = timezone
        self.zone = ZoneInfo(timezone)
        self.providers = providers
        self.owner_id = self.ids.new()
        self.categories = {self.ids.new(): name for name in CATEGORY_NAMES}
        self.cat = {name: cid for cid, name in self.categories.items()}
        self.connections = [
            Connection(self.ids.new(), provider, institution)
            for provider, institution in zip(providers, INSTITUTIONS, strict=True)
        ]
        self.acc: dict[str, Account] = {}
        for spec in ACCOUNTS:
            conn = None if spec.connection is None else self.connections[spec.connection].id
            self.acc[spec.key] = Account(
                self.ids.new(),
                spec.name,
                spec.type,
                spec.subtype,
                spec.institution,
                conn,
                spec.opening,
                hidden=spec.hidden,
            )
        for i, conn_obj in enumerate(self.connections):
            conn_obj.account_ids = [
                self.acc[spec.key].id for spec in ACCOUNTS if spec.connection == i
            ]
        self.expenses = [Expense(self.ids.new(), name, budget) for name, budget in EXPENSES]
        now = datetime.fromtimestamp(now_ms / 1000, tz=UTC).astimezone(self.zone)
        self.first_month = (now.year - years) * 12 + now.month  # months count as year*12+month
        self.last_month = now.year * 12 + now.month
        self.out: list[Tx] = []
        self.truth = Truth()
        self.noise = False

    def build(self, transactions: int | None) -> Household:
        """Every month's events, then the scale knob, then balances consistent with the rows."""
        for ym in range(self.first_month, self.last_month + 1):
            self.month(ym)
        if transactions is not None:
            # The knob counts visible rows: the hidden account's rows come on top.
            old = self.acc["old"].id
            hidden_rows = [t for t in self.out if t.account_id == old]
            visible_rows = [t for t in self.out if t.account_id != old]
            self.out = self.rescale(visible_rows, transactions) + hidden_rows
        if self.noise:
            self.out = add_noise(self, random.Random(self.rng.random()))
        self.truth = self.truth.kept({t.id for t in self.out if t.account_id != self.acc["old"].id})
        return self.finish()

    def month(self, ym: int) -> None:
        """One month's events, in the order that fixes the RNG's draws."""
        y, m = divmod(ym - 1, 12)
        m += 1
        mdays = _month_days(y, m)
        self.salary(y, m, mdays)
        self.rent(y, m)
        self.subscriptions(y, m)
        self.utilities(y, m)
        self.variable_spending(y, m, mdays)
        self.card_payment(y, m, mdays)
        self.transfers(y, m)
        self.cash(y, m, mdays)
        self.hidden_account(y, m)
        if ym == self.last_month - 5:
            self.goal_purchase(y, m)

    def local_ms(self, y: int, m: int, d: int, hour: int, minute: int) -> int:
        """A wall-clock time in the household's zone as epoch milliseconds."""
        dt = datetime(y, m, d, hour, minute, tzinfo=self.zone)
        return int(dt.timestamp() * 1000)

    def add(
        self,
        account: str,
        concept: str,
        amount: int,
        typ: str,
        instant: int,
        category: str | None,
        manual: bool = False,
        goal: str | None = None,
        notes: str | None = None,
        series: str | None = None,
    ) -> str | None:
        """Record one transaction unless it falls in the last hour (not yet visible); its id.

        `series` names the recurring series the row belongs to (the truth, for tests only).
        """
        if instant > self.now_ms - HOUR_MS:
            return None
        rng = self.rng
        a = self.acc[account]
        provider = None
        if a.connection_id is not None and not manual:
            provider = (
                self.providers[0]
                if a.connection_id == self.connections[0].id
                else self.providers[1]
            )
        lag = (
            rng.randint(5 * 60_000, 20 * HOUR_MS) if not manual else rng.randint(60_000, 3 * DAY_MS)
        )
        created = min(instant + lag, self.now_ms - 1000)
        self.out.append(
            Tx(
                self.ids.new(),
                a.id,
                concept,
                amount,
                typ,
                instant,
                created,
                category_id=self.cat[category] if category else None,
                expense_goal_id=goal,
                notes=notes,
                manual=manual,
                provider=provider,
            )
        )
        if series is not None:
            self.truth.series[self.out[-1].id] = series
        return self.out[-1].id

    def pair(self, out_id: str | None, in_id: str | None) -> None:
        """Both legs of one transfer, as the truth (for tests only)."""
        if out_id is not None and in_id is not None:
            self.truth.pairs.append((out_id, in_id))

    def salary(self, y: int, m: int, mdays: int) -> None:
        """The payroll, and now and then other income."""
        rng = self.rng
        self.add(
            "checking",
            "ACME Corp Payroll",
            385_000 + rng.randint(0, 3) * 2500,
            INCOME,
            self.local_ms(y, m, min(28, mdays), 6, 0),
            "Salary",
            series="salary",
        )
        if rng.random() < 0.35:
            self.add(
                "checking",
                rng.choice(OTHER_INCOME_CONCEPTS),
                rng.randint(5000, 90000),
                INCOME,
                self.local_ms(y, m, rng.randint(1, mdays), 12, 0),
                "Other income",
            )

    def rent(self, y: int, m: int) -> None:
        """The rent, on the first of the month."""
        self.add(
            "checking",
            "Rent - Calle Colon 12",
            -120_000,
            EXPENSE,
            self.local_ms(y, m, 1, 9, 0),
            "Rent",
            series="rent",
        )

    def subscriptions(self, y: int, m: int) -> None:
        """The card's monthly subscriptions, sometimes spelled in capitals by the feed."""
        rng = self.rng
        for sub in SUBSCRIPTIONS:
            self.add(
                "card",
                sub if rng.random() < 0.8 else sub.upper(),
                -rng.choice((999, 1099, 1299)) if sub != "iCloud Storage" else -299,
                EXPENSE,
                self.local_ms(y, m, rng.randint(3, 7), 4, 0),
                "Subscriptions",
                series=sub,
            )

    def utilities(self, y: int, m: int) -> None:
        """One bill per utility, from checking."""
        rng = self.rng
        for util in MERCHANTS["Utilities"]:
            self.add(
                "checking",
                util,
                -rng.randint(*AMOUNTS["Utilities"]),
                EXPENSE,
                self.local_ms(y, m, rng.randint(10, 20), 7, 0),
                "Utilities",
                series=util,
            )

    def variable_spending(self, y: int, m: int, mdays: int) -> None:
        """The month's variable rows: everyday categories, sometimes health, travel in season."""
        rng = self.rng
        for category, lo, hi in MONTHLY_VARIABLE:
            for _ in range(rng.randint(lo, hi)):
                self.variable(category, y, m, mdays)
        if rng.random() < 0.4:
            self.variable("Health", y, m, mdays)
        if m in (4, 7, 8, 12) or rng.random() < 0.15:
            for _ in range(rng.randint(1, 3)):
                self.variable("Travel", y, m, mdays)

    def variable(self, category: str, y: int, m: int, mdays: int) -> None:
        """One variable expense (and now and then its refund)."""
        rng = self.rng
        lo, hi = AMOUNTS[category]
        amount = -rng.randint(lo, hi)
        day = rng.randint(1, mdays)
        hour = rng.choice(RESTAURANT_HOURS) if category == "Restaurants" else rng.randint(8, 22)
        minute = rng.randint(0, 59)
        account = "card" if rng.random() < 0.55 else "checking"
        # Some rows arrive uncategorised from the feed.
        category_id: str | None = None if rng.random() < 0.06 else category
        goal = None
        if category == "Travel" and m in (6, 7, 8) and rng.random() < 0.7:
            goal = self.expenses[0].id
        elif category == "Shopping" and m == 12 and rng.random() < 0.5:
            goal = self.expenses[2].id
        self.add(
            account,
            rng.choice(MERCHANTS[category]),
            amount,
            EXPENSE,
            self.local_ms(y, m, day, hour, minute),
            category_id,
            goal=goal,
        )
        # Refunds: a positive expense on the same account a few days later.
        if category in ("Shopping", "Travel") and rng.random() < 0.08:
            rday = min(mdays, day + rng.randint(2, 6))
            self.add(
                account,
                "Refund " + rng.choice(MERCHANTS[category]),
                -amount // rng.choice((1, 2)),
                EXPENSE,
                self.local_ms(y, m, rday, 10, 30),
                category_id,
            )

    def card_payment(self, y: int, m: int, mdays: int) -> None:
        """The card's monthly payment: both legs of the transfer."""
        pay = self.rng.randint(60_000, 110_000)
        t = self.local_ms(y, m, min(25, mdays), 10, 0)
        out = self.add("checking", "Payment to Visa Platinum", -pay, TRANSFER, t, "Transfers")
        got = self.add(
            "card", "PAYMENT RECEIVED - THANK YOU", pay, TRANSFER, t + 60_000, "Transfers"
        )
        self.pair(out, got)

    def transfers(self, y: int, m: int) -> None:
        """Savings and investment transfers, the quarterly dividend, the loan instalment."""
        t = self.local_ms(y, m, 2, 8, 0)
        out = self.add("checking", "Transfer to savings", -30_000, TRANSFER, t, "Transfers")
        got = self.add(
            "savings", "Transfer from checking", 30_000, TRANSFER, t + 30_000, "Transfers"
        )
        self.pair(out, got)
        t = self.local_ms(y, m, 5, 8, 0)
        out = self.add("savings", "Monthly investment", -20_000, TRANSFER, t, None)
        self.pair(out, self.add("broker", "Contribution", 20_000, TRANSFER, t + 30_000, None))
        if m in (3, 6, 9, 12):
            self.add(
                "broker",
                "Dividend VWCE",
                self.rng.randint(3000, 9000),
                INCOME,
                self.local_ms(y, m, 15, 9, 0),
                "Other income",
                series="dividend",
            )
        # Loan instalment: both legs.
        t = self.local_ms(y, m, 3, 9, 0)
        out = self.add("checking", "Car loan instalment", -35_000, TRANSFER, t, "Transfers")
        got = self.add("loan", "Instalment received", 35_000, TRANSFER, t + 60_000, "Transfers")
        self.pair(out, got)

    def cash(self, y: int, m: int, mdays: int) -> None:
        """Manual cash: an ATM withdrawal (transfer legs) and cash spending, some uncategorised."""
        rng = self.rng
        t = self.local_ms(y, m, rng.randint(1, mdays), 12, 0)
        out = self.add("checking", "ATM withdrawal", -10_000, TRANSFER, t, "Cash")
        got = self.add("cash", "Cash from ATM", 10_000, TRANSFER, t + 1000, "Cash", manual=True)
        self.pair(out, got)
        for _ in range(rng.randint(2, 4)):
            self.add(
                "cash",
                rng.choice(CASH_CONCEPTS),
                -rng.randint(150, 3000),
                EXPENSE,
                self.local_ms(y, m, rng.randint(1, mdays), rng.randint(9, 20), 0),
                None if rng.random() < 0.5 else "Groceries",
                manual=True,
                notes="cash" if rng.random() < 0.3 else None,
            )

    def hidden_account(self, y: int, m: int) -> None:
        """The hidden account still has activity: invisible everywhere."""
        self.add(
            "old",
            "Old joint direct debit",
            -self.rng.randint(1000, 5000),
            EXPENSE,
            self.local_ms(y, m, 12, 10, 0),
            "Utilities",
        )

    def goal_purchase(self, y: int, m: int) -> None:
        """A laptop purchase assigned to an Expense, once."""
        self.add(
            "card",
            "Apple Store",
            -119_900,
            EXPENSE,
            self.local_ms(y, m, 9, 16, 0),
            "Shopping",
            goal=self.expenses[1].id,
        )

    def rescale(self, out: list[Tx], target: int) -> list[Tx]:
        """Trim or pad the natural history to exactly `target` rows (the benchmark scale knob)."""
        rng = self.rng
        if target <= len(out):
            keep = sorted(rng.sample(range(len(out)), target))
            return [out[i] for i in keep]
        y0, m0 = divmod(self.first_month - 1, 12)
        start_ms = int(datetime(y0, m0 + 1, 1, tzinfo=self.zone).timestamp() * 1000)
        span = self.now_ms - HOUR_MS - start_ms
        names = list(VARIABLE_WEIGHTS)
        weights = list(VARIABLE_WEIGHTS.values())
        cards = (self.acc["card"].id, self.providers[1])
        checks = (self.acc["checking"].id, self.providers[0])
        chosen = rng.choices(names, weights, k=target - len(out))
        for category in chosen:
            lo, hi = AMOUNTS[category]
            instant = start_ms + int(rng.random() * span)
            account, provider = cards if rng.random() < 0.55 else checks
            created = instant + rng.randint(300_000, 20 * HOUR_MS)
            out.append(
                Tx(
                    self.ids.new(),
                    account,
                    rng.choice(MERCHANTS[category]),
                    -rng.randint(lo, hi),
                    EXPENSE,
                    instant,
                    min(created, self.now_ms - 1000),
                    category_id=None if rng.random() < 0.06 else self.cat[category],
                    provider=provider,
                )
            )
        return out

    def finish(self) -> Household:
        """Balances consistent with the transactions (opening plus every amount) and sync times."""
        by_account = {a.id: a for a in self.acc.values()}
        for a in self.acc.values():
            a.balance = a.opening
            a.updated_ms = self.now_ms
        for tx in self.out:
            by_account[tx.account_id].balance += tx.amount
        for c in self.connections:
            c.last_synced_ms = self.now_ms - 2 * HOUR_MS
            c.next_sync_ms = c.last_synced_ms + 6 * HOUR_MS
        return Household(
            timezone=self.timezone,
            currency="EUR",
            categories=self.categories,
            cat_by_name=self.cat,
            accounts=list(self.acc.values()),
            connections=self.connections,
            expenses=self.expenses,
            transactions=self.out,
            owner_id=self.owner_id,
            truth=self.truth,
        )


def _month_days(y: int, m: int) -> int:
    """How many days month `m` of year `y` has (the sandbox keeps its own calendar: it is the
    independent oracle and imports nothing from centsync's other layers)."""
    nxt = datetime(y + (m == 12), m % 12 + 1, 1)
    return (nxt - timedelta(days=1)).day
