"""Write-back end to end: the sandbox over loopback, real outbox and warehouse files, the CLI
and Dagster runs; crash safety with SIGKILLed drains."""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from centsync.extract import ApiClient
from centsync.pipelines.cli.main import main
from centsync.pipelines.writeback import run as writeback
from centsync.warehouse.outbox import Outbox, outbox_path

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e

HEADER = "event_id,account,booked_at,amount,concept,category,notes\n"


def outbox_rows(http_env: HttpEnv) -> list[dict[str, Any]]:
    return Outbox(outbox_path(http_env.warehouse)).rows()


def server_rows(http_env: HttpEnv, concept_part: str) -> list[dict[str, Any]]:
    return [t for t in http_env.sb.state()["transactions"] if concept_part in t["concept"]]


def drop(http_env: HttpEnv, name: str, text: str | bytes) -> Path:
    inbox = http_env.warehouse.parent / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    path = inbox / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def writer(http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CENTSYNC_API_KEY", http_env.sb.keys["read_write"])


def test_a_csv_in_the_inbox_is_in_the_ledger_after_one_refresh_and_never_twice(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer(http_env, monkeypatch)
    http_env.refresh()
    drop(
        http_env,
        "cash.csv",
        HEADER
        + "c-1,Cash Wallet,2026-11-10,-3.50,WB Coffee,Restaurants,\n"
        + ",Cash Wallet,2026-11-10,-2.50,WB Bakery,Groceries,\n"
        + ",Cash Wallet,2026-11-10,-2.50,WB Bakery,Groceries,\n"  # the same again: a second bakery
        + "c-4,Cash Wallet,2026-11-11,-1.234,WB Bad,,\n",
    )
    report = http_env.refresh()
    assert report["writeback"]["sent"] == 3 and report["writeback"]["rejected"] == 1
    assert report["outbox"]["confirmed"] == 3
    assert report["verdict"] == "agree"
    http_env.assert_exact()
    created = server_rows(http_env, "WB ")
    assert sorted((t["concept"], t["amount"]) for t in created) == [
        ("WB Bakery", -250),
        ("WB Bakery", -250),
        ("WB Coffee", -350),
    ]
    rows = outbox_rows(http_env)
    assert [r["state"] for r in rows] == ["confirmed", "confirmed", "confirmed", "rejected"]
    assert {str(r["server_id"]) for r in rows[:3]} == {t["id"] for t in created}
    assert "3 decimals but EUR has 2" in rows[3]["reason"]
    assert http_env.sql("SELECT count(*) FROM core.transactions WHERE concept LIKE 'WB %'") == [
        (3,)
    ]
    assert http_env.sql("SELECT count(*) FROM ops.outbox WHERE state = 'confirmed'") == [(3,)]
    inbox = http_env.warehouse.parent / "inbox"
    errors = (inbox / "rejected" / "cash.csv.errors.csv").read_text()
    assert "line,reason,row" in errors and "c-4" in errors and "3 decimals" in errors
    # the file's good rows were posted: it is in done/; only its bad row is split out, under
    # the file's header, to be fixed and dropped again; the file's fate says so
    assert (inbox / "done" / "cash.csv").exists()
    assert (inbox / "rejected" / "cash.csv").read_text() == (
        HEADER + "c-4,Cash Wallet,2026-11-11,-1.234,WB Bad,,\n"
    )
    (entry,) = report["writeback"]["files"]
    assert entry["fate"].startswith("3 good row(s) queued") and "1 row(s) rejected" in entry["fate"]

    # the same file again, renamed, and through the write-back job: nothing new is created
    drop(http_env, "cash-copy.csv", (inbox / "done" / "cash.csv").read_bytes())
    code, out = http_env.cli("writeback", "--json")
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 0, out
    assert result["queued"] == 0 and result["duplicates"] == 4 and result["sent"] == 0
    assert len(server_rows(http_env, "WB ")) == 3
    # its bad row is still bad: the copy goes beside the first, with its reasons
    assert (inbox / "rejected" / "cash-copy.csv.errors.csv").exists()
    code, out = http_env.cli("status", "--json")
    assert json.loads(out)["outbox"]["states"] == {
        "pending": 0,
        "sent": 0,
        "confirmed": 3,
        "rejected": 1,
        "needs_attention": 0,
    }


def test_a_file_rejected_whole_for_a_reason_with_a_quote_gets_an_errors_file_that_is_csv(
    http_env: HttpEnv,
) -> None:
    http_env.refresh()
    # the header's quote is unbalanced: the reason itself holds '"' and ','
    drop(
        http_env,
        "quoted.csv",
        '"account"x,booked_at,amount,concept\nCash Wallet,2026-11-10,-1.00,Tea\n',
    )
    summary = writeback.run_writeback(None, http_env.warehouse, writeback.WritebackOptions())
    problem = summary.files[0]["rejected_file"]
    assert '"' in problem and "unreadable header" in problem
    errors = Path(summary.files[0]["errors_file"])
    assert errors.name == "quoted.csv.errors.csv" and errors.parent.name == "rejected"
    with errors.open(newline="", encoding="utf-8") as f:
        assert list(csv.reader(f, strict=True)) == [["line", "reason", "row"], ["0", problem, ""]]
    assert outbox_rows(http_env) == []


def test_a_read_only_key_sends_nothing_loses_nothing_and_says_what_to_do(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    http_env.refresh()  # the fixture's key is read-only
    drop(http_env, "cash.csv", HEADER + "r-1,Cash Wallet,2026-11-12,-4.00,RO Lunch,,\n")
    before = len(http_env.sb.state()["transactions"])
    result = CliRunner().invoke(main, ["writeback"], catch_exceptions=False)
    assert result.exit_code == 3, result.output
    assert "data.write" in result.stderr and "CENTSYNC_API_KEY" in result.stderr
    assert [(r["state"], r["attempts"]) for r in outbox_rows(http_env)] == [("pending", 0)]
    assert len(http_env.sb.state()["transactions"]) == before
    # a refresh with the read-only key still refreshes, and says why the row waits
    report = http_env.refresh()
    assert any("read-only" in w for w in report["writeback"]["warnings"])
    assert [r["state"] for r in outbox_rows(http_env)] == ["pending"]
    # with a read and write key it goes, once
    writer(http_env, monkeypatch)
    code, out = http_env.cli("writeback")
    assert code == 0, out
    assert "1 accepted by the service" in out
    assert len(server_rows(http_env, "RO Lunch")) == 1


def test_the_same_event_with_another_body_needs_attention_and_is_never_sent(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer(http_env, monkeypatch)
    http_env.refresh()
    drop(http_env, "a.csv", HEADER + "dup-1,Cash Wallet,2026-11-12,-4.00,NA Taxi,,\n")
    assert http_env.cli("writeback")[0] == 0
    drop(http_env, "b.csv", HEADER + "dup-1,Cash Wallet,2026-11-12,-40.00,NA Taxi,,\n")
    code, out = http_env.cli("writeback", "--json")
    assert code == 7, out
    rows = outbox_rows(http_env)
    assert [r["state"] for r in rows] == ["sent", "needs_attention"]
    assert rows[1]["attempts"] == 0
    assert '"amount":-400' in rows[1]["reason"] and '"amount":-4000' in rows[1]["reason"]
    assert [t["amount"] for t in server_rows(http_env, "NA Taxi")] == [-400]


def test_a_key_the_service_already_holds_with_another_body_needs_attention(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer(http_env, monkeypatch)
    http_env.refresh()
    drop(http_env, "a.csv", HEADER + "k-1,Cash Wallet,2026-11-12,-4.00,KR Taxi,,\n")
    assert (
        writeback.run_writeback(None, http_env.warehouse, writeback.WritebackOptions()).queued == 1
    )
    row = outbox_rows(http_env)[0]
    # another tool used the same key first, with another body
    body = json.loads(row["body"]) | {"amount": -999}
    r = httpx.post(
        http_env.base_url + "/v1/transactions",
        json=body,
        headers={
            "Authorization": f"Bearer {http_env.sb.keys['read_write']}",
            "Idempotency-Key": row["idempotency_key"],
        },
    )
    assert r.status_code == 201
    code, out = http_env.cli("writeback")
    assert code == 7, out
    row = outbox_rows(http_env)[0]
    assert row["state"] == "needs_attention" and row["response_status"] == 422
    assert "idempotency_key_reused" in row["reason"] and row["body"] in row["reason"]
    assert [t["amount"] for t in server_rows(http_env, "KR Taxi")] == [-999]


def _client(http_env: HttpEnv) -> ApiClient:
    return ApiClient(
        http_env.base_url, http_env.sb.keys["read_write"], backoff_initial=0.01, backoff_max=0.05
    )


def test_a_send_with_an_unknown_outcome_past_the_key_lifetime_is_looked_up_not_resent(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer(http_env, monkeypatch)
    http_env.refresh()
    drop(
        http_env,
        "late.csv",
        HEADER
        + "l-1,Cash Wallet,2026-11-12,-6.00,LATE Cinema,,\n"
        + "l-2,Cash Wallet,2026-11-12,-7.00,LATE Popcorn,,\n",
    )
    writeback.run_writeback(None, http_env.warehouse, writeback.WritebackOptions())  # intake only
    box = Outbox(outbox_path(http_env.warehouse))
    cinema, popcorn = box.rows()
    t0 = dt.datetime.now(dt.UTC)
    # both sends started, then the process died: the cinema request reached the service, the
    # popcorn one never left
    box.mark_attempt(cinema["id"], t0)
    box.mark_attempt(popcorn["id"], t0)
    with _client(http_env) as c:
        c.write(
            "POST",
            cinema["path"],
            json.loads(cinema["body"]),
            idempotency_key=cinema["idempotency_key"],
        )
    http_env.admin("POST", "/_sandbox/clock/advance", {"hours": 25})  # the service forgets the keys
    later = writeback.WritebackOptions(now=lambda: t0 + dt.timedelta(hours=25))
    with _client(http_env) as c:
        summary = writeback.run_writeback(c, http_env.warehouse, later)
    assert summary.found_by_lookup == 1 and summary.sent == 1
    assert len(server_rows(http_env, "LATE Cinema")) == 1  # found, not created again
    assert len(server_rows(http_env, "LATE Popcorn")) == 1  # not found, so sent once
    cinema, popcorn = box.rows()
    assert cinema["state"] == "sent" and cinema["found_by_lookup"] and cinema["attempts"] == 1
    assert (
        popcorn["state"] == "sent" and not popcorn["found_by_lookup"] and popcorn["attempts"] == 2
    )
    # without the lookup the resend would have created a second cinema: the key is gone
    with _client(http_env) as c:
        again = c.write(
            "POST",
            cinema["path"],
            json.loads(cinema["body"]),
            idempotency_key=cinema["idempotency_key"],
        )
    assert not again.replayed and len(server_rows(http_env, "LATE Cinema")) == 2


def test_analysts_requests_table_edits_and_assigns_go_through_the_same_outbox(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer(http_env, monkeypatch)
    http_env.refresh()
    expense, goal = http_env.sql(
        "SELECT id::VARCHAR, (SELECT any_value(expense_goal_id)::VARCHAR FROM core.transactions) "
        "FROM core.transactions WHERE type = 'expense' AND expense_goal_id IS NULL LIMIT 1"
    )[0]
    box = Outbox(outbox_path(http_env.warehouse))
    with box.connect() as con:
        con.execute(
            "INSERT INTO ops.outbox_requests (event_id, account, booked_at, amount, concept) "
            "VALUES ('q-1', 'Cash Wallet', '2026-11-13', -8.20, 'REQ Museum')"
        )
        con.execute(
            "INSERT INTO ops.outbox_requests (event_id, operation, transaction_id, concept) "
            "VALUES ('q-2', 'edit', ?, 'REQ renamed')",
            [expense],
        )
        con.execute(
            "INSERT INTO ops.outbox_requests (event_id, operation, transaction_id, expense_goal_id) "
            "VALUES ('q-3', 'assign', ?, ?)",
            [expense, goal],
        )
        con.execute(
            "INSERT INTO ops.outbox_requests (event_id, account, booked_at, amount, concept) "
            "VALUES ('q-4', 'Cash Wallet', '2026-11-13', -(0.1::DOUBLE + 0.2::DOUBLE), 'REQ float')"
        )
    report = http_env.refresh()
    assert report["writeback"]["sent"] == 3, report["writeback"]
    states = {r["event_ref"]: r["state"] for r in box.rows()}
    assert states == {
        "event:q-1": "confirmed",
        "event:q-2": "confirmed",
        "event:q-3": "confirmed",
        "event:q-4": "rejected",  # 0.30000000000000004: never rounded
    }
    http_env.assert_exact()
    assert http_env.sql(
        "SELECT concept, expense_goal_id::VARCHAR FROM core.transactions WHERE id = ?", [expense]
    ) == [("REQ renamed", goal)]
    assert report["verdict"] == "agree"
    # the table is read again by every drain: nothing is sent twice
    code, out = http_env.cli("writeback")
    assert code == 0, out  # q-4 was rejected before: reported then, not again
    assert "4 already in the outbox (not sent again)" in out and "rejected 1" in out
    assert len(server_rows(http_env, "REQ Museum")) == 1


def test_dry_run_shows_the_plan_and_changes_nothing(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer(http_env, monkeypatch)
    http_env.refresh()
    path = drop(
        http_env,
        "plan.csv",
        HEADER + "p-1,Cash Wallet,2026-11-12,-4.00,DRY Taxi,,\np-2,Nope,2026-11-12,-1,DRY Bad,,\n",
    )
    code, out = http_env.cli("writeback", "--dry-run")
    assert code == 7, out
    assert "dry run" in out and "-4.00 'DRY Taxi'" in out and "no account 'Nope'" in out
    assert path.exists() and not outbox_path(http_env.warehouse).exists()
    assert server_rows(http_env, "DRY") == []


# ------------------------------------------------------------------------------ crash safety

# One process imports everything once, then forks a drain per trial (a fresh interpreter per
# trial would spend most of the test importing).
ZYGOTE = """
import os, sys
from pathlib import Path
from centsync.extract import ApiClient
from centsync.pipelines.writeback import run as writeback
base, key, warehouse = sys.argv[1:4]
send = ApiClient.write
def write(self, *args, **kwargs):
    print("sending", flush=True)  # the parent times its kill from here (the write is real)
    return send(self, *args, **kwargs)
ApiClient.write = write
print("zygote", flush=True)
for _ in sys.stdin:
    pid = os.fork()
    if pid == 0:
        try:
            with ApiClient(base, key, backoff_initial=0.01, backoff_max=0.05) as c:
                print(f"ready {os.getpid()}", flush=True)
                writeback.run_writeback(c, Path(warehouse), writeback.WritebackOptions())
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    print("reaped", flush=True)
"""


def _phase(rows: list[dict[str, Any]], attempts_before: int, on_server: set[str]) -> str:
    unknown = [r for r in rows if r["last_sent_at"] is not None and r["last_response_at"] is None]
    if sum(r["attempts"] for r in rows) == attempts_before:
        return "before-send"
    if not unknown:
        return "between-sends"
    return "after-response" if unknown[-1]["concept"] in on_server else "in-flight"


KILL_POINTS = ("before-send", "in-flight", "after-response")
# every request waits 150 ms before its work, and a write 150 ms more after it, before the
# response: the kills land before a send, while one is in flight, or after the service has
# created the transaction but before the drain heard of it
SLOW = {"latency_ms": 150, "latency_after_ms": 150}
# at least 24 trials, more (up to 60) until each kill point was hit twice (on a loaded
# machine a sleep can overshoot its window)
MIN_TRIALS, MAX_TRIALS = 24, 60


class Zygote:
    """The ZYGOTE process: forks a drain on `go`, and says when it is ready, sending, reaped."""

    def __init__(self, http_env: HttpEnv) -> None:
        args = [http_env.base_url, http_env.sb.keys["read_write"], str(http_env.warehouse)]
        self.process = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        assert self.stdout.readline().strip() == b"zygote"

    def go(self) -> int:
        """Fork a drain; its pid, once it is about to run."""
        self.stdin.write(b"go\n")
        self.stdin.flush()
        ready = self.stdout.readline().split()
        assert ready[0] == b"ready"
        return int(ready[1])

    def wait_sending(self) -> None:
        """Wait for the drain's first send to begin."""
        assert self.stdout.readline().strip() == b"sending"

    def wait_reaped(self) -> None:
        """Wait for the killed drain to be reaped (its sends said on the way)."""
        while (line := self.stdout.readline().strip()) != b"reaped":
            assert line == b"sending", line

    def close(self) -> None:
        """Stop forking: end the zygote's input and wait for it to leave."""
        self.stdin.close()
        self.process.wait(timeout=30)


def _drop_trial(http_env: HttpEnv, trial: int) -> None:
    """The trial's inbox file: three rows whose concepts name the trial (`KILL t3 r0`...)."""
    rows = "".join(
        f"k{trial}-{i},Cash Wallet,2026-11-14,-{i + 1}.00,KILL t{trial} r{i},,\n" for i in range(3)
    )
    drop(http_env, f"trial-{trial}.csv", HEADER + rows)


def _kill_drain(zygote: Zygote, pid: int, trial: int, rng: random.Random) -> None:
    """SIGKILL the drain at a kill point aimed at in turn, timed from the drain's own marks:
    before any send, during the 150 ms before the service's work (in flight), or during the
    150 ms after it (the service created the row, the drain has not heard)."""
    aim = trial % 3
    if aim:
        zygote.wait_sending()
        time.sleep(rng.uniform(0.01, 0.12) if aim == 1 else rng.uniform(0.18, 0.28))
    else:
        time.sleep(rng.uniform(0.0, 0.05))
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _killed_trial(http_env: HttpEnv, zygote: Zygote, trial: int, rng: random.Random) -> str:
    """One trial: a drain killed, then a rerun at full speed that must create each of the
    trial's rows exactly once; the kill point the drain was at."""
    _drop_trial(http_env, trial)
    attempts_before = sum(r["attempts"] for r in outbox_rows(http_env))
    _kill_drain(zygote, zygote.go(), trial, rng)
    # what the service holds at the kill: a request still in its 150 ms before the work
    # is in flight (the service goes on with it; the rerun is then replayed)
    on_server = {t["concept"] for t in server_rows(http_env, "KILL ")}
    zygote.wait_reaped()
    phase = _phase(outbox_rows(http_env), attempts_before, on_server)
    # the rerun (at full speed) finishes the job: each event exactly once
    http_env.admin("DELETE", "/_sandbox/faults")
    with _client(http_env) as c:
        writeback.run_writeback(c, http_env.warehouse, writeback.WritebackOptions())
    created = server_rows(http_env, f"KILL t{trial} ")
    assert sorted(t["concept"] for t in created) == [f"KILL t{trial} r{i}" for i in range(3)]
    http_env.admin("PUT", "/_sandbox/faults", SLOW)
    return phase


def _more_trials(phases: list[str]) -> bool:
    """Whether to run another trial: fewer than the least, or a kill point hit under twice."""
    trials = len(phases)
    return trials < MIN_TRIALS or (
        trials < MAX_TRIALS and min(phases.count(p) for p in KILL_POINTS) < 2
    )


@pytest.mark.slow  # CI runs it (make test-slow); about 25-65 s on 2 cores
def test_a_drain_killed_at_any_point_creates_each_transaction_exactly_once(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer(http_env, monkeypatch)
    http_env.refresh()
    http_env.admin("PUT", "/_sandbox/faults", SLOW)
    rng = random.Random(20261123)
    phases: list[str] = []
    zygote = Zygote(http_env)
    try:
        while _more_trials(phases):
            phases.append(_killed_trial(http_env, zygote, len(phases), rng))
    finally:
        zygote.close()
    http_env.admin("DELETE", "/_sandbox/faults")
    rows = [r for r in outbox_rows(http_env) if (r["concept"] or "").startswith("KILL ")]
    created = server_rows(http_env, "KILL ")
    trials = len(phases)
    want = sorted(f"KILL t{t} r{i}" for t in range(trials) for i in range(3))
    assert sorted(t["concept"] for t in created) == want  # each exactly once
    assert [r["state"] for r in rows] == ["sent"] * len(want)
    assert {str(r["server_id"]) for r in rows} == {t["id"] for t in created}
    print("kill phases:", dict(Counter(phases)))  # shown with pytest -s
    for phase in KILL_POINTS:
        assert phases.count(phase) >= 2, phases
    http_env.refresh()
    http_env.assert_exact()
    assert http_env.sql("SELECT count(*) FROM ops.outbox WHERE state = 'confirmed'") == [
        (3 * trials,)
    ]
