"""The write-back's rules, pure: reading inbox files, checking rows, deriving keys."""

from __future__ import annotations

import csv
import io

import polars as pl
import pytest

from centsync.pipelines.writeback.inbox_csv import errors_csv, read_csv
from centsync.transform import writeback as wb

CASH = "11111111-1111-4111-8111-111111111111"
YEN = "22222222-2222-4222-8222-222222222222"
GROCERIES = "33333333-3333-4333-8333-333333333333"
GOAL = "44444444-4444-4444-8444-444444444444"
SPENT = "55555555-5555-4555-8555-555555555555"  # an expense in the ledger
EARNED = "66666666-6666-4666-8666-666666666666"  # an income in the ledger
UNKNOWN = "77777777-7777-4777-8777-777777777777"

REF = wb.Reference.from_frames(
    accounts=pl.DataFrame(
        {"id": [CASH, YEN], "name": ["Cash Wallet", "Tokyo Cash"], "currency": ["EUR", "JPY"]}
    ),
    categories=pl.DataFrame({"id": [GROCERIES], "name": ["Groceries"]}),
    expense_ids=[GOAL],
    transactions=pl.DataFrame({"id": [SPENT, EARNED], "type": ["expense", "income"]}),
)
HEADER = list(wb.COLUMNS)


def row(**cells: str) -> dict[str, str]:
    base = {"account": "Cash Wallet", "booked_at": "2026-11-10", "amount": "-2.50"}
    base["concept"] = "Coffee"
    base.update(cells)
    return base


# (cells, the reason's words): each must be rejected with that reason
BAD: list[tuple[dict[str, str], str]] = [
    (row(concept="x" * 201), "201 characters; at most 200"),
    (row(concept=""), "concept: empty"),
    (row(concept="   "), "concept: empty"),
    (row(concept="two\nlines"), "line break"),
    (row(concept="nul\x00byte"), "control character"),
    (row(notes="n" * 2001), "at most 2000"),
    (row(amount="-1.234"), "3 decimals but EUR has 2"),
    (row(amount="-0.001"), "3 decimals"),
    (row(amount="-1234.5678"), "4 decimals"),
    (row(amount="-1.5e2"), "not a decimal amount"),
    (row(amount="1e3"), "not a decimal amount"),
    (row(amount="-12,34"), "decimal comma is accepted only in semicolon"),
    (row(amount="1,234.56"), "not a decimal amount"),
    (row(amount="€12.00"), "not a decimal amount"),
    (row(amount=""), "amount: empty"),
    (row(amount="NaN"), "not a decimal amount"),
    (row(amount="inf"), "not a decimal amount"),
    (row(amount="10000000000.01"), "beyond the service's limit"),
    (row(amount="--5"), "not a decimal amount"),
    (row(amount="12."), "not a decimal amount"),
    (row(amount=".5"), "not a decimal amount"),
    (row(amount="0x10"), "not a decimal amount"),
    (row(amount="1 000"), "not a decimal amount"),
    (row(account="Tokyo Cash", amount="-100.5"), "JPY has 0"),
    (row(booked_at="2026-02-30"), "not a real calendar date"),
    (row(booked_at="2025-02-29"), "not a real calendar date"),
    (row(booked_at="2026-13-01"), "not a real calendar date"),
    (row(booked_at="30/11/2026"), "not a date written YYYY-MM-DD"),
    (row(booked_at="2026-1-5"), "not a date written YYYY-MM-DD"),
    (row(booked_at=""), "booked_at: empty"),
    (row(account="Nope"), "no account 'Nope'"),
    (row(account=UNKNOWN), "no account"),
    (row(account="cash wallet"), "no account"),
    (row(account=""), "account: empty"),
    (row(category="Groceriez"), "no category 'Groceriez'"),
    (row(category=UNKNOWN), "no category"),
    (row(amount="-１２.５０"), "write the digits 0-9"),
    (row(amount="-٣.00"), "arabic-indic digit three"),
    (row(booked_at="２０２６-11-10"), "write the digits 0-9"),
    (row(expense_goal_id="４4444444-4444-4444-8444-444444444444"), "expense_goal_id: "),
    (row(type="income", amount="-5.00"), "income is positive"),
    (row(type="refund"), "use expense, income or transfer"),
    (row(amount="0"), "an amount of 0 needs an explicit type"),
    (row(expense_goal_id="not-a-uuid"), "not a uuid"),
    (row(expense_goal_id=UNKNOWN), "never seen in the ledger"),
    (row(expense_goal_id=GOAL, amount="5.00"), "only an expense"),
    (row(operation="delete"), "use create, edit or assign"),
    (row(transaction_id=SPENT), "leave it empty"),
    (row(event_id="e" * 201), "event_id"),
    ({"operation": "edit", "transaction_id": UNKNOWN, "concept": "x"}, "no transaction"),
    ({"operation": "edit", "transaction_id": SPENT}, "at least one of"),
    ({"operation": "edit", "transaction_id": "nope", "concept": "x"}, "not a uuid"),
    (
        {"operation": "assign", "transaction_id": EARNED, "expense_goal_id": GOAL},
        "this transaction is income",
    ),
    (
        {
            "operation": "assign",
            "transaction_id": SPENT,
            "expense_goal_id": GOAL,
            "amount": "-1.00",
        },
        "an assign sets only",
    ),
]

