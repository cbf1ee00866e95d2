"""The reconciliation rules on small frames: comparisons, row differences, explanations."""

from __future__ import annotations

import datetime as dt

import polars as pl

from centsync.transform import reconcile as rules

D = dt.date
TX = pl.DataFrame(
    {
        "id": ["a", "b", "c"],
        "account_id": ["x", "x", "y"],
        "concept": ["Shop", "shop ", "Salary"],
        "amount": [-100, -50, 900],
        "booked_at": [D(2024, 1, 3), D(2024, 2, 5), D(2024, 2, 7)],
        "type": ["expense", "expense", "income"],
        "category_id": ["c1", None, None],
    }
)


def test_period_labels_name_months_years_and_the_whole_history() -> None:
    whole = (D(2023, 5, 2), D(2026, 11, 15))
    assert rules.period_label(*whole, whole) == "all"
    assert rules.period_label(D(2024, 3, 1), D(2024, 3, 31), whole) == "2024-03"
    assert rules.period_label(D(2024, 1, 1), D(2024, 12, 31), whole) == "2024"
    assert rules.period_label(None, D(2023, 12, 31), whole) == "..2023-12-31"
    assert rules.period_label(D(2024, 1, 1), D(2024, 6, 30), whole) == "2024-01..2024-06"


def _spending(amounts: dict[str, int]) -> pl.DataFrame:
    lo, hi = D(2024, 1, 3), D(2024, 2, 7)
    requests = pl.DataFrame({"group_by": ["month"], "from_date": [lo], "to_date": [hi]})
    rows = pl.DataFrame(
        {
            "group_by": ["month"] * len(amounts),
            "from_date": [lo] * len(amounts),
            "to_date": [hi] * len(amounts),
            "key": list(amounts),
            "label": list(amounts),
            "amount": list(amounts.values()),
            "count": [1] * len(amounts),
        }
    )
    return rules.with_status(rules.spending_checks(TX.lazy(), requests, rows))


def test_a_month_only_one_side_has_is_compared_with_zero() -> None:
    res = _spending({"2024-01": -100, "2024-03": -7})
    by = {r["scope"]: r for r in res.iter_rows(named=True)}
    assert by["2024-01"]["status"] == "agree"
    assert by["2024-02"]["server_cents"] == 0 and by["2024-02"]["difference_cents"] == -50
    assert by["2024-03"]["local_cents"] == 0 and by["2024-03"]["status"] == "differ"
    assert rules.verdict(res) == "differ"


def test_row_differences_name_only_local_only_server_and_changed_fields() -> None:
    received = TX.with_columns(
        amount=pl.when(pl.col("id") == "a").then(-90).otherwise("amount")
    ).filter(pl.col("id") != "b")
    received = pl.concat([received, TX.filter(pl.col("id") == "c").with_columns(id=pl.lit("d"))])
    diff = rules.diff_rows(
        TX, received, entity="transactions", fields=rules.TX_FIELDS, source="received"
    )
    kinds = {r["id"]: (r["kind"], r["fields"]) for r in diff.iter_rows(named=True)}
    assert kinds == {
        "a": ("different", "amount"),
        "b": ("only_local", ""),
        "d": ("only_server", ""),
    }


def test_a_difference_on_tampered_rows_is_never_explained() -> None:
    res = _spending({"2024-01": -100, "2024-02": -40})
    received = TX.with_columns(amount=pl.when(pl.col("id") == "b").then(-40).otherwise("amount"))
    ev = rules.Evidence(
        tampered=rules.diff_rows(
            TX, received, entity="transactions", fields=rules.TX_FIELDS, source="received"
        ),
        read_at={"2024-02": "read by refresh r"},
        prior={("spending.month", "2024-02"): (-10, "something")},
    )
    out = rules.explain(res, ev)
    row = out.filter(pl.col("scope") == "2024-02").row(0, named=True)
    assert row["status"] == "differ" and "1 row in 2024-02" in row["explanation"]


def test_untouched_rows_of_a_read_month_explain_a_server_change() -> None:
    res = _spending({"2024-01": -100, "2024-02": -40})
    out = rules.explain(res, rules.Evidence(read_at={"2024-02": "read by refresh r at t"}))
    row = out.filter(pl.col("scope") == "2024-02").row(0, named=True)
    assert (
        row["status"] == "explained" and "changed 2024-02 after it was read" in row["explanation"]
    )
    assert rules.verdict(out) == "explained"


