"""Locating what differs by halving: the one search of the refresh and the reconciliation.

A run of leaves (months) differs from the service, which answers questions about any part of
it. `locate` halves: it asks about the older half, derives the newer half's answer as the whole's
less the older's (counts and sums add up over ranges, so that half costs no request) and goes on
into each half that still differs, until a half is one leaf or the caller's cost rule settles it
whole. Each caller brings its own question: the refresh asks for fingerprints
(pipelines/refresh/steps.py), the reconciliation for spending by subject (pipelines/reconcile.py).

Pure: every request and every read of the warehouse happens in the caller's functions, called in
the order the search needs them. The leaves found are yielded as they are found, so a caller
that acts on one (the refresh re-reads it) does so before the search looks at the next half.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

L = TypeVar("L")  # a leaf: a month
A = TypeVar("A")  # the service's answer over some leaves
D = TypeVar("D")  # what differs over some leaves (empty when nothing does)


@dataclass(frozen=True)
class Found(Generic[L, A, D]):
    """Leaves that differ, settled: one leaf, or a run the cost rule took whole."""

    leaves: list[L]
    answer: A  # the service's answer over them
    differ: D  # what differs over them


# What `locate` yields as it finds leaves; it returns the requests it spent.
Search = Generator[Found[L, A, D], None, int]


def halves(leaves: Sequence[L]) -> tuple[list[L], list[L]]:
    """A run of leaves split in two (the older half first; the newer has the odd one)."""
    mid = len(leaves) // 2
    return list(leaves[:mid]), list(leaves[mid:])


def locate(
    leaves: Sequence[L],
    answer: A,
    *,
    differs: Callable[[list[L], A], D],
    ask: Callable[[list[L], D], A],
    rest: Callable[[A, A], A],
    settle: Callable[[list[L], A, D], bool] | None = None,
    cost: Callable[[D], int] | None = None,
    budget: int | None = None,
) -> Search[L, A, D]:
    """The leaves among `leaves` that differ, given the service's `answer` over all of them.

    - `differs(leaves, answer)`: what differs over `leaves` (falsy when nothing does);
    - `ask(older, differ)`: the service's answer over the older half, for what differs;
    - `rest(whole, part)`: the answer over the other half, from the whole's and the part's;
    - `settle(leaves, answer, differ)`: the cost rule, whether to take these leaves whole rather
      than halve them (a single leaf is always taken);
    - `cost(differ)`: requests one `ask` costs (1 when not given);
    - `budget`: requests the search may spend (no limit when None). A run that would overspend
      is given up: nothing in it is yielded (its own comparison stays the narrowest).

    A generator: it yields each `Found` as it is found, oldest first, and returns the requests
    spent (`collect` gathers both).
    """
    return _search(list(leaves), answer, differs, ask, rest, settle, cost or _one, budget, spent=0)


def collect(search: Search[L, A, D]) -> tuple[list[Found[L, A, D]], int]:
    """Every leaf a search finds, and the requests it spent."""
    found: list[Found[L, A, D]] = []
    while True:
        try:
            found.append(next(search))
        except StopIteration as done:
            return found, done.value


def _one(differ: object) -> int:
    return 1


def _search(
    leaves: list[L],
    answer: A,
    differs: Callable[[list[L], A], D],
    ask: Callable[[list[L], D], A],
    rest: Callable[[A, A], A],
    settle: Callable[[list[L], A, D], bool] | None,
    cost: Callable[[D], int],
    budget: int | None,
    spent: int,
) -> Search[L, A, D]:
    differ = differs(leaves, answer)
    if not differ:
        return spent
    if len(leaves) == 1 or (settle is not None and settle(leaves, answer, differ)):
        yield Found(leaves, answer, differ)
        return spent
    price = cost(differ)
    if budget is not None and spent + price > budget:
        return spent  # out of requests: this run stays as narrow as it is
    older, newer = halves(leaves)
    part = ask(older, differ)
    args = (differs, ask, rest, settle, cost, budget)
    spent = yield from _search(older, part, *args, spent=spent + price)
    return (yield from _search(newer, rest(answer, part), *args, spent=spent))
