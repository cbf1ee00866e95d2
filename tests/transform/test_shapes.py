"""The learner of "not shown" answers (transform/shapes.py, shapes_rows.py), on many shapes.

Each answer is learned from what centsync already knows from the documented surface (the
list's total, the rows' sums, the accounts' balances and currency, IANA zone names), whatever
the names, wrappers and nesting; ambiguity is refused, not guessed.
"""

from __future__ import annotations

from typing import Any

import pytest

from centsync.transform import shapes as s
from centsync.transform import shapes_rows as r

TOTALS = {"count": 7, "income": 250_000, "expense": -81_234, "transfer": -5_000, "net": 163_766}

SUMMARY_SHAPES: list[tuple[str, Any]] = [
    ("contract", {"count": 7, "income": 250_000, "expense": -81_234, "transfer": -5_000, "net": 163_766}),
    ("wrapped", {"data": {"n": 7, "in": 250_000, "out": -81_234, "moved": -5_000, "balance": 163_766}}),
    ("magnitudes", {"totals": {"rows": 7, "earned": 250_000, "spent": 81_234, "transferred": 5_000}}),
    (
        "list by type",
        {
            "summary": {
                "transactions": 7,
                "by_type": [
                    {"type": "income", "sum": 250_000},
                    {"type": "expense", "sum": -81_234},
                    {"type": "transfer", "sum": -5_000},
                ],
            }
        },
    ),
    (
        "object by type, extra fields",
        {"n": 7, "sums": {"income": 250_000, "expense": -81_234, "transfer": -5_000}, "v": 3, "cur": "EUR"},
    ),
]  # fmt: skip


@pytest.mark.parametrize(("name", "body"), SUMMARY_SHAPES, ids=[n for n, _ in SUMMARY_SHAPES])
def test_a_totals_answer_is_learned_whatever_its_names(name: str, body: Any) -> None:
    got = s.learn_totals([(body, TOTALS)])
    assert isinstance(got, s.Learned), got
    read = r.canonical(s.TRANSACTIONS_SUMMARY, body, got.mapping)
    for role in ("count", "income", "expense", "transfer"):
        assert read[role] == TOTALS[role], (name, role)
    assert "equals the list's total" in got.evidence


def test_the_contract_s_own_shape_learns_the_documented_mapping() -> None:
    got = s.learn_totals([(SUMMARY_SHAPES[0][1], TOTALS)])
    assert isinstance(got, s.Learned)
    assert got.mapping == s.DOCUMENTED[s.TRANSACTIONS_SUMMARY]


def test_a_coincidence_is_left_undecided_then_settled_by_a_second_observation() -> None:
    # net equals minus expense here: one answer cannot tell which field is which
    facts = {"count": 2, "income": 100, "expense": -50, "transfer": 0, "net": 50}
    body = {"n": 2, "i": 100, "e": -50, "t": 0, "b": 50, "x": 50}
    got = s.learn_totals([(body, facts)])
    assert isinstance(got, s.Learned)  # the count is certain: the rest is left undecided
    assert got.undecided == ("expense", "net")
    assert not set(s.FULL[s.TRANSACTIONS_SUMMARY]) <= set(got.mapping)  # cannot prove ranges
    other = {"count": 3, "income": 100, "expense": -70, "transfer": 0, "net": 30}
    again = s.learn_totals(
        [(body, facts), ({"n": 3, "i": 100, "e": -70, "t": 0, "b": 30, "x": 9}, other)]
    )
    assert isinstance(again, s.Learned), again
    assert again.mapping["expense"] == "e" and again.mapping["net"] == "b"


def test_an_answer_that_does_not_agree_with_the_rows_is_refused() -> None:
    got = s.learn_totals([({"count": 6, "income": 1, "expense": 2, "transfer": 3}, TOTALS)])
    assert isinstance(got, s.Refused)
    assert "list's total" in got.reason
    assert isinstance(s.learn_totals([([1, 2], TOTALS)]), s.Refused)


BALANCES = [("depository", 120_000), ("depository", 30_000), ("credit", -45_000), ("loan", -5_000)]