# Look like attacks or spreadsheet formulas, but are legitimate concepts: sent verbatim.
TRICKY = [
    "=SUM(A1:A9)",
    "+cmd|' /C calc'!A0",
    '@HYPERLINK("http://x")',
    "-2+3",
    "'; DROP TABLE transactions; --",
    "<script>alert(1)</script>",
    "☕ café 😀",
    "😀" * 200,  # 200 code points (800 bytes): exactly the limit
]


def to_csv(rows: list[dict[str, str]], delimiter: str = ",") -> bytes:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=HEADER, delimiter=delimiter, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k, "") for k in HEADER})
    return buf.getvalue().encode()


def test_the_corpus_of_bad_rows_is_rejected_row_by_row_and_the_good_rows_go_on() -> None:
    assert len(BAD) >= 40
    good = [row(event_id="first", concept="Bread", category="Groceries")]
    tricky = [row(concept=c) for c in TRICKY]
    last = [row(concept="Milk", amount="-1.09", notes="two\nlines of notes are fine")]
    data = to_csv(good + [cells for cells, _ in BAD] + tricky + last)
    read = read_csv(data)
    assert read.problem is None
    planned = wb.plan(read.rows, REF, source="inbox", source_name="corpus.csv")
    assert len(planned) == 1 + len(BAD) + len(TRICKY) + 1
    for p, (cells, words) in zip(planned[1 : 1 + len(BAD)], BAD, strict=True):
        assert p.reason is not None, f"accepted: {cells}"
        assert words in p.reason, (cells, p.reason)
        assert p.body == {} and p.body_json == ""  # nothing would be sent for it
    ok = [planned[0], *planned[1 + len(BAD) :]]
    assert all(p.reason is None for p in ok), [p.reason for p in ok]
    assert planned[0].body == {
        "account_id": CASH,
        "amount": -250,
        "booked_at": "2026-11-10",
        "category_id": GROCERIES,
        "concept": "Bread",
    }
    assert [p.body["concept"] for p in ok[1:-1]] == TRICKY  # verbatim, never "sanitised"
    assert ok[-1].body["notes"] == "two\nlines of notes are fine"
    errors = list(csv.reader(io.StringIO(errors_csv(planned))))
    assert errors[0] == ["line", "reason", "row"]
    assert len(errors) == 1 + len(BAD)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"account,booked_at,amount,concept\nCash Wallet,2026-11-10,-1.00,Caf\xe9\n", "not UTF-8"),
        (b"Cash Wallet,2026-11-10,-1.00,Coffee\n", "unknown column"),
        (b"account,booked_at,amount,concept,colour\n", "unknown column(s) 'colour'"),
        (b"account,booked_at,concept\n", "missing column(s) amount"),
        (b"account,account,booked_at,amount,concept\n", "repeated column(s) account"),
        (b"", "empty file"),
    ],
)
def test_a_file_that_cannot_be_read_is_rejected_whole_with_its_reason(
    data: bytes, words: str
) -> None:
    read = read_csv(data)
    assert read.problem is not None and words in read.problem
    assert read.rows == []


def test_a_row_with_more_or_fewer_fields_than_the_header_is_rejected() -> None:
    data = b"account,booked_at,amount,concept\nCash Wallet,2026-11-10,-1.00,Coffee,extra\nCash Wallet,2026-11-10\nCash Wallet,2026-11-10,-1.00,Tea\n"
    planned = wb.plan(read_csv(data).rows, REF, source="inbox", source_name="f.csv")
    assert [p.reason is None for p in planned] == [False, False, True]
    assert "5 fields where the header has 4" in str(planned[0].reason)
    assert planned[2].line == 4


def test_bom_semicolons_quotes_and_decimal_commas_mean_the_same_cents() -> None:
    plain = b'account,booked_at,amount,concept\nCash Wallet,2026-11-10,-1234.50,"Rent, November"\n'
    excel = '\ufeffaccount;booked_at;amount;concept\r\nCash Wallet;2026-11-10;-1234,50;"Rent, November"\r\n'.encode()
    a = wb.plan(read_csv(plain).rows, REF, source="inbox", source_name="a.csv")
    rf = read_csv(excel)
    b = wb.plan(rf.rows, REF, source="inbox", source_name="b.csv", decimal_comma=rf.decimal_comma)
    assert a[0].body == b[0].body and a[0].body["amount"] == -123450
    assert a[0].body["concept"] == "Rent, November"


