"""Narrowing a differing category or merchant to its months (issue 26), on plain frames."""

from __future__ import annotations

import datetime as dt

import polars as pl

from centsync.transform import reconcile as rules

D = dt.date


def _tx(rows: list[tuple[str, int, str | None, str, str]]) -> pl.LazyFrame:
    """Transactions: (booked_at, amount, category_id, concept, type)."""
    return pl.DataFrame(
        {
            "booked_at": [D.fromisoformat(r[0]) for r in rows],
            "amount": [r[1] for r in rows],
            "category_id": [r[2] for r in rows],
            "concept": [r[3] for r in rows],
            "type": [r[4] for r in rows],
        }
    ).lazy()


def test_local_spending_of_a_range_is_grouped_as_the_service_groups_it() -> None:
    tx = _tx(
        [
            ("2025-01-03", -500, "food", "Market  ", "expense"),
            ("2025-01-20", -250, "food", "MARKET", "expense"),
            ("2025-02-02", 900, "pay", "Salary", "income"),  # not spending
            ("2025-03-02", -100, None, "Kiosk", "expense"),
        ]
    )
    by_category = rules.subject_spending(tx, "category", D(2025, 1, 1), D(2025, 3, 31))
    assert by_category == {"food": (-750, 2), None: (-100, 1)}
    assert rules.subject_spending(tx, "category", D(2025, 2, 1), D(2025, 3, 31)) == {
        None: (-100, 1)
    }
    by_merchant = rules.subject_spending(tx, "merchant", D(2025, 1, 1), D(2025, 1, 31))
    assert list(by_merchant.values()) == [(-750, 2)]  # one merchant key, case and spaces aside


def _result(check: str, scope: str, subject: str, lo: D, hi: D, local: int, server: int) -> dict:
    return {
        "check": check,
        "scope": scope,
        "subject": subject,
        "label": subject.title(),
        "from_date": lo,
        "to_date": hi,
        "local_cents": local,
        "server_cents": server,
        "local_count": 1,
        "server_count": 1,
    }


def test_the_widest_differing_range_of_each_category_or_merchant_is_narrowed() -> None:
    frame = pl.DataFrame(
        [
            _result(
                "spending.category", "all/Food", "food", D(2023, 1, 1), D(2026, 11, 30), -5, -9
            ),
            _result(
                "spending.category", "2025/Food", "food", D(2025, 1, 1), D(2025, 12, 31), -5, -9
            ),
            _result(
                "spending.category", "2025-03/Rent", "rent", D(2025, 3, 1), D(2025, 3, 31), 1, 2
            ),
            _result(
                "spending.merchant", "all/shop", "shop", D(2023, 1, 1), D(2026, 11, 30), -1, -1
            ),
            _result("spending.month", "2025-03", "2025-03", D(2025, 3, 1), D(2025, 3, 31), -1, -2),
        ],
        schema_overrides={"from_date": pl.Date, "to_date": pl.Date},
    )
    results = rules.with_status(frame)
    wide = rules.to_narrow(results)
    # food over the whole history (not its year as well); rent is one month already; the
    # merchant agrees; a month's spending is already a month
    assert wide.select("check", "scope").rows() == [("spending.category", "all/Food")]


def test_narrowed_months_are_comparison_rows_scoped_by_month_and_label() -> None:
    rows = rules.month_rows(
        [
            ("spending.category", D(2025, 3, 1), "food", "Food", (-500, 3), (-400, 2)),
            ("spending.category", D(2025, 3, 1), None, "Uncategorized", (0, 0), (-100, 1)),
        ]
    )
    assert rows.columns == list(rules.RESULT_SCHEMA)
    assert rows.select("scope", "from_date", "to_date", "difference_cents", "status").rows() == [
        ("2025-03/Food", D(2025, 3, 1), D(2025, 3, 31), -100, "differ"),
        ("2025-03/Uncategorized", D(2025, 3, 1), D(2025, 3, 31), 100, "differ"),
    ]
    narrowest = rules.narrowest_first(
        pl.concat(
            [
                rules.with_status(
                    pl.DataFrame(
                        [
                            _result(
                                "spending.category",
                                "all/Food",
                                "food",
                                D(2023, 1, 1),
                                D(2026, 11, 30),
                                -5,
                                -9,
                            )
                        ],
                        schema_overrides={"from_date": pl.Date, "to_date": pl.Date},
                    )
                ),
                rows,
            ]
        )
    )
    assert narrowest["scope"][0].startswith("2025-03/")  # the month before the whole range
