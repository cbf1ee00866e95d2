"""What the household's rows are, for tests only: recurring series, transfer pairs, and noise.

The builder records, as it draws, which rows belong to which recurring series (salary, rent,
each subscription and utility, the quarterly dividend) and which two rows are the legs of one
transfer. `add_noise` (the generator's `noise` option, off by default: the pinned household is
untouched) then makes the analysts' marts work for their answers, drawing from its own RNG:
price rises, skipped months, days moved, an ended subscription, one-off purchases at recurring
merchants, lone transfer legs of the same amounts in unrelated accounts, and now and then a
card payment whose checking leg the feed typed as an expense (then not a pair: its legs are
in `card_as_expense`).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from centsync.sandbox.ledger import EXPENSE, TRANSFER, Tx

if TYPE_CHECKING:  # the builder, without a cycle at run time
    from centsync.sandbox.household import HouseholdBuilder

DAY_MS = 86_400_000
UNRELATED_CONCEPTS = ("Furniture Store", "El Corte Ingles", "Dental Clinic Ruzafa", "Booking.com")
SUBSCRIPTION_LIKE = ("Netflix.com", "Spotify AB", "iCloud Storage", "Iberdrola Electricity")


@dataclass
class Truth:
    """Which rows are what: series label by transaction id; transfer pairs as (out, in)."""

    series: dict[str, str] = field(default_factory=dict)
    pairs: list[tuple[str, str]] = field(default_factory=list)
    card_as_expense: list[tuple[str, str]] = field(default_factory=list)

    def kept(self, ids: set[str]) -> Truth:
        """The truth about the rows that are still there (trimmed, dropped, hidden)."""
        return Truth(
            {t: s for t, s in self.series.items() if t in ids},
            [(o, i) for o, i in self.pairs if o in ids and i in ids],
            [(o, i) for o, i in self.card_as_expense if o in ids and i in ids],
        )


def _month(b: HouseholdBuilder, ms: int) -> tuple[int, int]:
    d = datetime.fromtimestamp(ms / 1000, tz=b.zone)
    return d.year, d.month


def _new(rng: random.Random, like: Tx, **changes: Any) -> Tx:
    fields: dict[str, Any] = {
        "account_id": like.account_id,
        "concept": like.concept,
        "amount": like.amount,
        "type": like.type,
        "instant_ms": like.instant_ms,
        "category_id": like.category_id,
        "provider": like.provider,
    } | changes
    new_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    return Tx(new_id, created_ms=fields["instant_ms"] + 3_600_000, **fields)


def _by_series(b: HouseholdBuilder) -> dict[str, list[Tx]]:
    rows: dict[str, list[Tx]] = {}
    for t in b.out:
        label = b.truth.series.get(t.id)
        if label is not None:
            rows.setdefault(label, []).append(t)
    return rows


def _move_and_raise(b: HouseholdBuilder, rng: random.Random, series: dict[str, list[Tx]]) -> None:
    """Days moved (within the month), price rises (subscriptions and rent)."""
    for label, rows in series.items():
        for t in rows:
            if rng.random() < 0.3:
                moved = t.instant_ms + rng.choice((-2, -1, 1, 2, 3)) * DAY_MS
                if _month(b, moved) == _month(b, t.instant_ms) and moved < b.now_ms - DAY_MS:
                    t.instant_ms = moved
                    t.created_ms = max(t.created_ms, moved + 60_000)
        if (label in SUBSCRIPTION_LIKE[:3] or label == "rent") and rng.random() < 0.7:
            cut = rng.randint(len(rows) // 3, max(len(rows) // 3, len(rows) - 2))
            step = rng.choice((100, 200, 300)) if label != "rent" else 3_600
            for t in rows[cut:]:
                t.amount -= step


def _drop(b: HouseholdBuilder, rng: random.Random, series: dict[str, list[Tx]]) -> set[str]:
    """Skipped occurrences, and one subscription that ends months before today."""
    gone: set[str] = set()
    for label, rows in series.items():
        for t in rows[2:-2]:
            if rng.random() < 0.04:
                gone.add(t.id)
        if label == "Spotify AB" and len(rows) > 12:
            gone.update(t.id for t in rows[-rng.randint(6, 10) :])
    return gone


def _one_offs(b: HouseholdBuilder, rng: random.Random, series: dict[str, list[Tx]]) -> list[Tx]:
    """Purchases at recurring merchants that are not the series (other amount, other day)."""
    extra: list[Tx] = []
    for label in SUBSCRIPTION_LIKE:
        for t in series.get(label, []):
            if rng.random() < 0.1:
                when = t.instant_ms + rng.randint(9, 20) * DAY_MS
                if _month(b, when) == _month(b, t.instant_ms) and when < b.now_ms - DAY_MS:
                    amount = -rng.randint(99, 4_999) if label != "Iberdrola Electricity" else -900
                    extra.append(_new(rng, t, amount=amount, instant_ms=when))
    return extra


def _lone_legs(b: HouseholdBuilder, rng: random.Random) -> list[Tx]:
    """Transfer legs and expenses of the household's transfer amounts, in unrelated accounts,
    a few days from the real pairs: each other side is not visible."""
    extra: list[Tx] = []
    acc = b.acc
    for out_id, _in_id in list(b.truth.pairs):
        out = next((t for t in b.out if t.id == out_id), None)
        if out is None or rng.random() > 0.15:
            continue
        when = out.instant_ms + rng.choice((-3, -2, 2, 3)) * DAY_MS
        if when >= b.now_ms - DAY_MS:
            continue
        if rng.random() < 0.5:
            extra.append(
                _new(
                    rng,
                    out,
                    account_id=acc["broker"].id,
                    concept="Transfer from joint account",
                    amount=-out.amount,
                    type=TRANSFER,
                    instant_ms=when,
                )
            )
        else:
            concept = rng.choice(UNRELATED_CONCEPTS)
            extra.append(_new(rng, out, account_id=acc["card"].id, concept=concept, type=EXPENSE))
            extra[-1].instant_ms = when
    return extra


def _card_as_expense(b: HouseholdBuilder, rng: random.Random) -> None:
    """Now and then the feed types the checking leg of a card payment as an expense."""
    by_id = {t.id: t for t in b.out}
    card = b.acc["card"].id
    payments = [
        (o, i)
        for o, i in b.truth.pairs
        if o in by_id and i in by_id and by_id[i].account_id == card
    ]
    chosen = [p for p in payments if rng.random() < 0.08]
    if payments and not chosen:  # at least one: the tests look for it
        chosen = [rng.choice(payments)]
    for pair in chosen:
        by_id[pair[0]].type = EXPENSE
        b.truth.pairs.remove(pair)
        b.truth.card_as_expense.append(pair)


def add_noise(b: HouseholdBuilder, rng: random.Random) -> list[Tx]:
    """The builder's rows with the noise added (the truth updated in place)."""
    series = _by_series(b)
    _move_and_raise(b, rng, series)
    gone = _drop(b, rng, series)
    # one-offs while the series still runs (after a subscription ended, a purchase there is
    # a new story)
    running = {k: [t for t in rows if t.id not in gone] for k, rows in series.items()}
    extra = _one_offs(b, rng, running) + _lone_legs(b, rng)
    _card_as_expense(b, rng)
    return [t for t in b.out if t.id not in gone] + extra


