"""Refused and rejected rows are shown, not only counted, and their alerts say whose they are
(issues 43 and 44): through the real CLI against the sandbox on loopback, in real Dagster runs."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from centsync.pipelines import failures as errors
from centsync.pipelines import instance as dagster_storage
from centsync.pipelines import recorded

from .alert_receiver import Receiver
from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def _json(http_env: HttpEnv, *args: str) -> tuple[int, dict[str, Any]]:
    code, out = http_env.cli(*args, "--json")
    return code, json.loads(out.strip().splitlines()[-1])


def _corrupt_recent(http_env: HttpEnv) -> str:
    """A recent row sent with a type the API does not have: the hot window reads it again."""
    recent = max(http_env.sb.state()["transactions"], key=lambda t: t["booked_at"])
    http_env.admin("PUT", "/_sandbox/faults", {"corrupt": {recent["id"]: "unknown_type"}})
    return str(recent["id"])


def test_a_broken_row_the_service_sent_is_one_alert_that_says_whose_and_status_shows_it(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    http_env.refresh()
    tid = _corrupt_recent(http_env)
    with Receiver() as inbox:
        monkeypatch.setenv("CENTSYNC_ALERT_URL", inbox.url)
        code, report = _json(http_env, "refresh")
        got = inbox.wait_for(1, timeout=5)  # a second one would be here too (`Receiver`)
    assert code == errors.REJECTED and report["verdict"] == "explained"
    # one alert: what happened, whose it is to fix, where to look; not "a bug in centsync"
    assert [m["title"] for m in got] == [
        "centsync: the service sent 1 broken row(s); they were set aside"
    ]
    body = got[0]["message"]
    assert "This is the service's data, not a bug in centsync" in body
    assert "`centsync status` lists each row with its reason" in body
    assert f"warehouse {http_env.warehouse})" in body and "warehouse ?" not in body
    # the daemon's sensors read the stored run the same way: the same one alert
    with dagster_storage.instance(http_env.tmp / "dagster") as instance:
        run = instance.get_run_by_id(report["run_id"])
        assert run is not None and run.is_failure  # the blocking check failed the run ...
        events = recorded.events(instance, report["run_id"])
    again = recorded.alerts(
        "refresh_job", report["run_id"], events, failed=True, warehouse=str(http_env.warehouse)
    )
    assert [(a.title, a.body) for a in again] == [(got[0]["title"], body)]  # ... not a bug
    # once per refresh, however often the refresh read it
    held = http_env.sql("SELECT refresh_id, record->>'id' FROM raw.rejected_rows")
    assert held == [(report["refresh_id"], tid)]
    # the place the alert names shows it, with its reason and source
    code, status = _json(http_env, "status")
    (row,) = status["rejected"]
    assert row["origin"] == "refresh" and row["source"] == f"the service's transactions {tid}"
    assert "type" in row["reason"] and "the service's data" in row["whose"]
    code, text = http_env.cli("status")
    assert f"rejected  the service's transactions {tid}: type: " in text
    assert "raw.rejected_rows" not in text.split("Rows: ")[1]  # no all-time count
    code, listed = _json(http_env, "writeback", "--rejected")
    assert code == errors.REJECTED and listed["rows"] == status["rejected"]
    # the service sends it whole again: nothing is listed, nothing counted
    http_env.admin("DELETE", "/_sandbox/faults")
    assert http_env.refresh()["rows"]["rejected"] == 0
    assert _json(http_env, "status")[1]["rejected"] == []
    code, listed = _json(http_env, "writeback", "--rejected")
    assert code == 0 and listed["rows"] == []


def _bank_fed_expense(http_env: HttpEnv) -> str:
    (tid,) = http_env.sql(
        "SELECT t.id::VARCHAR FROM core.transactions t JOIN core.accounts a ON a.id = t.account_id "
        "WHERE a.connection_id IS NOT NULL AND t.type = 'expense' ORDER BY t.booked_at LIMIT 1"
    )[0]
    return str(tid)


def _drop(http_env: HttpEnv, name: str, text: str) -> Path:
    inbox = http_env.warehouse.parent / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    (inbox / name).write_text(text)
    return inbox


def test_a_refused_write_back_is_warned_of_shown_with_its_reason_and_cleared_when_fixed(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CENTSYNC_API_KEY", http_env.sb.keys["read_write"])
    http_env.refresh()
    tid = _bank_fed_expense(http_env)
    inbox = _drop(http_env, "edits.csv", f"operation,transaction_id,amount\nedit,{tid},-1.00\n")
    # the dry run says so before sending: `warn`, with the contract's reason
    code, plan = _json(http_env, "writeback", "--dry-run")
    (entry,) = plan["plan"]
    assert code == 0 and entry["action"] == "warn" and "bank-fed account" in entry["reason"]
    code, text = http_env.cli("writeback", "--dry-run")
    assert "warn" in text and "manual transactions only" in text
    # sent: the service refuses it, and the reason is printed and in an errors file
    code, text = http_env.cli("writeback")
    errors_file = inbox / "rejected" / "edits.csv.errors.csv"
    assert code == errors.REJECTED
    assert "1 refused by the service" in text
    assert "refused   edits.csv:2 PATCH" in text and "bank-feed transaction" in text
    assert f"(in {errors_file})" in text
    header, (line, reason, row_text) = list(csv.reader(io.StringIO(errors_file.read_text())))
    assert header == ["line", "reason", "row"] and line == "2" and row_text == f"edit,{tid},-1.00"
    assert reason.startswith("refused by the service: ") and "bank-feed transaction" in reason
    # and, as the checks' rejections are, under its file's header in rejected/, to fix there
    kept = inbox / "rejected" / "edits.csv"
    assert kept.read_text() == f"operation,transaction_id,amount\nedit,{tid},-1.00\n"
    # status and `writeback --rejected` list it with its source and reason
    status = _json(http_env, "status")[1]
    (row,) = status["rejected"]
    assert (row["origin"], row["source"]) == ("writeback", "edits.csv:2")
    assert "bank-feed transaction" in row["reason"] and row["whose"].startswith("yours")
    code, listed = _json(http_env, "writeback", "--rejected")
    assert code == errors.REJECTED and listed["rows"] == status["rejected"]
    code, text = http_env.cli("writeback", "--rejected")
    assert "refused   edits.csv:2: invalid_request: amount of a bank-feed" in text
    # fixed there (the concept only) and moved back: the stale errors file goes, nothing listed
    kept.write_text(f"operation,transaction_id,concept\nedit,{tid},Corner shop\n")
    kept.rename(inbox / "edits.csv")
    code, text = http_env.cli("writeback")
    assert code == 0, text
    assert not errors_file.exists() and not kept.exists()
    assert _json(http_env, "status")[1]["rejected"] == []
    assert http_env.cli("writeback", "--rejected")[0] == 0
