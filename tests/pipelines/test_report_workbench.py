"""The report's workbench data without a browser: causes and commands, readable row
differences, which months the drill-down embeds, and text that can never end a <script>."""

from __future__ import annotations

import ast
import datetime as dt
import json
from pathlib import Path

import polars as pl

from centsync.pipelines.outputs import report, report_data

EXPLAIN = Path(__file__).resolve().parents[2] / "transform" / "explain.py"


def _sentences() -> list[str]:
    """The start of every sentence transform/explain.py can give a difference."""
    found = []
    for node in ast.walk(ast.parse(EXPLAIN.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Explanation":
            first = node.args[0]
            while isinstance(first, ast.BinOp):  # "a " + ", ".join(...)
                first = first.left
            if isinstance(first, ast.JoinedStr):  # its words, "{}" for each value
                found.append(
                    "".join(
                        str(v.value) if isinstance(v, ast.Constant) else "{}" for v in first.values
                    )
                )
                continue
            assert isinstance(first, ast.Constant), ast.dump(node)
            found.append(str(first.value))
    return found


def test_every_sentence_explain_writes_has_a_cause_class_and_a_command() -> None:
    sentences = _sentences()
    assert len(sentences) >= 10
    for text in sentences:
        label, action = report_data.cause({"explanation": text})
        assert label != report_data.UNKNOWN_CAUSE[0], f"no cause class for {text!r}"
        assert "centsync " in action and "{months}" not in action


def test_the_command_names_the_months_to_re_read() -> None:
    june = {"from_date": dt.date(2025, 6, 1), "to_date": dt.date(2025, 6, 30)}
    year = {"from_date": dt.date(2024, 1, 1), "to_date": dt.date(2024, 12, 31)}
    edited = "the local copy differs from what the service sent: 1 row in 2025-06"
    assert report_data.cause({**june, "explanation": edited}) == (
        "local copy changed",
        "centsync refresh --months 2025-06",
    )
    # a whole year with edited rows in two of its months: just those months are re-read
    assert report_data.cause({**year, "explanation": edited}, ["2024-03", "2024-05", "2025-06"])[
        1
    ] == ("centsync refresh --months 2024-03..2024-05")
    changed = "the service changed 2025-06 after it was read (2026-11-20): ..."
    assert report_data.cause({**june, "explanation": changed}) == (
        "service changed after the read",
        "centsync refresh (refresh again)",
    )
    assert report_data.cause({**year, "explanation": None})[1] == (
        "centsync reconcile --live, then centsync refresh --months 2024-01..2024-12"
    )
    # an undated scope (accounts): no --months at all
    assert report_data.cause({"explanation": "local accounts differ from ..."})[1] == (
        "centsync refresh"
    )


def test_a_scope_drills_into_its_month_category_or_merchant() -> None:
    target = report_data.drill_target
    assert target({"check": "spending.month", "scope": "2025-06"}) == {"month": "2025-06"}
    assert target({"check": "spending.category", "scope": "2025-03/Transport"}) == {
        "month": "2025-03",
        "category": "Transport",
    }
    assert target({"check": "spending.merchant", "scope": "all/café a/b"}) == {
        "merchant": "café a/b"
    }
    assert target({"check": "accounts.assets", "scope": "all"}) == {}


def test_the_rows_behind_a_difference_read_as_fields_in_currency_units() -> None:
    cat = "e4b06ce6-0741-47a8-bce4-2c8218072e8c"
    local = {"id": "x", "concept": "<b>Café</b>", "amount": -2076, "booked_at": "2025-05-03"}
    rows = pl.DataFrame(
        {
            "kind": ["different", "only_server"],
            "entity": ["transactions", "transactions"],
            "id": ["x", "y"],
            "month": ["2025-05", "2025-03"],
            "fields": ["amount,category_id", None],
            "local": [json.dumps({**local, "category_id": None}), None],
            "server": [
                json.dumps({**local, "amount": -1299, "category_id": cat}),
                json.dumps({"id": "y", "amount": 5, "booked_at": "2025-03-08", "concept": "C"}),
            ],
        }
    )
    got = report_data.readable_row_differences(rows, {cat: "Groceries"})
    fields = {f["field"]: f for f in got[0]["fields"]}
    assert list(fields)[:2] == ["amount", "category_id"]  # the differing fields first
    assert (fields["amount"]["local"], fields["amount"]["server"]) == ("-20.76", "-12.99")
    assert fields["category_id"]["server"] == "Groceries" and fields["amount"]["differs"]
    assert fields["concept"]["local"] == "<b>Café</b>" and not fields["concept"]["differs"]
    assert got[1]["kind"] == "only on the service"
    only = {f["field"]: f for f in got[1]["fields"]}
    assert only["amount"] == {
        "field": "amount",
        "local": "(none)",
        "server": "0.05",
        "differs": True,
    }


def test_whole_months_within_the_budget_the_differing_first_then_the_newest() -> None:
    counts = pl.DataFrame(
        {"month": ["2025-04", "2025-03", "2025-02", "2025-01"], "rows": [10, 10, 10, 10]}
    )
    assert report_data.months_to_embed(counts, set(), budget=40) == [
        "2025-01",
        "2025-02",
        "2025-03",
        "2025-04",
    ]
    assert report_data.months_to_embed(counts, {"2025-01"}, budget=25) == ["2025-01", "2025-04"]
    assert report_data.months_to_embed(counts, {"2025-01"}, budget=9) == []  # never half a month


def test_text_inside_a_script_element_cannot_end_it() -> None:
    hostile = {"concept": "</script><script>alert(1)</script><!-- </SCRIPT >"}
    text = report._script_text(json.dumps(hostile))
    assert "</script" not in text.lower() and "<!--" not in text
    assert json.loads(text) == hostile  # and it still reads as the same JSON
