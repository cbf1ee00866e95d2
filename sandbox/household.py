"""A deterministic synthetic household: accounts, connections, categories, Expenses and history."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

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


# Merchants with the varied spelling and case a real bank feed delivers.
MERCHANTS: dict[str, list[str]] = {
    "Groceries": [
        "MERCADONA 0412 VALENCIA",
        "Mercadona",
        "mercadona  valencia",
        "LIDL",
        "Lidl Store 223",
        "Carrefour Express",
        "CARREFOUR EXPRESS",
        "Aldi Sud",
        "Whole Foods Market",
    ],
    "Restaurants": [
        "Starbucks",
        "STARBUCKS #1182",
        "La Tagliatella",
        "Burger King 0098",
        "burger king",
        "Sushi Shop",
        "Cafe de Flor",
        "Deliveroo",
        "DELIVEROO  *ORDER",
    ],
    "Subscriptions": [
        "Netflix.com",
        "NETFLIX.COM",
        "Spotify AB",
        "Apple.com/bill",
        "iCloud Storage",
    ],
    "Utilities": [
        "Iberdrola Electricity",
        "Aguas de Valencia",
        "Movistar Fibra",
        "Vodafone Mobile",
    ],
    "Transport": [
        "Uber *Trip",
        "UBER   TRIP",
        "Metro Valencia",
        "Repsol 2231",
        "REPSOL ESTACION",
        "Cabify",
    ],
    "Travel": [
        "Ryanair",
        "RYANAIR  FR",
        "Booking.com",
        "Airbnb * HM4Q",
        "Iberia",
        "Renfe Viajeros",
    ],
    "Shopping": ["AMZN Mktp ES", "Amazon.es", "Zara", "IKEA Valencia", "Decathlon", "MediaMarkt"],
    "Health": ["Farmacia Central", "Dental Clinic Ruzafa", "Sanitas"],
}

CATEGORY_NAMES = [
    "Salary",
    "Other income",
    "Rent",
    "Groceries",
    "Restaurants",
    "Subscriptions",
    "Utilities",
    "Transport",
    "Travel",
    "Shopping",
    "Health",
    "Transfers",
    "Cash",
]

# Typical amounts in cents (min, max) for the variable spending categories.
AMOUNTS = {
    "Groceries": (1200, 14000),
    "Restaurants": (450, 8500),
    "Subscriptions": (499, 1799),
    "Utilities": (2500, 12000),
    "Transport": (150, 6500),
    "Travel": (2900, 45000),
    "Shopping": (900, 25000),
    "Health": (500, 9000),
}

# Relative frequency of variable rows (used for fill rows at scale).
VARIABLE_WEIGHTS = {
    "Groceries": 30,
    "Restaurants": 22,
    "Transport": 16,
    "Shopping": 12,
    "Health": 4,
    "Travel": 3,
}


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
) -> Household:
    """Build the household and its history up to `now_ms`, deterministically from `seed`."""
    rng = random.Random(seed)
    ids = Ids(rng)
    zone = ZoneInfo(timezone)
    owner_id = ids.new()

    categories = {ids.new(): name for name in CATEGORY_NAMES}
    cat = {name: cid for cid, name in categories.items()}

    conn_a = Connection(ids.new(), providers[0], "Banco Norte")
    conn_b = Connection(ids.new(), providers[1], "Harbor Bank")
    acc = {
        "checking": Account(
            ids.new(),
            "Everyday Checking",
            "depository",
            "checking",
            "Banco Norte",
            conn_a.id,
            250_000,
        ),
        "savings": Account(
            ids.new(),
            "Rainy Day Savings",
            "depository",
            "savings",
            "Banco Norte",
            conn_a.id,
            800_000,
        ),
        "card": Account(
            ids.new(), "Visa Platinum", "credit", "credit_card", "Harbor Bank", conn_b.id, 0
        ),
        "broker": Account(
            ids.new(),
            "Index Fund Portfolio",
            "investment",
            "brokerage",
            "Harbor Bank",
            conn_b.id,
            1_500_000,
        ),
        "loan": Account(
            ids.new(), "car loan", "loan", "auto", "Banco Norte", conn_a.id, -1_800_000
        ),
        "cash": Account(ids.new(), "Cash Wallet", "depository", "cash", None, None, 20_000),
        "old": Account(
            ids.new(),
            "Old Joint Account",
            "depository",
            "checking",
            "Banco Norte",
            conn_a.id,
            50_000,
            hidden=True,
        ),
    }
    conn_a.account_ids = [acc[k].id for k in ("checking", "savings", "loan", "old")]
    conn_b.account_ids = [acc[k].id for k in ("card", "broker")]
    expenses = [
        Expense(ids.new(), "Summer holiday", 150_000),
        Expense(ids.new(), "New laptop", 120_000),
        Expense(ids.new(), "Christmas gifts", 50_000),
    ]

    now = datetime.fromtimestamp(now_ms / 1000, tz=UTC).astimezone(zone)
    first_month = (now.year - years) * 12 + now.month  # months are counted as year*12+month
    last_month = now.year * 12 + now.month
    out: list[Tx] = []

    def local_ms(y: int, m: int, d: int, hour: int, minute: int) -> int:
        dt = datetime(y, m, d, hour, minute, tzinfo=zone)
        return int(dt.timestamp() * 1000)

    def add(
        account: str,
        concept: str,
        amount: int,
        typ: str,
        instant: int,
        category: str | None,
        manual: bool = False,
        goal: str | None = None,
        notes: str | None = None,
    ) -> None:
        if instant > now_ms - HOUR_MS:
            return
        a = acc[account]
        provider = None
        if a.connection_id is not None and not manual:
            provider = providers[0] if a.connection_id == conn_a.id else providers[1]
        lag = (
            rng.randint(5 * 60_000, 20 * HOUR_MS) if not manual else rng.randint(60_000, 3 * DAY_MS)
        )
        created = min(instant + lag, now_ms - 1000)
        out.append(
            Tx(
                ids.new(),
                a.id,
                concept,
                amount,
                typ,
                instant,
                created,
                category_id=cat[category] if category else None,
                expense_goal_id=goal,
                notes=notes,
                manual=manual,
                provider=provider,
            )
        )

    def variable(category: str, y: int, m: int, mdays: int) -> None:
        lo, hi = AMOUNTS[category]
        amount = -rng.randint(lo, hi)
        day = rng.randint(1, mdays)
        hour = (
            rng.choice([8, 9, 11, 13, 14, 17, 19, 20, 21, 23])
            if category == "Restaurants"
            else rng.randint(8, 22)
        )
        minute = rng.randint(0, 59)
        account = "card" if rng.random() < 0.55 else "checking"
        # Some rows arrive uncategorised from the feed.
        category_id: str | None = None if rng.random() < 0.06 else category
        goal = None
        if category == "Travel" and m in (6, 7, 8) and rng.random() < 0.7:
            goal = expenses[0].id
        elif category == "Shopping" and m == 12 and rng.random() < 0.5:
            goal = expenses[2].id
        add(
            account,
            rng.choice(MERCHANTS[category]),
            amount,
            EXPENSE,
            local_ms(y, m, day, hour, minute),
            category_id,
            goal=goal,
        )
        # Refunds: a positive expense on the same account a few days later.
        if category in ("Shopping", "Travel") and rng.random() < 0.08:
            rday = min(mdays, day + rng.randint(2, 6))
            add(
                account,
                "Refund " + rng.choice(MERCHANTS[category]),
                -amount // rng.choice((1, 2)),
                EXPENSE,
                local_ms(y, m, rday, 10, 30),
                category_id,
            )

    for ym in range(first_month, last_month + 1):
        y, m = divmod(ym - 1, 12)
        m += 1
        mdays = _month_days(y, m)
        add(
            "checking",
            "ACME Corp Payroll",
            385_000 + rng.randint(0, 3) * 2500,
            INCOME,
            local_ms(y, m, min(28, mdays), 6, 0),
            "Salary",
        )
        if rng.random() < 0.35:
            add(
                "checking",
                rng.choice(["Freelance invoice", "FREELANCE INVOICE 22", "Wallapop sale"]),
                rng.randint(5000, 90000),
                INCOME,
                local_ms(y, m, rng.randint(1, mdays), 12, 0),
                "Other income",
            )
        add("checking", "Rent - Calle Colon 12", -120_000, EXPENSE, local_ms(y, m, 1, 9, 0), "Rent")
        for sub in ("Netflix.com", "Spotify AB", "iCloud Storage"):
            add(
                "card",
                sub if rng.random() < 0.8 else sub.upper(),
                -rng.choice((999, 1099, 1299)) if sub != "iCloud Storage" else -299,
                EXPENSE,
                local_ms(y, m, rng.randint(3, 7), 4, 0),
                "Subscriptions",
            )
        for util in MERCHANTS["Utilities"]:
            add(
                "checking",
                util,
                -rng.randint(*AMOUNTS["Utilities"]),
                EXPENSE,
                local_ms(y, m, rng.randint(10, 20), 7, 0),
                "Utilities",
            )
        for _ in range(rng.randint(7, 10)):
            variable("Groceries", y, m, mdays)
        for _ in range(rng.randint(4, 8)):
            variable("Restaurants", y, m, mdays)
        for _ in range(rng.randint(4, 7)):
            variable("Transport", y, m, mdays)
        for _ in range(rng.randint(1, 4)):
            variable("Shopping", y, m, mdays)
        if rng.random() < 0.4:
            variable("Health", y, m, mdays)
        if m in (4, 7, 8, 12) or rng.random() < 0.15:
            for _ in range(rng.randint(1, 3)):
                variable("Travel", y, m, mdays)
        # Card payment: both legs of the transfer.
        pay = rng.randint(60_000, 110_000)
        t = local_ms(y, m, min(25, mdays), 10, 0)
        add("checking", "Payment to Visa Platinum", -pay, TRANSFER, t, "Transfers")
        add("card", "PAYMENT RECEIVED - THANK YOU", pay, TRANSFER, t + 60_000, "Transfers")
        # Savings and investment transfers.
        t = local_ms(y, m, 2, 8, 0)
        add("checking", "Transfer to savings", -30_000, TRANSFER, t, "Transfers")
        add("savings", "Transfer from checking", 30_000, TRANSFER, t + 30_000, "Transfers")
        t = local_ms(y, m, 5, 8, 0)
        add("savings", "Monthly investment", -20_000, TRANSFER, t, None)
        add("broker", "Contribution", 20_000, TRANSFER, t + 30_000, None)
        if m in (3, 6, 9, 12):
            add(
                "broker",
                "Dividend VWCE",
                rng.randint(3000, 9000),
                INCOME,
                local_ms(y, m, 15, 9, 0),
                "Other income",
            )
        # Loan instalment: both legs.
        t = local_ms(y, m, 3, 9, 0)
        add("checking", "Car loan instalment", -35_000, TRANSFER, t, "Transfers")
        add("loan", "Instalment received", 35_000, TRANSFER, t + 60_000, "Transfers")
        # Manual cash: an ATM withdrawal (transfer legs) and cash spending, some uncategorised.
        t = local_ms(y, m, rng.randint(1, mdays), 12, 0)
        add("checking", "ATM withdrawal", -10_000, TRANSFER, t, "Cash")
        add("cash", "Cash from ATM", 10_000, TRANSFER, t + 1000, "Cash", manual=True)
        for _ in range(rng.randint(2, 4)):
            add(
                "cash",
                rng.choice(["Farmers market", "coffee", "Parking", "Tip", "Newspaper kiosk"]),
                -rng.randint(150, 3000),
                EXPENSE,
                local_ms(y, m, rng.randint(1, mdays), rng.randint(9, 20), 0),
                None if rng.random() < 0.5 else "Groceries",
                manual=True,
                notes="cash" if rng.random() < 0.3 else None,
            )
        # The hidden account still has activity: invisible everywhere.
        add(
            "old",
            "Old joint direct debit",
            -rng.randint(1000, 5000),
            EXPENSE,
            local_ms(y, m, 12, 10, 0),
            "Utilities",
        )
        # A laptop purchase assigned to an Expense, once.
        if ym == last_month - 5:
            add(
                "card",
                "Apple Store",
                -119_900,
                EXPENSE,
                local_ms(y, m, 9, 16, 0),
                "Shopping",
                goal=expenses[1].id,
            )

    if transactions is not None:
        # The knob counts visible rows: the hidden account's rows come on top.
        hidden_rows = [t for t in out if t.account_id == acc["old"].id]
        visible_rows = [t for t in out if t.account_id != acc["old"].id]
        out = (
            _rescale(
                visible_rows, transactions, rng, ids, acc, cat, first_month, now_ms, zone, providers
            )
            + hidden_rows
        )

    # Balances consistent with the transactions: opening balance plus every amount.
    by_account = {a.id: a for a in acc.values()}
    for a in acc.values():
        a.balance = a.opening
        a.updated_ms = now_ms
    for tx in out:
        by_account[tx.account_id].balance += tx.amount
    for c in (conn_a, conn_b):
        c.last_synced_ms = now_ms - 2 * HOUR_MS
        c.next_sync_ms = c.last_synced_ms + 6 * HOUR_MS
    return Household(
        timezone=timezone,
        currency="EUR",
        categories=categories,
        cat_by_name=cat,
        accounts=list(acc.values()),
        connections=[conn_a, conn_b],
        expenses=expenses,
        transactions=out,
        owner_id=owner_id,
    )


def _rescale(
    out: list[Tx],
    target: int,
    rng: random.Random,
    ids: Ids,
    acc: dict[str, Account],
    cat: dict[str, str],
    first_month: int,
    now_ms: int,
    zone: ZoneInfo,
    providers: tuple[str, str],
) -> list[Tx]:
    """Trim or pad the natural history to exactly `target` rows (the benchmark scale knob)."""
    if target <= len(out):
        keep = sorted(rng.sample(range(len(out)), target))
        return [out[i] for i in keep]
    y0, m0 = divmod(first_month - 1, 12)
    start_ms = int(datetime(y0, m0 + 1, 1, tzinfo=zone).timestamp() * 1000)
    span = now_ms - HOUR_MS - start_ms
    names = list(VARIABLE_WEIGHTS)
    weights = list(VARIABLE_WEIGHTS.values())
    card, checking = acc["card"].id, acc["checking"].id
    cards = (card, providers[1])
    checks = (checking, providers[0])
    n = target - len(out)
    chosen = rng.choices(names, weights, k=n)
    for category in chosen:
        lo, hi = AMOUNTS[category]
        instant = start_ms + int(rng.random() * span)
        account, provider = cards if rng.random() < 0.55 else checks
        created = instant + rng.randint(300_000, 20 * HOUR_MS)
        out.append(
            Tx(
                ids.new(),
                account,
                rng.choice(MERCHANTS[category]),
                -rng.randint(lo, hi),
                EXPENSE,
                instant,
                min(created, now_ms - 1000),
                category_id=None if rng.random() < 0.06 else cat[category],
                provider=provider,
            )
        )
    return out


def _month_days(y: int, m: int) -> int:
    nxt = datetime(y + (m == 12), m % 12 + 1, 1)
    return (nxt - timedelta(days=1)).day
