"""Likely duplicates of a bank statement's rows: a row of the same account, the amount exactly
and a day within a window, in the bank feed, another statement or a held pending row
(`pipelines/writeback/bank_files.py` holds each, naming its candidate)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

DUPLICATE_WINDOW_DAYS = 3  # a feed row may settle a day or two off the statement's day


@dataclass(frozen=True)
class Candidate:
    """A row a new statement row may duplicate: a bank-feed row of the ledger, a row of another
    statement (posted, or waiting in the inbox) or a pending row held in inbox/held/."""

    kind: str  # "bank feed" | "statement" | "pending"
    id: str  # the ledger's transaction id, or the statement row's event id
    account_id: str
    booked_at: dt.date
    amount: int  # cents
    concept: str
    where: str = ""  # the held file a pending row is in


class LikelyDuplicates:
    """Candidates by (account, exact amount); each claimed at most once, the nearest day first,
    within DUPLICATE_WINDOW_DAYS either side."""

    def __init__(self, candidates: Iterable[Candidate], window: int = DUPLICATE_WINDOW_DAYS):
        self.window = window
        self._by: dict[tuple[str, int], list[Candidate]] = {}
        for c in candidates:
            self._by.setdefault((c.account_id, c.amount), []).append(c)

    def claim(
        self, account_id: str, day: dt.date, amount: int | None, kinds: Iterable[str]
    ) -> Candidate | None:
        """The nearest unclaimed candidate of these kinds (then taken), or None."""
        wanted = set(kinds)
        pool = self._by.get((account_id, amount), []) if amount is not None else []
        near = [
            c for c in pool if c.kind in wanted and abs((c.booked_at - day).days) <= self.window
        ]
        if not near:
            return None
        best = min(near, key=lambda c: (abs((c.booked_at - day).days), c.booked_at, c.id))
        pool.remove(best)
        return best
