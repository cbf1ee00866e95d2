"""Categorisation rules, pure: a TOML file parsed and checked, the changes it calls for, and
the write-back rows they become (keys on rule id, version and transaction)."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from centsync.transform import rules
from centsync.transform import writeback as wb

CARD, CASH = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
FOOD, FUN = "33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444"
GOAL = "55555555-5555-4555-8555-555555555555"
T1, T2, T3 = (f"{n}6666666-6666-4666-8666-666666666666" for n in "abc")
CATEGORIES = {"Food": FOOD, "Fun": FUN}

TEXT = """
[[rule]]
id = "coffee"
version = 1
concept = "(?i)starbucks"
amount_min = "-20"
amount_max = "0"
set = { category = "Food", notes = "coffee", expense = "GOAL_ID" }

[[rule]]
id = "cash"
account = "Cash Wallet"
set = { notes = "cash" }

[accounts]
"000123" = "Cash Wallet"
""".replace("GOAL_ID", GOAL)


def ledger(**over: object) -> pl.DataFrame:
    rows = [
        (T1, CARD, "Card", -450, "STARBUCKS #1", "expense", FUN, None, None),
        (T2, CASH, "Cash Wallet", -3000, "Starbucks big order", "expense", None, None, None),
        (T3, CASH, "Cash Wallet", 2500, "Sold a bike", "income", None, None, "cash"),
    ]
    cols = ("id", "account_id", "account_name", "amount", "concept", "type", "category_id")
    frame = pl.DataFrame(
        [(*r[:7], dt.date(2026, 11, 2), r[7], r[8]) for r in rows],
        schema=[*cols, "booked_at", "expense_goal_id", "notes"],
        orient="row",
    )
    return frame


def test_the_first_matching_rule_decides_and_only_differing_fields_change() -> None:
    parsed = rules.parse(TEXT)
    assert parsed.accounts == {"000123": "Cash Wallet"}
    found = rules.changes(parsed.rules, ledger(), CATEGORIES)
    got = {(c.rule, c.transaction_id, c.field, c.before, c.after) for c in found}
    assert got == {
        ("coffee@1", T1, "category", "Fun", "Food"),
        ("coffee@1", T1, "notes", None, "coffee"),
        ("coffee@1", T1, "expense", None, GOAL),
        # T2 is beyond coffee's amount range: the cash rule decides it
        ("cash@" + parsed.rules[1].version, T2, "notes", None, "cash"),
        # T3 already has the note: nothing
    }
    edits = rules.source_rows(found)
    planned = wb.plan(
        edits,
        wb.Reference.from_frames(
            pl.DataFrame(
                {"id": [CARD, CASH], "name": ["Card", "Cash Wallet"], "currency": ["EUR"] * 2}
            ),
            pl.DataFrame({"id": [FOOD, FUN], "name": ["Food", "Fun"]}),
            [GOAL],
            pl.DataFrame({"id": [T1, T2, T3], "type": ["expense", "expense", "income"]}),
        ),
        source="rules",
        source_name="rules.toml",
    )
    assert [(p.operation, p.reason, p.body) for p in planned] == [
        ("edit", None, {"notes": "cash"}),
        ("assign", None, {"expense_goal_id": GOAL}),
        ("edit", None, {"category_id": FOOD, "notes": "coffee"}),
    ]
    assert planned[2].key == wb.derive_key("rules", f"event:rule:coffee@1:{T1}", "edit")


def test_a_new_version_keys_anew_and_an_unversioned_rule_versions_itself_by_its_text() -> None:
    one, two = rules.parse(TEXT), rules.parse(TEXT.replace("version = 1", "version = 2"))
    assert one.rules[0].ref == "coffee@1" and two.rules[0].ref == "coffee@2"
    changed = rules.parse(TEXT.replace('notes = "cash"', 'notes = "cash!"'))
    assert changed.rules[1].version != one.rules[1].version  # its text changed: a new version
    assert rules.parse(TEXT).rules[1].version == one.rules[1].version  # the same text: the same


def test_current_values_mean_a_second_run_plans_nothing() -> None:
    applied = ledger().with_columns(
        category_id=pl.Series([FOOD, None, None]),
        notes=pl.Series(["coffee", "cash", "cash"]),
        expense_goal_id=pl.Series([GOAL, None, None]),
    )
    assert rules.changes(rules.parse(TEXT).rules, applied, CATEGORIES) == []


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[[rule]]\nid='a'\nconcept='('\nset={notes='n'}", "not a regular expression"),
        ("[[rule]]\nid='a'\nconcpet='x'\nset={notes='n'}", "unknown key(s) concpet"),
        ("[[rule]]\nid='a'\nconcept='x'\nset={}", "`set` must give"),
        ("[[rule]]\nid='a'\nset={notes='n'}", "match on at least one"),
        ("[[rule]]\nid='a b'\nconcept='x'\nset={notes='n'}", "id 'a b' must be"),
        ("[[rule]]\nid='a'\nconcept='x'\namount_min='1.234'\nset={notes='n'}", "3 decimals"),
        ("[[rule]]\nid='a'\nconcept='x'\nset={expense='nope'}", "not an Expense's id"),
        (
            "[[rule]]\nid='a'\nconcept='x'\nset={notes='n'}\n[[rule]]\nid='a'\nconcept='y'\nset={notes='n'}",
            "used twice",
        ),
        ("[rules]\n", "unknown table(s) rules"),
        ("[[rule]\n", "not valid TOML"),
        # what RE2 cannot run in linear time is refused when the file is read, naming the rule
        ("[[rule]]\nid='twice'\nconcept='(a)\\1'\nset={notes='n'}", "rule 'twice': concept"),
        ("[[rule]]\nid='look'\nconcept='a(?=b)'\nset={notes='n'}", "no backreferences"),
    ],
)
def test_a_rules_file_that_cannot_be_used_says_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(rules.RulesError, match=None) as e:
        rules.parse(text, name="r.toml")
    assert words in str(e.value) and str(e.value).startswith("r.toml")


def test_the_merchants_table_renames_by_merchant_key_and_is_checked() -> None:
    parsed = rules.parse('[merchants]\n"AMZN  Mktp ES" = " Amazon Marketplace "\nzara = "Zara"\n')
    # keyed as the merchant key is (trimmed, lower-cased, whitespace collapsed), names trimmed
    assert parsed.merchants == {"amzn mktp es": "Amazon Marketplace", "zara": "Zara"}
    assert parsed.rules == [] and rules.parse("").merchants == {}
    for bad in ("[merchants]\nzara = 3\n", '[merchants]\nzara = "  "\n', "merchants = 1\n"):
        with pytest.raises(rules.RulesError, match=r"\[merchants\] maps a merchant"):
            rules.parse(bad)


def test_a_pattern_that_backtracks_catastrophically_runs_in_linear_time() -> None:
    """`(a+)+$` over a long run of `a` and a `b`: Python's `re` takes exponential time (it
    never finishes at this length); RE2 answers at once."""
    import time

    text = "[[rule]]\nid='slow'\nconcept='(a+)+$'\nset={notes='n'}"
    ledger_rows = ledger().with_columns(concept=pl.lit("a" * 5000 + "b"))
    started = time.monotonic()
    found = rules.changes(rules.parse(text).rules, ledger_rows, CATEGORIES)
    assert found == [] and time.monotonic() - started < 2
    matching = ledger_rows.with_columns(concept=pl.lit("a" * 5000))
    assert len(rules.changes(rules.parse(text).rules, matching, CATEGORIES)) == 3
