"""The learned contract's book (pipelines/contract_book.py): pins, states, changes, costs.

Pure over JSON bodies; the refresh's use of it against every sandbox dialect is in
tests/pipelines/test_dialects_e2e.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from centsync.extract import ConfigurationError
from centsync.pipelines.contract_book import WITHOUT, ContractBook, load_pins
from centsync.transform import shapes

SUMMARY = shapes.TRANSACTIONS_SUMMARY
FACTS = {"count": 3, "income": 900, "expense": -450, "transfer": -100, "net": 350}
CONTRACT_BODY = {"count": 3, "income": 900, "expense": -450, "transfer": -100, "net": 350}
OTHER_BODY = {"data": {"n": 3, "in": 900, "out": -450, "moved": -100, "bal": 350}}


def test_the_contract_file_pins_a_mapping_and_names_every_mistake(tmp_path: Path) -> None:
    path = tmp_path / "contract.toml"
    path.write_text('[surfaces."GET /v1/settings"]\ntimezone = "prefs.tz"\n')
    assert load_pins(path) == {"GET /v1/settings": {"timezone": "prefs.tz"}}
    assert load_pins(tmp_path / "missing.toml") == {}
    assert load_pins(None) == {}
    path.write_text('[surfaces."GET /v1/nope"]\nx = "y"\n')
    with pytest.raises(ConfigurationError, match="not a surface centsync reads"):
        load_pins(path)
    path.write_text('[surfaces."GET /v1/settings"]\ntimezone = 3\n')
    with pytest.raises(ConfigurationError, match="JSON paths as strings"):
        load_pins(path)
    path.write_text("[surfaces\n")
    with pytest.raises(ConfigurationError, match="not TOML"):
        load_pins(path)


def test_a_pinned_mapping_is_read_as_pinned_and_refused_when_it_no_longer_fits() -> None:
    book = ContractBook({}, {shapes.SETTINGS: {"timezone": "prefs.tz"}}, number=1)
    body = {"prefs": {"tz": "Europe/Madrid", "other_tz": "Asia/Tokyo"}}
    # the data alone cannot decide (two zones): the pin does
    learned = shapes.learn_settings(body, None)
    assert isinstance(learned, shapes.Refused)
    mapping = book.settle(shapes.SETTINGS, learned, body, "{}")
    assert mapping == {"timezone": "prefs.tz"}
    assert book.state(shapes.SETTINGS) == "pinned"
    gone = book.settle(shapes.SETTINGS, learned, {"tz": "Europe/Madrid"}, '{"tz": "x"}')
    assert gone is None and book.state(shapes.SETTINGS) == "unavailable"
    assert "pinned mapping does not fit" in book.unavailable()[shapes.SETTINGS]


def test_documented_then_learned_then_re_learned_with_notes_only_on_a_change() -> None:
    book = ContractBook({}, number=1)
    first = book.settle(SUMMARY, shapes.learn_totals([(CONTRACT_BODY, FACTS)]), CONTRACT_BODY, "")
    assert first == shapes.DOCUMENTED[SUMMARY] and book.state(SUMMARY) == "documented"
    assert book.notes == [] and book.complete(SUMMARY)
    # the next refresh: the same shape, read through the hook and re-checked
    again = ContractBook({SUMMARY: book.records()[0]}, number=2)
    assert again.reading(SUMMARY, CONTRACT_BODY, None)["count"] == 3
    assert again.notes == []
    # the service changes its shape: noticed by the hook, named, re-learned from the data
    assert again.reading(SUMMARY, OTHER_BODY, None) is None
    assert any("changed its shape" in n for n in again.notes)
    mapping = again.settle(SUMMARY, shapes.learn_totals([(OTHER_BODY, FACTS)]), OTHER_BODY, "")
    assert mapping is not None and mapping["count"] == "data.n"
    assert again.state(SUMMARY) == "learned"
    assert any("re-learned" in n for n in again.notes)
    row = {r["surface"]: r for r in again.records()}[SUMMARY]
    assert row["learned_refresh"] == 2 and row["checked_refresh"] == 2
    assert "data" in repr(row["shape"]) and "900" not in repr(row["shape"])


def test_an_answer_that_cannot_be_read_is_unavailable_with_what_doing_without_costs() -> None:
    book = ContractBook({}, number=1)
    body = {"totals": "n/a"}
    got = book.settle(SUMMARY, shapes.learn_totals([(body, FACTS)]), body, '{"totals": "n/a"}')
    assert got is None
    reason = book.unavailable()[SUMMARY]
    assert WITHOUT[SUMMARY] in reason and "limit=1" in reason
    assert book.unread == [(SUMMARY, '{"totals": "n/a"}', reason)]
    assert not book.trusted(SUMMARY)
    assert book.reading(SUMMARY, CONTRACT_BODY, None) is None  # never read with a guess


def test_figures_an_answer_cannot_decide_keep_what_was_learned() -> None:
    book = ContractBook({}, number=1)
    book.settle(SUMMARY, shapes.learn_totals([(CONTRACT_BODY, FACTS)]), CONTRACT_BODY, "")
    # income equals net this time: one answer cannot tell them apart, the book still can
    facts = {"count": 1, "income": 500, "expense": 0, "transfer": 0, "net": 500}
    body = {"count": 1, "income": 500, "expense": 0, "transfer": 0, "net": 500}
    mapping = book.settle(SUMMARY, shapes.learn_totals([(body, facts)]), body, "")
    assert mapping == shapes.DOCUMENTED[SUMMARY]
    assert book.notes == []


def test_the_contract_s_own_names_are_read_as_documented_when_the_rows_differ() -> None:
    """A first sync whose rows the service damaged (one rejected) cannot confirm the totals'
    figures; the contract's own names and types are its shape: read, and the difference is
    reconciliation's to explain. Another shape is not read until the data confirms it."""
    book = ContractBook({}, number=1)
    short = {**FACTS, "count": 2, "expense": -350, "net": 450}  # one expense row rejected
    got = shapes.learn_totals([(CONTRACT_BODY, short)])
    assert book.settle(SUMMARY, got, CONTRACT_BODY, "") == shapes.DOCUMENTED[SUMMARY]
    row = {r["surface"]: r for r in book.records()}[SUMMARY]
    assert row["state"] == "documented" and "not confirmed by the data" in row["evidence"]
    other = ContractBook({}, number=1)
    got = shapes.learn_totals([(OTHER_BODY, short)])
    assert other.settle(SUMMARY, got, OTHER_BODY, "") is None
    assert other.state(SUMMARY) == "unavailable"
    # a settings answer is never taken on its names: a time zone is an IANA name or nothing
    body = {"timezone": "Madrid time", "currency": "EUR"}
    settings = ContractBook({}, number=1)
    got_tz = shapes.learn_settings(body, "EUR")
    assert settings.settle(shapes.SETTINGS, got_tz, body, "") is None