def ledger_columns(hh: Any) -> dict[str, list[Any]]:
    """The visible ledger as columns (what core.transactions holds): id, account_id, concept,
    amount, booked_at (a date in the household's zone), type, category_id, expense_goal_id."""
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(hh.timezone)
    hidden = {a.id for a in hh.accounts if a.hidden}
    rows = [t for t in hh.transactions if t.account_id not in hidden]
    return {
        "id": [t.id for t in rows],
        "account_id": [t.account_id for t in rows],
        "concept": [t.concept for t in rows],
        "amount": [t.amount for t in rows],
        "booked_at": [datetime.fromtimestamp(t.instant_ms / 1000, tz=zone).date() for t in rows],
        "type": [t.type for t in rows],
        "category_id": [t.category_id for t in rows],
        "expense_goal_id": [t.expense_goal_id for t in rows],
    }


@dataclass(frozen=True)
class Score:
    """Precision and recall of what was found against the truth."""

    found: int
    true: int
    right: int

    @property
    def precision(self) -> float:
        return self.right / self.found if self.found else 1.0

    @property
    def recall(self) -> float:
        return self.right / self.true if self.true else 1.0


def series_score(truth: Truth, members: list[tuple[str, str]]) -> Score:
    """Series membership, scored on pairs of rows: two rows found in one series are right
    when the truth has them in one series too (so a series split in two, or two merged, costs
    precision or recall), plus each found member must be a member in the truth."""
    found: dict[str, list[str]] = {}
    for tx_id, series_id in members:
        found.setdefault(series_id, []).append(tx_id)
    right = 0
    for ids in found.values():
        labels: dict[str, int] = {}
        for tx_id in ids:
            label = truth.series.get(tx_id)
            if label is not None:
                labels[label] = labels.get(label, 0) + 1
        right += max(labels.values(), default=0)  # the members that agree with the series' majority
    return Score(found=len(members), true=len(truth.series), right=right)


def pair_score(truth: Truth, pairs: list[tuple[str, str]]) -> Score:
    """Transfer pairs: a found pair is right when the truth has exactly that pair."""
    true = set(truth.pairs)
    return Score(found=len(pairs), true=len(true), right=len(true & set(pairs)))
