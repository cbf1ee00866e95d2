"""The synthetic household's fixed tables: merchants, categories, amounts, accounts and Expenses."""

from __future__ import annotations

from typing import NamedTuple

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


class AccountSpec(NamedTuple):
    """One account the household opens: `connection` is 0 or 1 (which provider), None if manual."""

    key: str
    name: str
    type: str
    subtype: str | None
    institution: str | None
    connection: int | None
    opening: int  # balance before the first generated transaction, cents
    hidden: bool = False


# In creation order: each account draws its id from the seeded RNG, so the order is part of the
# household's identity.
ACCOUNTS: tuple[AccountSpec, ...] = (
    AccountSpec(
        "checking", "Everyday Checking", "depository", "checking", "Banco Norte", 0, 250_000
    ),
    AccountSpec("savings", "Rainy Day Savings", "depository", "savings", "Banco Norte", 0, 800_000),
    AccountSpec("card", "Visa Platinum", "credit", "credit_card", "Harbor Bank", 1, 0),
    AccountSpec(
        "broker", "Index Fund Portfolio", "investment", "brokerage", "Harbor Bank", 1, 1_500_000
    ),
    AccountSpec("loan", "car loan", "loan", "auto", "Banco Norte", 0, -1_800_000),
    AccountSpec("cash", "Cash Wallet", "depository", "cash", None, None, 20_000),
    AccountSpec(
        "old", "Old Joint Account", "depository", "checking", "Banco Norte", 0, 50_000, hidden=True
    ),
)

# The two bank connections' institutions, in the providers' order.
INSTITUTIONS = ("Banco Norte", "Harbor Bank")

# The Expenses (savings goals): name and budget in cents, in creation order.
EXPENSES: tuple[tuple[str, int], ...] = (
    ("Summer holiday", 150_000),
    ("New laptop", 120_000),
    ("Christmas gifts", 50_000),
)

# Monthly subscriptions on the card; iCloud has a fixed price, the others one of three.
SUBSCRIPTIONS = ("Netflix.com", "Spotify AB", "iCloud Storage")

# How many variable rows each category gets in a month (inclusive bounds), in drawing order.
MONTHLY_VARIABLE = (
    ("Groceries", 7, 10),
    ("Restaurants", 4, 8),
    ("Transport", 4, 7),
    ("Shopping", 1, 4),
)

CASH_CONCEPTS = ["Farmers market", "coffee", "Parking", "Tip", "Newspaper kiosk"]
OTHER_INCOME_CONCEPTS = ["Freelance invoice", "FREELANCE INVOICE 22", "Wallapop sale"]
RESTAURANT_HOURS = [8, 9, 11, 13, 14, 17, 19, 20, 21, 23]
