"""Write-back for a person's paper trail (issue 29), end to end against the sandbox over
loopback: refunds, notes beside their transaction, a file's good rows posted and its bad rows
split out, superseded rejections, dates ahead of the service's today, non-ASCII digits."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from centsync.warehouse.outbox import Outbox, outbox_path

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e

HEADER = "event_id,account,booked_at,amount,concept,type,notes\n"


def drop(http_env: HttpEnv, name: str, text: str) -> Path:
    inbox = http_env.warehouse.parent / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    (inbox / name).write_text(text, "utf-8")
    return inbox


def test_refunds_notes_split_files_future_dates_and_superseded_rejections(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CENTSYNC_API_KEY", http_env.sb.keys["read_write"])
    http_env.refresh()
    day = (dt.date.today() - dt.timedelta(days=2)).isoformat()
    ahead = (dt.date.today() + dt.timedelta(days=3)).isoformat()
    inbox = drop(
        http_env,
        "paper.csv",
        HEADER
        + f"pp-refund,Cash Wallet,{day},12.30,PP Refund shoes,expense,returned them\n"
        + f'pp-note,Cash Wallet,{day},-4.10,PP Market,,"paid in cash\nsecond line"\n'
        + f"pp-future,Cash Wallet,{ahead},-9.00,PP Concert,,\n"
        + f"pp-digits,Cash Wallet,{day},-１２.５０,PP Fullwidth,,\n",
    )
    report = http_env.refresh()
    wb = report["writeback"]
    assert (wb["sent"], wb["rejected"]) == (2, 2), wb
    assert report["verdict"] == "agree"  # the service's spending counts the refund, as we do
    http_env.assert_exact()
    (refund,) = [
        t for t in http_env.sb.state()["transactions"] if t["concept"] == "PP Refund shoes"
    ]
    assert (refund["type"], refund["amount"]) == ("expense", 1230)
    # notes are kept beside their transaction
    notes = dict(http_env.sql("SELECT concept, notes FROM core.transaction_notes"))
    assert notes == {"PP Refund shoes": "returned them", "PP Market": "paid in cash\nsecond line"}
    # the good rows posted: the file is in done/, its two bad rows split out with their reasons
    (entry,) = wb["files"]
    assert (inbox / "done" / "paper.csv").exists()
    assert entry["fate"].startswith("2 good row(s) queued") and "2 row(s) rejected" in entry["fate"]
    split = (inbox / "rejected" / "paper.csv").read_text("utf-8").splitlines()
    assert split[0] == HEADER.strip() and [s.split(",")[0] for s in split[1:]] == [
        "pp-future",
        "pp-digits",
    ]
    reasons = (inbox / "rejected" / "paper.csv.errors.csv").read_text("utf-8")
    assert "after the service's today" in reasons and "--allow-future" in reasons
    assert "write the digits 0-9" in reasons
    code, out = http_env.cli("status", "--json")
    assert json.loads(out)["outbox"]["states"]["rejected"] == 2

    # fixed and dropped again (the same event ids): posted, and the rejections no longer count
    drop(
        http_env,
        "paper-fixed.csv",
        HEADER
        + f"pp-future,Cash Wallet,{ahead},-9.00,PP Concert,,\n"
        + f"pp-digits,Cash Wallet,{day},-12.50,PP Fullwidth,,\n",
    )
    code, out = http_env.cli("writeback", "--allow-future", "--json")
    assert code == 0, out
    assert json.loads(out.strip().splitlines()[-1])["sent"] == 2
    states = [(r["event_ref"], r["state"]) for r in Outbox(outbox_path(http_env.warehouse)).rows()]
    assert states.count(("event:pp-digits", "rejected")) == 1
    code, out = http_env.cli("status", "--json")
    status = json.loads(out)
    assert status["outbox"]["states"]["rejected"] == 0
    code, out = http_env.cli("status")
    assert f"Inbox: {inbox}" in out