@pytest.mark.parametrize(
    ("text", "currency", "cents"),
    [
        ("-12.34", "EUR", -1234),
        ("12", "EUR", 1200),
        ("0.1", "EUR", 10),
        ("+7.05", "EUR", 705),
        ("-100", "JPY", -100),
        ("1.234", "KWD", 1234),
        ("-0.01", "EUR", -1),
        ("10000000000.00", "EUR", 10**12),
        ("0.30", "EUR", 30),
    ],
)
def test_amounts_become_integer_cents_exactly(text: str, currency: str, cents: int) -> None:
    assert wb.parse_amount(text, currency) == cents


def test_keys_come_from_the_event_never_from_chance() -> None:
    rows = [row(), row(), row(event_id="r-1"), row(concept="Tea")]
    data = to_csv(rows)
    first = wb.plan(read_csv(data).rows, REF, source="inbox", source_name="monday.csv")
    again = wb.plan(read_csv(data).rows, REF, source="inbox", source_name="renamed.csv")
    keys = [p.key for p in first]
    assert keys == [p.key for p in again]  # the same file, or a renamed copy: the same keys
    assert len(set(keys)) == 4  # two identical coffees stay two requests
    assert first[0].event_ref.endswith("#1") and first[1].event_ref.endswith("#2")
    assert first[2].event_ref == "event:r-1"
    assert first[2].key == wb.derive_key("inbox", "event:r-1", "create")
    # an event id keeps its key whatever else changes in the row (a corrected amount is then a
    # different body under the same key: the outbox flags it instead of sending it)
    fixed = wb.plan(
        read_csv(to_csv([row(event_id="r-1", amount="-3.00")])).rows,
        REF,
        source="inbox",
        source_name="x.csv",
    )
    assert fixed[0].key == first[2].key and fixed[0].body_sha256 != first[2].body_sha256
    # another source, or another operation on the same event, is another key
    assert wb.derive_key("requests", "event:r-1", "create") != first[2].key
    assert wb.derive_key("inbox", "event:r-1", "edit") != first[2].key


def test_edits_and_assigns_become_their_requests() -> None:
    data = to_csv(
        [
            {
                "operation": "edit",
                "transaction_id": SPENT,
                "concept": "Lunch",
                "category": "Groceries",
            },
            {"operation": "assign", "transaction_id": SPENT, "expense_goal_id": GOAL},
            {"operation": "assign", "transaction_id": SPENT},
        ]
    )
    edit, assign, clear = wb.plan(read_csv(data).rows, REF, source="inbox", source_name="e.csv")
    assert (edit.method, edit.path) == ("PATCH", f"/v1/transactions/{SPENT}")
    assert edit.body == {"concept": "Lunch", "category_id": GROCERIES}
    assert (assign.method, assign.path) == ("POST", f"/v1/transactions/{SPENT}/expense")
    assert assign.body == {"expense_goal_id": GOAL}
    assert clear.body == {"expense_goal_id": None}


def test_a_refund_is_a_positive_expense_and_is_posted_as_such() -> None:
    rows = read_csv(to_csv([row(type="expense", amount="7.25", concept="Refund: shoes")])).rows
    (p,) = wb.plan(rows, REF, source="inbox", source_name="refund.csv")
    assert p.reason is None
    assert (p.body["type"], p.body["amount"]) == ("expense", 725)


def test_non_ascii_digits_are_refused_in_every_structured_field_and_kept_in_text() -> None:
    cases = {
        "amount": row(amount="-１.00"),
        "booked_at": row(booked_at="2026-１1-10"),
        "transaction_id": {"operation": "edit", "transaction_id": "５" + SPENT[1:], "concept": "x"},
        "type": row(type="expense１"),
    }
    for name, cells in cases.items():
        (p,) = wb.plan(read_csv(to_csv([cells])).rows, REF, source="inbox", source_name="d.csv")
        assert p.reason is not None and p.reason.startswith(f"{name}: "), (name, p.reason)
        assert "write the digits 0-9" in p.reason
    # text fields keep what was written, fullwidth digits included
    text = row(concept="Café nº１２", notes="table ５")
    (p,) = wb.plan(read_csv(to_csv([text])).rows, REF, source="inbox", source_name="t.csv")
    assert p.reason is None and p.body["concept"] == "Café nº１２"


def test_a_date_after_the_services_today_is_refused_unless_allowed() -> None:
    import dataclasses
    import datetime as dt

    today = dt.date(2026, 11, 10)
    rows = read_csv(to_csv([row(booked_at="2026-11-10"), row(booked_at="2026-11-11")])).rows
    strict = dataclasses.replace(REF, today=today)
    on_the_day, ahead = wb.plan(rows, strict, source="inbox", source_name="f.csv")
    assert on_the_day.reason is None
    assert ahead.reason is not None and "after the service's today (2026-11-10)" in ahead.reason
    assert "--allow-future" in ahead.reason
    allowed = dataclasses.replace(strict, allow_future=True)
    assert [p.reason for p in wb.plan(rows, allowed, source="inbox", source_name="f.csv")] == [
        None,
        None,
    ]
