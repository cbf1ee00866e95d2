"""Money as people read it: integer cents shown as a signed decimal amount (shared kernel)."""

from __future__ import annotations


def cents_text(cents: int | None) -> str:
    """`-12345` -> `-123.45` ("" for None); the currency is the warehouse's."""
    if cents is None:
        return ""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(int(cents)), 100)
    return f"{sign}{whole:,}.{frac:02d}"
