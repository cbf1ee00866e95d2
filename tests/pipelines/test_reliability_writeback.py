"""Nothing is posted twice when the service's clock runs ahead, and a refresh never reads the
project's own posts landing (issue 25): the CLI against the sandbox's clock controls."""

from __future__ import annotations

import datetime as dt
import fcntl
import functools
import json
import os
import signal
import subprocess
import sys
import time
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import pytest

from centsync.extract import NotFound
from centsync.pipelines import failures as errors
from centsync.pipelines.writeback import run as writeback
from centsync.pipelines.writeback.drain import ServiceClock
from centsync.sandbox.server import free_port
from centsync.warehouse import outbox as outbox_module
from centsync.warehouse.outbox import Outbox, outbox_path

from .conftest import HttpEnv
from .test_writeback_e2e import HEADER, _client, drop, server_rows, writer

pytestmark = pytest.mark.e2e


def test_past_the_key_window_on_the_services_clock_nothing_is_posted_twice(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer(http_env, monkeypatch)
    http_env.refresh()
    drop(
        http_env,
        "late.csv",
        HEADER
        + "s-1,Cash Wallet,2026-11-12,-6.00,SKEW Cinema,,\n"
        + "s-2,Cash Wallet,2026-11-12,-7.00,SKEW Popcorn,,\n"
        + "s-3,Cash Wallet,2026-11-12,-8.00,SKEW Parking,,\n",
    )
    writeback.run_writeback(None, http_env.warehouse, writeback.WritebackOptions())  # intake only
    box = Outbox(outbox_path(http_env.warehouse))
    cinema, popcorn, parking = box.rows()
    # Three sends started, then their answers were lost: cinema and popcorn reached the
    # service, parking never left. The drain records the service's time with each send.
    with _client(http_env) as c:
        service_then = c.net_worth().as_of
        for row in (cinema, popcorn, parking):
            box.mark_attempt(row["id"], writeback.WritebackOptions().now(), service_then)
        made = {
            row["concept"]: c.write(
                "POST", row["path"], json.loads(row["body"]), idempotency_key=row["idempotency_key"]
            ).id
            for row in (cinema, popcorn)
        }
        # popcorn is renamed in the app before the resend: a lookup by concept misses it
        c.write(
            "PATCH",
            f"/v1/transactions/{made['SKEW Popcorn']}",
            {"concept": "Popcorn at the movies"},
            idempotency_key="rename-popcorn",
        )
    # the service's clock passes 24 h; this machine's does not move (clock skew is enough)
    http_env.admin("POST", "/_sandbox/clock/advance", {"hours": 25})
    code, out = http_env.cli("writeback", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.REJECTED, out  # one row needs attention
    # the service holds each once: found, parked, sent once (it was provably absent)
    assert len(server_rows(http_env, "SKEW Cinema")) == 1
    assert len(server_rows(http_env, "Popcorn")) == 1
    assert len(server_rows(http_env, "SKEW Parking")) == 1
    cinema, popcorn, parking = box.rows()
    assert cinema["state"] == "sent" and cinema["found_by_lookup"]
    assert cinema["server_id"] is not None and str(cinema["server_id"]) == made["SKEW Cinema"]
    assert popcorn["state"] == "needs_attention" and popcorn["attempts"] == 1
    assert (
        made["SKEW Popcorn"] in popcorn["reason"] and "Popcorn at the movies" in popcorn["reason"]
    )
    assert parking["state"] == "sent" and parking["attempts"] == 2
    assert report["found_by_lookup"] == 1 and report["needs_attention"] == 1
    # a refresh confirms what is there and leaves the parked row to a person
    http_env.refresh()
    states = {r["concept"]: r["state"] for r in box.rows()}
    assert states == {
        "SKEW Cinema": "confirmed",
        "SKEW Popcorn": "needs_attention",
        "SKEW Parking": "confirmed",
    }


def test_a_refresh_waits_for_a_write_back_and_gives_up_with_exit_6(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    http_env.refresh()
    before = http_env.warehouse.read_bytes()
    monkeypatch.setattr(outbox_module, "DRAIN_WAIT", 0.5)
    lock = outbox_path(http_env.warehouse).with_name(outbox_path(http_env.warehouse).name + ".lock")
    with lock.open("a") as held:  # a write-back draining, as another process would hold it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, out = http_env.cli("refresh", "--json", "--full")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.WAREHOUSE and report["error"]["class"] == "OutboxBusyError"
    assert "write-back" in report["error"]["message"]
    assert http_env.warehouse.read_bytes() == before  # nothing was read, nothing published
    assert http_env.refresh("--full")["status"] == "ok"  # the lock released, it goes


def test_the_service_clock_is_its_answers_date_header_with_no_extra_request(
    http_env: HttpEnv,
) -> None:
    """The sandbox dates every answer by its own (moved) clock; the write-back's service clock
    reads it from the answers it has anyway, not from one more GET of net worth."""
    before = dt.datetime.fromisoformat(http_env.admin("GET", "/_sandbox/clock")["now"])
    http_env.admin("POST", "/_sandbox/clock/advance", {"hours": 25})
    service_now = dt.datetime.fromisoformat(http_env.admin("GET", "/_sandbox/clock")["now"])
    with _client(http_env) as c:
        answer = httpx.get(f"{http_env.base_url}/v1/settings", headers=_bearer(http_env))
        told = parsedate_to_datetime(answer.headers["date"])
        assert answer.headers.get_list("date") == [answer.headers["date"]]  # one Date, its own
        assert abs(told - service_now) < dt.timedelta(seconds=1)
        assert told - before == dt.timedelta(hours=25)  # the moved clock, not this machine's
        clock = ServiceClock(c, lambda: dt.datetime.now(dt.UTC))
        c.me()
        assert abs(clock.now() - service_now) < dt.timedelta(seconds=5)
        assert clock.requests == 0  # no net worth GET: the answer's Date was enough
        # an error answer is dated too, and a service that sends no Date falls back to as_of
        http_env.admin("POST", "/_sandbox/clock/advance", {"hours": 2})
        with pytest.raises(NotFound):
            c.transaction("00000000-0000-4000-8000-000000000000")
        later = dt.datetime.fromisoformat(http_env.admin("GET", "/_sandbox/clock")["now"])
        assert abs(clock.now() - later) < dt.timedelta(seconds=5)
    with _client(http_env) as bare:
        # before any answer there is no Date to go by: net worth's as_of, one request
        assert bare.service_offset() is None
        clock = ServiceClock(bare, lambda: dt.datetime.now(dt.UTC))
        assert abs(clock.now() - later) < dt.timedelta(seconds=5)
        assert clock.requests == 1


def _bearer(http_env: HttpEnv) -> dict[str, str]:
    return {"Authorization": f"Bearer {http_env.sb.keys['read_only']}"}


@pytest.mark.slow  # three CLI processes and a served sandbox: about 20-40 s on 2 cores
def test_a_full_refresh_and_a_write_back_started_together_both_exit_0_and_post_once(
    tmp_path: Path,
) -> None:
    """Two real processes against one `centsync sandbox serve`: the refresh does not take the
    project's own post for a changing service, and the row is on the service once."""
    keys_file = tmp_path / "keys.json"
    cli = [sys.executable, "-m", "centsync.pipelines.cli"]
    port, keys_out = str(free_port()), str(keys_file)
    serve = subprocess.Popen(
        [
            *cli,
            "sandbox",
            "serve",
            "--port",
            port,
            "--years",
            "1",
            "--no-rate-limit",
            "--keys-out",
            keys_out,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not keys_file.exists():
            assert serve.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        keys = json.loads(keys_file.read_text())
        warehouse = tmp_path / "wh" / "centsync.duckdb"
        environ = {k: v for k, v in os.environ.items() if not k.startswith("CENTSYNC_")}
        environ |= {
            "CENTSYNC_API_BASE_URL": keys["base_url"],
            "CENTSYNC_API_KEY": keys["read_write"],
            "CENTSYNC_WAREHOUSE": str(warehouse),
            "DAGSTER_HOME": str(tmp_path / "dagster"),
        }
        run = functools.partial(subprocess.run, env=environ, capture_output=True, text=True)
        assert run([*cli, "refresh", "--json"]).returncode == 0
        api = httpx.Client(
            base_url=keys["base_url"], headers={"Authorization": f"Bearer {keys['read_write']}"}
        )
        account = next(a for a in api.get("/v1/accounts").json() if a["type"] == "depository")
        day = api.get("/v1/analytics/net-worth").json()["as_of"][:10]
        inbox = warehouse.parent / "inbox"
        inbox.mkdir()
        (inbox / "together.csv").write_text(
            HEADER + f"t-1,{account['name']},{day},-4.40,TOGETHER Lunch,,\n", "utf-8"
        )
        procs = [
            subprocess.Popen(
                [*cli, *args, "--json"],
                env=environ,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for args in (("refresh", "--full"), ("writeback",))
        ]
        outcomes = [(p.wait(timeout=300), p.communicate()) for p in procs]
        for code, (out, err) in outcomes:
            assert code == 0, (out, err[-2000:])
        posted = api.get("/v1/transactions", params={"search": "TOGETHER Lunch"}).json()
        assert posted["total"] == 1, posted
        assert run([*cli, "refresh", "--json"]).returncode == 0
        (state,) = {r["state"] for r in Outbox(outbox_path(warehouse)).rows()}
        assert state == "confirmed"
        api.close()
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.communicate(timeout=30)
