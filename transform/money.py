"""Money as people read it: integer cents shown as a signed decimal amount (shared kernel)."""

from __future__ import annotations


def cents_text(cents: int | None) -> str:
    """`-12345` -> `-123.45` ("" for None); the currency is the warehouse's."""
    if cents is None:
        return ""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(int(cents)), 100)
    return f"{sign}{whole:,}.{frac:02d}"


# The warehouse's money columns: every `*_cents` column, and core's own `amount` and `balance`
# (and `cents`, the demo's alias), all integer cents.
MONEY_NAMES = ("amount", "balance", "cents")


def is_money_column(name: str, integer: bool) -> bool:
    """Whether a result column holds money in cents (an integer column by the warehouse's names)."""
    return integer and (name.endswith("_cents") or name in MONEY_NAMES)


def money_text(cents: int | None, currency: str | None) -> str:
    """`-12345, "EUR"` -> `-123.45 EUR` ("" for None): money as a person reads it."""
    if cents is None:
        return ""
    return f"{cents_text(cents)} {currency or ''}".rstrip()


def money_heading(name: str) -> str:
    """A money column's heading once its cents are shown as money: `income_cents` -> `income`
    (`cents` alone -> `amount`)."""
    if name == "cents":
        return "amount"
    return name.removesuffix("_cents") or name