@pytest.mark.parametrize(
    "body",
    [
        {"currency": "EUR", "assets": 150_000, "liabilities": 50_000, "total": 100_000, "as_of": "2025-06-01T10:00:00.000Z"},
        {"data": {"ccy": "EUR", "owned": 150_000, "owed": -50_000, "net": 100_000, "at": "2025-06-01T10:00:00+00:00"}},
        {"net_worth": {"value": 100_000, "parts": [{"side": "assets", "cents": 150_000}, {"side": "liabilities", "cents": 50_000}]}, "updated": "2025-06-01 10:00:00"},
    ],
)  # fmt: skip
def test_net_worth_is_learned_from_the_account_balances(body: Any) -> None:
    got = s.learn_balances(s.NET_WORTH, body, BALANCES, "EUR")
    assert isinstance(got, s.Learned), got
    read = r.canonical(s.NET_WORTH, body, got.mapping)
    assert read["total"] == 100_000
    assert read["assets"] == 150_000
    assert abs(read["liabilities"]) == 50_000
    assert read["as_of"] is not None and read["as_of"].startswith("2025-06-01")


@pytest.mark.parametrize(
    "body",
    [
        {"currency": "EUR", "assets": 150_000, "liabilities": 50_000, "net_worth": 100_000, "count": 4, "by_type": {"depository": 150_000, "credit": -45_000, "loan": -5_000}},
        {"result": {"accounts": 4, "net": 100_000, "types": [{"kind": "depository", "balance": 150_000}, {"kind": "credit", "balance": -45_000}, {"kind": "loan", "balance": -5_000}]}},
    ],
)  # fmt: skip
def test_account_totals_are_learned_with_their_per_type_sums(body: Any) -> None:
    got = s.learn_balances(s.ACCOUNTS_SUMMARY, body, BALANCES, "EUR")
    assert isinstance(got, s.Learned), got
    read = r.canonical(s.ACCOUNTS_SUMMARY, body, got.mapping)
    assert read["net_worth"] == 100_000
    assert read["count"] == 4
    assert read["by_type"] == {"depository": 150_000, "credit": -45_000, "loan": -5_000}


def test_net_worth_without_liabilities_leaves_the_ambiguous_roles_undecided() -> None:
    # assets equal the total when nothing is owed: which field is which cannot be told
    body = {"a": 150_000, "l": 0, "t": 150_000, "as_of": "2025-06-01T10:00:00Z"}
    got = s.learn_balances(s.NET_WORTH, body, [("depository", 150_000)], "EUR")
    assert isinstance(got, s.Refused)
    assert "total is ambiguous" in got.reason


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"timezone": "Europe/Madrid", "currency": "EUR", "locale": "es-ES"}, "timezone"),
        ({"data": {"tz": "America/New_York", "money": "EUR"}}, "data.tz"),
        ({"prefs": {"zone": "Asia/Tokyo", "region": "JP"}, "ccy": "EUR"}, "prefs.zone"),
        ({"settings": [{"name": "tz", "value": "Europe/London"}, {"name": "cur", "value": "EUR"}]}, "settings[name=tz].value"),
    ],
)  # fmt: skip
def test_the_time_zone_is_the_value_that_is_an_iana_name(body: Any, path: str) -> None:
    got = s.learn_settings(body, "EUR")
    assert isinstance(got, s.Learned), got
    assert got.mapping["timezone"] == path
    assert r.canonical(s.SETTINGS, body, got.mapping)["currency"] == "EUR"


def test_settings_refuse_two_zones_and_no_zone() -> None:
    two = s.learn_settings({"tz": "Europe/Madrid", "display_tz": "UTC"}, None)
    assert isinstance(two, s.Refused) and "pin" in two.reason
    none = s.learn_settings({"tz": "Madrid time"}, None)
    assert isinstance(none, s.Refused) and "IANA" in none.reason


def test_the_currency_is_left_undecided_when_no_account_tells_it() -> None:
    got = s.learn_settings({"tz": "Europe/Madrid", "cur": "EUR"}, None)
    assert isinstance(got, s.Learned)
    assert got.undecided == ("currency",)
    assert "currency" not in got.mapping


CATEGORY = {"c1": (-30_000, 3), "c2": (-1_500, 1), None: (-700, 2)}


@pytest.mark.parametrize(
    "body",
    [
        {"total": -32_200, "data": [{"key": "c1", "label": "Food", "amount": -30_000, "count": 3}, {"key": "c2", "label": "Bus", "amount": -1_500, "count": 1}, {"key": None, "label": "Uncategorized", "amount": -700, "count": 2}]},
        [{"category": "c1", "spent": 30_000}, {"category": "c2", "spent": 1_500}, {"category": "", "spent": 700}],
        {"result": {"groups": [{"id": "c2", "sum": -1_500, "n": 1, "name": "Bus"}, {"id": "c1", "sum": -30_000, "n": 3, "name": "Food"}, {"id": None, "sum": -700, "n": 2, "name": "-"}], "grand_total": 32_200}},
    ],
)  # fmt: skip
def test_spending_rows_are_learned_from_the_local_sums(body: Any) -> None:
    got = r.learn_spending(body, CATEGORY)
    assert isinstance(got, s.Learned), got
    read = r.canonical(s.SPENDING, body, got.mapping, group_by="category")
    assert {x["key"]: x["amount"] for x in read["data"]} == {k: v[0] for k, v in CATEGORY.items()}
    assert read["total"] == -32_200


