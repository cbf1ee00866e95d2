"""Strict validation of query parameters and JSON bodies, per contract section 2."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from centsync.sandbox.errors import invalid

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_INT = re.compile(r"^[0-9]{1,9}$")
MAX_AMOUNT = 10**12
# Dates the service accepts: wide enough for any ledger, far from datetime's limits in any timezone.
MIN_YEAR, MAX_YEAR = 1900, 2999


def is_uuid(value: object) -> bool:
    return isinstance(value, str) and _UUID.match(value) is not None


def uuid_value(value: object, name: str) -> str:
    if not is_uuid(value):
        raise invalid(f"`{name}` must be a uuid.", name, "not a uuid")
    return str(value).lower()


def date_value(value: object, name: str) -> date:
    if not isinstance(value, str) or not _DATE.match(value):
        raise invalid(f"`{name}` must be a date written YYYY-MM-DD.", name, "not a YYYY-MM-DD date")
    try:
        d = date.fromisoformat(value)
    except ValueError:
        raise invalid(
            f"`{name}` is not a real calendar date: {value}.", name, "impossible date"
        ) from None
    if not MIN_YEAR <= d.year <= MAX_YEAR:
        raise invalid(
            f"`{name}` must be between {MIN_YEAR}-01-01 and {MAX_YEAR}-12-31.", name, "out of range"
        )
    return d


def int_param(value: str, name: str, lo: int, hi: int | None = None) -> int:
    if not _INT.match(value):
        raise invalid(f"`{name}` must be a whole number.", name, "not an integer")
    n = int(value)
    if n < lo or (hi is not None and n > hi):
        bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise invalid(f"`{name}` must be {bound}.", name, "out of range")
    return n


def enum_value(value: object, name: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise invalid(f"`{name}` must be one of {', '.join(allowed)}.", name, "unknown value")
    return value


def text_value(value: object, name: str, lo: int, hi: int) -> str:
    if not isinstance(value, str):
        raise invalid(f"`{name}` must be a string.", name, "not a string")
    if not lo <= len(value) <= hi:
        raise invalid(f"`{name}` must be {lo} to {hi} characters long.", name, "length")
    return value


def amount_value(value: object, name: str = "amount") -> int:
    # bool is an int subclass in Python; JSON true is not an amount.
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"`{name}` must be an integer number of cents.", name, "not an integer")
    if abs(value) > MAX_AMOUNT:
        raise invalid(f"`{name}` must be within +/- 10^12 cents.", name, "out of range")
    return value


def object_body(body: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise invalid(
            f"Unknown field(s): {', '.join(unknown)}.",
            unknown[0],
            "unknown field",
        )
    return body