def test_a_month_whose_fingerprint_still_agrees_stays_unexplained() -> None:
    res = _spending({"2024-01": -100, "2024-02": -40})
    ev = rules.Evidence(read_at={"2024-02": "r"}, confirmed={"2024-02"}, changed_on_server=set())
    assert rules.explain(res, ev).filter(pl.col("scope") == "2024-02")["status"].item() == "differ"
    ev.changed_on_server.add("2024-02")
    assert (
        rules.explain(res, ev).filter(pl.col("scope") == "2024-02")["status"].item() == "explained"
    )


def test_a_month_never_read_is_not_explained() -> None:
    res = _spending({"2024-01": -100, "2024-02": -40})
    assert rules.verdict(rules.explain(res, rules.Evidence())) == "differ"


def test_rejected_rows_explain_their_month() -> None:
    res = _spending({"2024-01": -100, "2024-02": -40})
    out = rules.explain(res, rules.Evidence(rejected={"2024-02": 1}))
    assert (
        "rejected by validation" in out.filter(pl.col("scope") == "2024-02")["explanation"].item()
    )


def test_accounts_hidden_since_the_snapshot_are_named() -> None:
    accounts = pl.DataFrame(
        {
            "id": ["x", "y"],
            "name": ["Current", "Card"],
            "type": ["depository", "credit"],
            "balance": [500, -20],
        }
    )
    res = rules.with_status(
        rules.account_checks(
            accounts,
            {"assets": 500, "liabilities": 0, "net_worth": 500, "count": 1},
            pl.DataFrame({"type": ["depository"], "balance": [500]}),
            None,
        )
    )
    out = rules.explain(res, rules.Evidence(accounts_gone={"y": "Card"}))
    assert rules.verdict(out) == "explained"
    assert "Card" in out.filter(pl.col("check") == "accounts.net_worth")["explanation"].item()
    assert rules.verdict(rules.explain(res, rules.Evidence())) == "differ"


def test_narrowest_first_puts_unexplained_months_before_wider_scopes() -> None:
    res = _spending({"2024-01": -90, "2024-02": -40})
    out = rules.explain(res, rules.Evidence(read_at={"2024-01": "r"}, confirmed={"2024-02"}))
    order = rules.narrowest_first(out)
    assert order["status"].to_list()[0] == "differ"


def test_spending_checks_sum_every_spelling_of_a_merchant_and_every_day_of_a_month() -> None:
    tx = pl.DataFrame(
        {
            "account_id": ["x"] * 5,
            "concept": ["Amazon  EU", " amazon eu", "AMAZON EU", "Shop", "Rent"],
            "amount": [-100, -50, -25, -7, -1000],
            "booked_at": [
                D(2024, 1, 3),
                D(2024, 1, 31),
                D(2024, 2, 1),
                D(2024, 2, 9),
                D(2024, 2, 1),
            ],
            "type": ["expense", "expense", "expense", "expense", "income"],
            "category_id": ["c1", None, "c1", None, None],
        }
    )
    lo, hi = D(2024, 1, 1), D(2024, 2, 29)
    requests = pl.DataFrame(
        {"group_by": ["merchant", "month", "category"], "from_date": [lo] * 3, "to_date": [hi] * 3}
    )
    server = [
        ("merchant", "amazon eu", -175, 3),
        ("merchant", "shop", -7, 1),
        ("month", "2024-01", -150, 2),
        ("month", "2024-02", -32, 2),
        ("category", "c1", -125, 2),
        (None, None, -57, 2),  # uncategorised
    ]
    rows = pl.DataFrame(
        {
            "group_by": [g or "category" for g, *_ in server],
            "from_date": [lo] * len(server),
            "to_date": [hi] * len(server),
            "key": [k for _, k, _, _ in server],
            "label": [k for _, k, _, _ in server],
            "amount": [a for _, _, a, _ in server],
            "count": [n for *_, n in server],
        }
    )
    out = rules.spending_checks(tx.lazy(), requests, rows)
    assert out.height == len(server)
    assert out["local_cents"].to_list() == out["server_cents"].to_list()
    assert out["local_count"].to_list() == out["server_count"].to_list()
