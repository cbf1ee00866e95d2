"""One odd row never stops a refresh or poisons its cost (issue 25), through the CLI against
the sandbox on loopback."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from centsync.pipelines import failures as errors

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def _account(http_env: HttpEnv) -> str:
    return str(http_env.sb.state()["accounts"][0]["id"])


def test_a_type_the_client_does_not_know_is_rejected_not_five_rereads_and_exit_5(
    http_env: HttpEnv,
) -> None:
    http_env.refresh()
    # a recent row, so the next incremental refresh reads its window and checks it against
    # the service's summary (the hot window)
    recent = max(http_env.sb.state()["transactions"], key=lambda t: t["booked_at"])
    http_env.admin("PUT", "/_sandbox/faults", {"corrupt": {recent["id"]: "unknown_type"}})
    for args in ((), ("--full",)):
        code, out = http_env.cli("refresh", "--json", *args)
        report = json.loads(out.strip().splitlines()[-1])
        assert code == errors.REJECTED, out
        assert report["rows"]["rejected"] == 1 and report["rereads"] == 0
        reasons = http_env.sql("SELECT record->>'id', reason FROM raw.rejected_rows")
        assert {i for i, _ in reasons} == {recent["id"]} and "type" in reasons[0][1]
        # every other row is there, the odd one is not
        (landed,) = http_env.sql("SELECT count(*) FROM core.transactions")[0]
        assert landed == len(http_env.sb.state()["transactions"]) - 1
    http_env.admin("DELETE", "/_sandbox/faults")
    assert http_env.refresh()["rows"]["rejected"] == 0
    http_env.assert_exact()


def test_a_row_dated_1900_does_not_make_every_refresh_prove_127_years(http_env: HttpEnv) -> None:
    http_env.refresh()
    before = http_env.refresh()["requests"]["total"]
    http_env.admin(
        "POST",
        "/_sandbox/transactions",
        {
            "account_id": _account(http_env),
            "concept": "OLD ledger line",
            "amount": -100,
            "booked_at": "1900-01-05",
        },
    )
    found = http_env.refresh()
    assert found["rows"]["changed"] >= 1
    after = http_env.refresh()["requests"]["total"]
    # the year 1900 and one range for the empty years after it (3 requests each, and a page
    # of verification), not three requests a year for 120 years (400 requests before)
    assert after <= before + 9, (before, after)
    # a row appearing in the empty years is still caught (the gap's range differs, read whole)
    http_env.admin(
        "POST",
        "/_sandbox/transactions",
        {
            "account_id": _account(http_env),
            "concept": "BACKDATED 1950",
            "amount": -250,
            "booked_at": "1950-06-01",
        },
    )
    caught = http_env.refresh()
    assert caught["rows"]["changed"] >= 1 and caught["verdict"] == "agree"
    http_env.assert_exact()
    assert http_env.sql(
        "SELECT count(*) FROM core.transactions WHERE booked_at < '2000-01-01'"
    ) == [(2,)]


def _page_one(http_env: HttpEnv) -> list[dict[str, Any]]:
    """The list's first page as the service sends it (newest first)."""
    key = http_env.sb.keys["read_only"]
    with httpx.Client(base_url=http_env.base_url, headers={"Authorization": f"Bearer {key}"}) as c:
        return list(c.get("/v1/transactions", params={"limit": 200}).json()["data"])


@pytest.mark.parametrize("impostor_first", [True, False], ids=["impostor-first", "impostor-second"])
def test_a_row_sent_under_its_neighbours_id_never_lands_as_that_neighbour(
    http_env: HttpEnv, impostor_first: bool
) -> None:
    first, second = _page_one(http_env)[:2]
    assert first["booked_at"][:7] == second["booked_at"][:7]  # one window, one page
    # the fault sends the victim under its page neighbour's id: the row before it, or (first on
    # its page) the row after it, so the impostor comes first or second
    victim, real = (first, second) if impostor_first else (second, first)
    http_env.admin("PUT", "/_sandbox/faults", {"corrupt": {victim["id"]: "duplicate_id"}})
    code, out = http_env.cli("refresh", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.REJECTED, out
    assert report["verdict"] == "explained" and report["rows"]["rejected"] == 1
    # the real id holds what the service's own GET says it is, never the impostor's content
    landed = http_env.sql(
        "SELECT concept, amount, strftime(booked_at, '%Y-%m-%d') FROM core.transactions "
        "WHERE id = ?",
        [real["id"]],
    )
    assert landed == [(real["concept"], real["amount"], real["booked_at"])]
    # both copies are rejected with the reason; the victim, whose id was hidden, is missing
    rejected = http_env.sql(
        "SELECT record->>'id', record->>'concept', reason FROM raw.rejected_rows"
    )
    assert {(i, c) for i, c, _ in rejected} == {
        (real["id"], real["concept"]),
        (real["id"], victim["concept"]),
    }
    assert all("different content" in reason for *_, reason in rejected)
    assert http_env.sql("SELECT count(*) FROM core.transactions WHERE id = ?", [victim["id"]]) == [
        (0,)
    ]
    (count,) = http_env.sql("SELECT count(*) FROM core.transactions")[0]
    assert count == len(http_env.sb.state()["transactions"]) - 1
    # the service mended: the next refresh re-reads the month (it differs) and is exact
    http_env.admin("DELETE", "/_sandbox/faults")
    again = http_env.refresh()
    assert again["rows"]["rejected"] == 0 and again["verdict"] == "agree"
    http_env.assert_exact()


def test_fields_the_service_adds_later_are_ignored_and_kept_in_the_raw_record(
    http_env: HttpEnv,
) -> None:
    """Contract section 9: answers may gain fields. Every endpoint sends some (the sandbox's
    `unknown_fields` fault); the refresh lands, reconciles and exits 0."""
    http_env.admin("PUT", "/_sandbox/faults", {"unknown_fields": True})
    key = http_env.sb.keys["read_only"]
    with httpx.Client(base_url=http_env.base_url, headers={"Authorization": f"Bearer {key}"}) as c:
        for path in ("/v1/transactions", "/v1/accounts", "/v1/analytics/net-worth", "/v1/me"):
            body = c.get(path).json()
            first = body[0] if isinstance(body, list) else body
            assert "x_added_object" in first, path
        assert "x_added_later" in c.get("/v1/transactions").json()["data"][0]
    code, out = http_env.cli("refresh", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == 0, out
    assert report["verdict"] == "agree" and report["rows"]["rejected"] == 0
    http_env.assert_exact()
    # the raw record is the service's, new fields and all
    (kept,) = http_env.sql(
        "SELECT count(*) FROM raw.transactions WHERE raw->>'x_added_later' IS NULL"
    )[0]
    assert kept == 0
    assert http_env.cli("refresh", "--json")[0] == 0  # and an incremental refresh too
    code, recon = http_env.reconcile()
    assert code == 0 and recon["verdict"] == "agree", recon
