"""Categorisation rules and bank files end to end, against the sandbox over loopback with a
read and write key: a rules file applied twice posts once and a changed rule posts only the
difference; OFX and CAMT.053 statements imported twice and overlapping post each transaction
once; rows the service already has from its bank feed are held."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from centsync.pipelines.cli.main import main
from centsync.warehouse.outbox import Outbox, outbox_path

from .conftest import HttpEnv
from .statements import camt_statement, ofx_statement

pytestmark = pytest.mark.e2e

RULES = """
[[rule]]
id = "pp-coffee"
version = {version}
concept = "(?i)starbucks"
account = "Visa Platinum"
set = {{ category = "Groceries", notes = "{notes}" }}

[accounts]
"000123456789" = "Everyday Checking"
"ES9121000418450200051332" = "Rainy Day Savings"
"""


def last(out: str) -> dict[str, Any]:
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow  # CI runs it (make test-slow); about 25-35 s on 2 cores (three refreshes)
def test_a_rules_file_applied_twice_posts_once_and_a_changed_rule_posts_the_difference(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CENTSYNC_API_KEY", http_env.sb.keys["read_write"])
    http_env.refresh()
    rules = http_env.tmp / "rules.toml"
    rules.write_text(RULES.format(version=1, notes="coffee"), "utf-8")
    starbucks = http_env.sql(
        "SELECT t.id::VARCHAR FROM core.transactions t JOIN core.accounts a ON a.id = t.account_id "
        "WHERE t.concept ILIKE '%starbucks%' AND a.name = 'Visa Platinum'"
    )
    assert starbucks, "the household has Starbucks rows on the card"
    code, out = http_env.cli("rules", str(rules), "--dry-run", "--json")
    preview = last(out)
    assert code == 0, out
    fields = {c["field"] for c in preview["changes"]}
    assert fields == {"category", "notes"}
    assert {c["transaction_id"] for c in preview["changes"]} == {s for (s,) in starbucks}
    assert all(c["after"] in ("Groceries", "coffee") for c in preview["changes"])
    assert (
        preview["queued"] == len(starbucks) and not Outbox(outbox_path(http_env.warehouse)).exists()
    )

    code, out = http_env.cli("rules", str(rules), "--json")
    assert (code, last(out)["queued"]) == (0, len(starbucks)), out
    code, out = http_env.cli("rules", str(rules), "--json")  # again, before anything was sent
    assert (code, last(out)["queued"], last(out)["changes"]) == (0, 0, []), out
    code, out = http_env.cli("writeback", "--json")
    assert (code, last(out)["sent"]) == (0, len(starbucks)), out
    report = http_env.refresh()
    assert report["verdict"] == "agree"
    http_env.assert_exact()
    assert http_env.sql(
        "SELECT DISTINCT c.name FROM core.transactions t JOIN core.categories c ON c.id = "
        "t.category_id WHERE t.id::VARCHAR IN (SELECT unnest(?::VARCHAR[]))",
        [[s for (s,) in starbucks]],
    ) == [("Groceries",)]
    assert http_env.sql("SELECT DISTINCT notes FROM core.transaction_notes") == [("coffee",)]
    code, out = http_env.cli("rules", str(rules), "--json")  # after the refresh: still nothing
    assert last(out)["queued"] == 0 and last(out)["changes"] == []

    # the rule changed (version 2: another note): only the notes are posted, once
    rules.write_text(RULES.format(version=2, notes="coffee with friends"), "utf-8")
    code, out = http_env.cli("rules", str(rules), "--json")
    run = last(out)
    assert {c["field"] for c in run["changes"]} == {"notes"} and run["queued"] == len(starbucks)
    bodies = [p["body"] for p in run["plan"]]
    assert bodies == [{"notes": "coffee with friends"}] * len(starbucks)
    assert last(http_env.cli("rules", str(rules), "--json")[1])["queued"] == 0
    code, out = http_env.cli("writeback", "--json")
    assert last(out)["sent"] == len(starbucks)
    http_env.refresh()
    assert http_env.sql("SELECT DISTINCT notes FROM core.transaction_notes") == [
        ("coffee with friends",)
    ]


def test_a_rules_file_that_cannot_be_used_says_where_and_exits_2(http_env: HttpEnv) -> None:
    http_env.refresh()
    bad = http_env.tmp / "bad.toml"
    for text, words in [
        ("[[rule]]\nid = 'x'\nconcept = '('\nset = { notes = 'n' }\n", "not a regular expression"),
        ("[[rule]]\nid = 'x'\nconcpet = 'a'\nset = { notes = 'n' }\n", "unknown key(s) concpet"),
        ("[[rule]]\nid = 'x'\nconcept = 'a'\nset = { category = 'Nope' }\n", "no category 'Nope'"),
        ("[[rule]\n", "not valid TOML"),
    ]:
        bad.write_text(text, "utf-8")
        result = CliRunner().invoke(main, ["rules", str(bad), "--dry-run"])
        assert result.exit_code == 2 and words in result.stderr, result.stderr
    assert not Outbox(outbox_path(http_env.warehouse)).exists()


def _import(http_env: HttpEnv, path: Path, *extra: str) -> dict[str, Any]:
    code, out = http_env.cli(
        "import", str(path), "--account-map", str(http_env.tmp / "map.toml"), "--json", *extra
    )
    assert code == 0, out
    return last(out)["files"][0]


@pytest.mark.slow  # CI runs it (make test-slow); about 15-20 s on 2 cores
def test_ofx_and_camt_statements_imported_twice_and_overlapping_post_each_transaction_once(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CENTSYNC_API_KEY", http_env.sb.keys["read_write"])
    http_env.refresh()
    accounts = RULES[RULES.index("[accounts]") :]
    (http_env.tmp / "map.toml").write_text(accounts, "utf-8")
    # a row the service already has from its bank feed, on the checking account
    (feed_day, feed_amount) = http_env.sql(
        "SELECT t.booked_at, t.amount FROM core.transactions t JOIN core.accounts a ON a.id = "
        "t.account_id WHERE a.name = 'Everyday Checking' ORDER BY t.booked_at DESC LIMIT 1"
    )[0]
    day = dt.date.today() - dt.timedelta(days=3)
    feed = ("FEED-1", feed_day, f"{feed_amount / 100:.2f}", "CARD PAYMENT AS THE FEED HAS IT")
    ofx1 = [("F-1", day, "-13.37", "BK Ferreteria"), ("F-2", day, "-21.09", "BK Libreria"), feed]
    ofx2 = [("F-2", day, "-21.09", "BK Libreria"), ("F-3", day, "45.10", "BK Refund")]
    camt1 = [("R-1", day, "-7.77", "BK Gym"), ("R-2", day, "120.00", "BK Employer")]
    camt2 = [("R-2", day, "120.00", "BK Employer"), ("R-3", day, "-3.33", "BK Parking")]
    files = {}
    for name, data in [
        ("nov-a.ofx", ofx_statement("000123456789", ofx1)),
        ("nov-b.ofx", ofx_statement("000123456789", ofx2)),
        ("nov-a.xml", camt_statement("ES9121000418450200051332", camt1)),
        ("nov-b.xml", camt_statement("ES9121000418450200051332", camt2)),
    ]:
        files[name] = http_env.tmp / name
        files[name].write_bytes(data)

    first = _import(http_env, files["nov-a.ofx"])
    assert [c["event_id"] for c in first["new"]] == [
        "bank:000123456789:F-1",
        "bank:000123456789:F-2",
    ]
    assert [c["event_id"] for c in first["held"]] == ["bank:000123456789:FEED-1"]
    held = Path(first["held_file"])
    assert held.parent.name == "held" and "FEED-1" in held.read_text()
    again = _import(http_env, files["nov-a.ofx"])  # the same statement again, before it was posted
    assert (len(again["new"]), len(again["already_imported"]), len(again["held"])) == (0, 2, 1)
    assert again["inbox_file"] is None and again["held_file"] is None  # nothing written twice
    _import(http_env, files["nov-b.ofx"])  # overlapping: F-2 again
    camt = _import(http_env, files["nov-a.xml"])
    assert [c["amount"] for c in camt["new"]] == ["-7.77", "120.00"]
    _import(http_env, files["nov-b.xml"])
    code, out = http_env.cli("writeback", "--json")
    assert code == 0, out
    assert last(out)["sent"] == 6  # F-1, F-2, F-3, R-1, R-2, R-3
    bank = [t for t in http_env.sb.state()["transactions"] if t["concept"].startswith("BK ")]
    assert sorted((t["concept"], t["amount"]) for t in bank) == [
        ("BK Employer", 12000),
        ("BK Ferreteria", -1337),
        ("BK Gym", -777),
        ("BK Libreria", -2109),
        ("BK Parking", -333),
        ("BK Refund", 4510),
    ]
    assert not [
        t for t in http_env.sb.state()["transactions"] if "AS THE FEED HAS IT" in t["concept"]
    ]
    # after the refresh, every statement again: nothing new, and nothing held twice over
    report = http_env.refresh()
    assert report["verdict"] == "agree"
    for name in files:
        again = _import(http_env, files[name])
        assert again["new"] == [] and again["inbox_file"] is None, (name, again)
    assert len(_import(http_env, files["nov-a.ofx"])["already_imported"]) == 2
    code, out = http_env.cli("writeback", "--json")
    assert last(out)["sent"] == 0
    sent = [orjson.loads(r["body"]) for r in Outbox(outbox_path(http_env.warehouse)).rows()]
    assert len([b for b in sent if b.get("concept", "").startswith("BK ")]) == 6


def test_an_unmapped_account_or_an_unreadable_file_exits_2_and_writes_nothing(
    http_env: HttpEnv,
) -> None:
    http_env.refresh()
    path = http_env.tmp / "x.ofx"
    path.write_bytes(ofx_statement("999", [("F-9", dt.date.today(), "-1.00", "X")]))
    code, _ = http_env.cli("import", str(path))
    assert code == 2
    path.write_bytes(ofx_statement("999", [("F-9", dt.date.today(), "-1.00", "X")], "USD"))
    result = CliRunner().invoke(main, ["import", str(path), "--account", "999=Cash Wallet"])
    assert result.exit_code == 2 and "is in USD but 'Cash Wallet' keeps EUR" in result.stderr
    path.write_bytes(b"<html>not a statement</html>")
    code, _ = http_env.cli("import", str(path), "--account", "999=Cash Wallet")
    assert code == 2
    text = ofx_statement("999", [("F-9", dt.date.today(), "-1.00", "Café")]).decode()
    for data, words in [
        (b"%PDF-1.7\n1 0 obj", "x.ofx is a PDF document, not a bank statement"),
        (text.encode("utf-16-le"), "UTF-16 or UTF-32 text without a byte-order mark"),
    ]:
        path.write_bytes(data)
        result = CliRunner().invoke(main, ["import", str(path), "--account", "999=Cash Wallet"])
        assert result.exit_code == 2 and words in result.stderr, result.stderr
    assert not (http_env.warehouse.parent / "inbox").exists()
    path.write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))  # with its byte-order mark: read
    code, out = http_env.cli(
        "import", str(path), "--account", "999=Cash Wallet", "--dry-run", "--json"
    )
    assert code == 0 and [c["concept"] for c in last(out)["files"][0]["new"]] == ["Café"], out


@pytest.mark.slow  # CI runs it (make test-slow); about 20-30 s on 2 cores (two refreshes)
def test_statements_on_the_banks_calendar_pending_then_booked_and_a_feed_row_a_day_off_post_once(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CENTSYNC_API_KEY", http_env.sb.keys["read_write"])
    http_env.refresh()
    (http_env.tmp / "map.toml").write_text(RULES[RULES.index("[accounts]") :], "utf-8")
    # the bank feed's latest row on checking; the statement dates it a day earlier (it settled
    # the day after), at 00:30 CET: 22:30 or 23:30 UTC two days before the feed's day
    (fid, fday, famount, fconcept) = http_env.sql(
        "SELECT t.id::VARCHAR, t.booked_at, t.amount, t.concept FROM core.transactions t JOIN "
        "core.accounts a ON a.id = t.account_id WHERE a.name = 'Everyday Checking' "
        "ORDER BY t.booked_at DESC, t.id LIMIT 1"
    )[0]
    night, first = fday - dt.timedelta(days=5), fday.replace(day=1)
    rows = [
        ("S-FEED", fday - dt.timedelta(days=1), f"{famount / 100:.2f}", fconcept),
        ("S-NIGHT", night, "-13.71", "BK Midnight Kiosk"),
        ("S-MONTH", first, "-27.43", "BK Month Start"),
    ]
    cet = {fitid: f"{day:%Y%m%d}003000[+1:CET]" for fitid, day, _, _ in rows}
    ofx = http_env.tmp / "cet.ofx"
    ofx.write_bytes(ofx_statement("000123456789", rows, posted=cet))
    run = _import(http_env, ofx)
    assert [(c["event_id"], c["booked_at"]) for c in run["new"]] == [
        ("bank:000123456789:S-NIGHT", night.isoformat()),  # the bank's day, not UTC's day before
        ("bank:000123456789:S-MONTH", first.isoformat()),  # not the month before
    ]
    assert [(c["event_id"], c["candidate"]) for c in run["held"]] == [
        (
            "bank:000123456789:S-FEED",
            {"kind": "bank feed", "id": fid, "booked_at": fday.isoformat(), "concept": fconcept},
        )
    ]
    code, out = http_env.cli("import", str(ofx), "--account-map", str(http_env.tmp / "map.toml"))
    assert code == 0 and f"likely the bank feed row {fday.isoformat()}" in out and fid in out, out

    # a pending CAMT entry is held, never posted; its booking, under a new reference a day
    # later, replaces it; the first statement imported again adds nothing
    iban, pday = "ES9121000418450200051332", fday - dt.timedelta(days=4)
    pending = http_env.tmp / "pending.xml"
    pending.write_bytes(
        camt_statement(
            iban, [("P-1", pday, "-8.88", "BK Pending Shop")], pending=frozenset({"P-1"})
        )
    )
    run = _import(http_env, pending)
    assert (run["new"], [c["event_id"] for c in run["pending"]]) == ([], [f"bank:{iban}:P-1"])
    held_pending = Path(run["pending_file"])
    assert held_pending.parent.name == "held" and "P-1" in held_pending.read_text()
    code, out = http_env.cli("writeback", "--json")
    assert code == 0 and last(out)["sent"] == 2, out  # S-NIGHT and S-MONTH only
    booked = http_env.tmp / "booked.xml"
    booked.write_bytes(
        camt_statement(iban, [("B-1", pday + dt.timedelta(days=1), "-8.88", "BK Pending Shop")])
    )
    run = _import(http_env, booked)
    assert [c["event_id"] for c in run["new"]] == [f"bank:{iban}:B-1"]
    assert [(c["event_id"], c["by"]["id"]) for c in run["superseded"]] == [
        (f"bank:{iban}:P-1", f"bank:{iban}:B-1")
    ]
    assert not held_pending.exists()  # its only row was replaced
    again = _import(http_env, pending)
    assert (again["pending"], again["pending_file"], again["new"]) == ([], None, [])
    assert [c["by"]["id"] for c in again["superseded"]] == [f"bank:{iban}:B-1"]
    code, out = http_env.cli("writeback", "--json")
    assert code == 0 and last(out)["sent"] == 1, out

    report = http_env.refresh()
    assert report["verdict"] == "agree"
    assert sorted(
        http_env.sql(
            "SELECT concept, booked_at, amount FROM core.transactions WHERE concept LIKE 'BK %'"
        )
    ) == [
        ("BK Midnight Kiosk", night, -1371),
        ("BK Month Start", first, -2743),
        ("BK Pending Shop", pday + dt.timedelta(days=1), -888),
    ]
    assert http_env.sql(
        "SELECT count(*) FROM core.transactions WHERE amount = ? AND concept = ?",
        [famount, fconcept],
    ) == [(1,)]  # the feed's row, not posted beside it
    # after the refresh every statement again: nothing new, nothing pending again
    for path in (ofx, pending, booked):
        run = _import(http_env, path)
        assert (run["new"], run["pending"], run["inbox_file"]) == ([], [], None), run