def test_month_keys_are_read_whether_a_month_or_its_first_day() -> None:
    known = {"2025-03": (-500, 2), "2025-04": (-100, 1)}
    body = {"rows": [{"period": "2025-03-01", "v": -500}, {"period": "2025-04-01", "v": -100}]}
    got = r.learn_spending(body, known, r.month_of)
    assert isinstance(got, s.Learned), got
    read = r.canonical(s.SPENDING, body, got.mapping, group_by="month")
    assert [x["key"] for x in read["data"]] == ["2025-03", "2025-04"]


def test_spending_that_disagrees_with_the_rows_is_refused() -> None:
    body = {
        "data": [
            {"key": "c1", "amount": -29_999},
            {"key": "c2", "amount": -1_500},
            {"key": None, "amount": -700},
        ]
    }
    got = r.learn_spending(body, CATEGORY)
    assert isinstance(got, s.Refused)
    assert "amounts" in got.reason
    assert isinstance(r.learn_spending(body, {}), s.Refused)


def test_a_changed_shape_is_noticed_by_resolves() -> None:
    mapping = s.DOCUMENTED[s.TRANSACTIONS_SUMMARY]
    assert r.resolves(s.TRANSACTIONS_SUMMARY, SUMMARY_SHAPES[0][1], mapping) is None
    moved = r.resolves(s.TRANSACTIONS_SUMMARY, SUMMARY_SHAPES[1][1], mapping)
    assert moved is not None and "count" in moved


def test_a_shape_holds_names_types_and_nesting_never_values() -> None:
    body = {"data": [{"key": "secret-merchant", "amount": -123}], "total": -123, "as_of": None}
    shape = s.shape_of(body)
    assert shape == {
        "as_of": "null",
        "data": [{"amount": "integer", "key": "string"}],
        "total": "integer",
    }
    assert "secret" not in repr(shape) and "123" not in repr(shape)
    # an object keyed by ids or dates: the keys are values too, never shown
    keyed = {"923a7369-94e3-4f91-9a61-dbe22e44158b": {"status": "active"}, "2025-03": {"n": 1}}
    assert s.shape_of(keyed) == {"<date>": {"n": "integer"}, "<uuid>": {"status": "string"}}


def test_paths_read_negations_selections_and_the_body_itself() -> None:
    body = {"a": {"b": [{"k": "x", "v": 5}, {"k": "y", "v": 6}]}, "n": 3}
    assert s.at(body, "a.b[k=y].v") == 6
    assert s.at(body, "-n") == -3
    assert s.at(body, "a.missing") is None
    assert s.at([1], "") == [1]


def test_a_sync_status_s_times_are_its_earlier_and_later_instant_whatever_their_names() -> None:
    from centsync.transform.shapes import SYNC_STATUS
    from centsync.transform.shapes_rows import canonical, learn_records

    ids = ["7d3c9a8e-0f5b-4c1e-9a2d-3b4c5d6e7f80", "8e4d0b9f-1a6c-4d2f-8b3e-4c5d6e7f8091"]
    body = {
        "items": [
            {
                "conn": ids[0],
                "provider": "p1",
                "status": "ok",
                "due": 1764300000,
                "did": 1764200000,
            },
            {"conn": ids[1], "provider": "p2", "status": "ok", "due": 1764310000, "did": None},
        ]
    }
    got = learn_records(SYNC_STATUS, body)
    assert got.mapping["last_synced_at"] == "did" and got.mapping["next_sync_at"] == "due"
    rows = canonical(SYNC_STATUS, body, got.mapping)["data"]
    assert (
        rows[0]["last_synced_at"] == "2025-11-26T23:33:20+00:00"
        and rows[1]["last_synced_at"] is None
    )
    # ISO text too; and an order that is not the same for every record is not guessed at
    iso = {"data": [{"id": ids[0], "provider": "p", "status": "s", "a": "2026-01-02T00:00:00Z",
                     "b": "2026-01-01T00:00:00Z"}]}  # fmt: skip
    assert learn_records(SYNC_STATUS, iso).mapping["last_synced_at"] == "b"
    mixed = {"data": [dict(iso["data"][0]), {**iso["data"][0], "id": ids[1],
             "a": "2025-12-31T00:00:00Z"}]}  # fmt: skip
    assert "last_synced_at" not in learn_records(SYNC_STATUS, mixed).mapping
