"""The one halving search (transform/bisection.py), on a plain model of a service and a copy.

The model is the reconciliation's question in miniature: each leaf (a month) holds amounts by
subject on the service and in the local copy; the service answers "the amounts of these
subjects over these leaves", one request each; the other half is the whole less the asked one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from centsync.transform.bisection import Found, collect, halves, locate

Amounts = dict[str, int]


@dataclass
class Model:
    """A service and a local copy of `leaves` leaves (amounts by subject per leaf)."""

    leaves: int
    service: dict[int, Amounts] = field(default_factory=dict)
    local: dict[int, Amounts] = field(default_factory=dict)
    asked: list[list[int]] = field(default_factory=list)  # the leaves of every request
    subjects: list[list[str]] = field(default_factory=list)  # and the subjects it asked about

    def total(self, side: dict[int, Amounts], leaves: list[int]) -> Amounts:
        out: Amounts = {}
        for leaf in leaves:
            for subject, amount in side.get(leaf, {}).items():
                out[subject] = out.get(subject, 0) + amount
        return out

    def whole(self) -> Amounts:
        """The service's amounts over every leaf, every subject either side holds."""
        there = self.total(self.service, list(range(self.leaves)))
        here = self.total(self.local, list(range(self.leaves)))
        return {s: there.get(s, 0) for s in there.keys() | here.keys()}

    def differs(self, leaves: list[int], there: Amounts) -> Amounts:
        here = self.total(self.local, leaves)
        return {s: v for s, v in there.items() if here.get(s, 0) != v}

    def ask(self, leaves: list[int], differ: Amounts) -> Amounts:
        self.asked.append(leaves)
        self.subjects.append(sorted(differ))
        there = self.total(self.service, leaves)
        return {s: there.get(s, 0) for s in differ}

    @staticmethod
    def rest(whole: Amounts, part: Amounts) -> Amounts:
        return {s: whole[s] - v for s, v in part.items()}

    def search(self, **options: object) -> tuple[list[Found[int, Amounts, Amounts]], int]:
        return collect(
            locate(
                range(self.leaves),
                self.whole(),
                differs=self.differs,
                ask=self.ask,
                rest=self.rest,
                **options,  # type: ignore[arg-type]
            )
        )


def same(leaves: int, **differing: dict[int, tuple[int, int]]) -> Model:
    """A model where every leaf holds `food: 10` on both sides, but for `differing[subject]`:
    {leaf: (local, service)}."""
    model = Model(leaves)
    for leaf in range(leaves):
        model.service[leaf] = {"food": 10}
        model.local[leaf] = {"food": 10}
    for subject, cells in differing.items():
        for leaf, (here, there) in cells.items():
            model.local[leaf][subject] = here
            model.service[leaf][subject] = there
    return model


def test_halves_keep_the_leaves_in_order_the_newer_half_taking_the_odd_one() -> None:
    assert halves([1, 2, 3, 4, 5]) == ([1, 2], [3, 4, 5])
    assert halves(["a", "b"]) == (["a"], ["b"])


def test_a_single_differing_leaf_is_found_with_one_request_a_halving() -> None:
    model = same(12, rent={5: (100, 120)})
    found, spent = model.search()
    assert [(f.leaves, f.differ) for f in found] == [([5], {"rent": 120})]
    # 12 -> 6 -> 3 -> 1|2 -> 1: four halvings, each asking only the older half (the newer
    # half's answer is the whole's less it)
    assert model.asked == [[0, 1, 2, 3, 4, 5], [0, 1, 2], [3], [4]]
    assert spent == len(model.asked) == 4


def test_several_differing_leaves_are_found_oldest_first_and_only_they() -> None:
    model = same(8, food={1: (10, 11), 6: (10, 12)}, rent={7: (0, 50)})
    found, spent = model.search()
    assert [(f.leaves, f.differ) for f in found] == [
        ([1], {"food": 11}),
        ([6], {"food": 12}),
        ([7], {"rent": 50}),
    ]
    assert spent == len(model.asked)


def test_nothing_differs_nothing_is_found_and_nothing_asked() -> None:
    model = same(12)
    assert model.search() == ([], 0)
    assert model.asked == []


def test_a_subject_that_agrees_is_no_longer_asked_about_once_its_half_agrees() -> None:
    model = same(4, food={0: (10, 11)}, rent={3: (0, 5)})
    found, _ = model.search()
    assert [f.leaves for f in found] == [[0], [3]]
    # the first request asks about both subjects; each half then only about its own
    assert model.asked == [[0, 1], [0], [2]]
    assert model.subjects == [["food", "rent"], ["food"], ["rent"]]


def test_a_search_out_of_requests_gives_up_its_run_rather_than_guess() -> None:
    model = same(8, rent={2: (0, 5)})
    # one request: the halving of the whole; the older half then needs one more
    assert model.search(budget=1) == ([], 1)
    assert model.asked == [[0, 1, 2, 3]]
    model.asked.clear()
    assert model.search(budget=0) == ([], 0)
    assert model.asked == []
    found, spent = model.search(budget=3)
    assert [f.leaves for f in found] == [[2]] and spent == 3


def test_a_budget_left_by_one_search_bounds_the_next() -> None:
    model = same(4, rent={0: (0, 5), 3: (0, 7)})
    budget = 2
    found, spent = model.search(budget=budget)
    assert [f.leaves for f in found] == [[0]]  # the newer half would need a third request
    budget -= spent
    assert (spent, budget) == (2, 0)
    assert model.search(budget=budget) == ([], 0)


def test_the_cost_rule_settles_a_run_whole_instead_of_halving_it() -> None:
    model = same(12, rent={5: (100, 120)})
    found, spent = model.search(settle=lambda leaves, there, differ: len(leaves) <= 3)
    assert [f.leaves for f in found] == [[3, 4, 5]]
    assert model.asked == [[0, 1, 2, 3, 4, 5], [0, 1, 2]] and spent == 2


def test_the_cost_of_a_request_counts_against_the_budget() -> None:
    # a request a differing subject (as the refresh's fingerprint components)
    model = same(4, food={0: (10, 11)}, rent={0: (0, 5)})
    assert model.search(cost=len, budget=3) == ([], 2)  # 2 for the first halving, 2 more needed
    found, spent = model.search(cost=len, budget=4)
    assert [(f.leaves, f.differ) for f in found] == [([0], {"food": 11, "rent": 5})]
    assert spent == 4


def test_a_leaf_is_yielded_before_the_search_looks_at_the_next_half() -> None:
    """A row moved on the service from leaf 6 to leaf 1 (its amount changed too): re-reading
    leaf 1 takes it out of leaf 6 locally (as the ledger's month replace does), so leaf 6 no
    longer differs and costs nothing."""
    model = same(8)
    model.local[6]["rent"], model.service[1]["rent"] = 5, 7
    found_all, _ = model.search()
    assert [f.leaves for f in found_all] == [[1], [6]]  # left as it is, leaf 6 differs too
    model.asked.clear()
    search = locate(range(8), model.whole(), differs=model.differs, ask=model.ask, rest=model.rest)
    found = next(search)
    assert found.leaves == [1]
    model.local[1] = dict(model.service[1])  # the re-read of leaf 1 ...
    del model.local[6]["rent"]  # ... moves the row out of leaf 6
    with pytest.raises(StopIteration) as done:
        next(search)
    assert done.value.value == len(model.asked) == 3  # 8 -> 4 -> 2 -> 1: nothing asked after
