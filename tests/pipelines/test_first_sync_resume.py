"""A first sync bigger than the hourly allowance keeps every page it read and reads on from
there (issue 43, "an interrupted first sync keeps nothing"): the CLI against the sandbox over
loopback, with a key allowed 120 requests an hour, the sandbox's clock moved on an hour
between the runs (its rate windows follow it)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from centsync.pipelines import failures as errors
from centsync.pipelines.refresh.read import RESUME_KEY
from centsync.sandbox.server import run_in_thread
from helpers import make_sandbox

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e

ROWS = 50_000  # 250 pages of 200: more than two hours of a 120-an-hour key
HOUR_LIMIT = 120
PAGE = 200
# requests a stopped run spends before its first page: /v1/me, settings, net worth and the
# list's total; every other request is a page of the ledger
OPENING = 4


@pytest.fixture
def paced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpEnv]:
    """A sandbox that enforces its rate limits, over loopback."""
    sb = make_sandbox(transactions=ROWS, years=10)
    with run_in_thread(sb) as base_url:
        yield HttpEnv(sb, base_url, tmp_path, monkeypatch)


def _hour_requests(env: HttpEnv) -> int:
    """The requests the service counted for the small key in its current hourly window."""
    (key,) = [k for k in env.sb.service.keys if k.name == "hourly"]
    limit, left = env.sb.service.remaining(key)[2:]
    return limit - left


def _runs_until_done(env: HttpEnv) -> tuple[list[tuple[int, int]], dict]:
    """Refresh, and move the sandbox on an hour after each run the allowance stopped, until
    one finishes: ([(rows kept, requests spent) of each stopped run], the last report)."""
    stopped: list[tuple[int, int]] = []
    for _ in range(6):
        code, out = env.cli("refresh", "--json")
        report = json.loads(out.strip().splitlines()[-1])
        if code == 0:
            return stopped, report
        assert code == errors.SERVICE and report["error"]["class"] == "RateLimited", out
        assert "run again after" in report["error"]["message"]
        (kept,) = env.sql("SELECT count(*) FROM core.transactions")[0]
        stopped.append((kept, _hour_requests(env)))
        env.admin("POST", "/_sandbox/clock/advance", {"hours": 1})
    raise AssertionError(f"no refresh finished: {stopped}")


@pytest.mark.slow  # about 40-60 s on 2 cores
def test_a_first_sync_bigger_than_the_hourly_allowance_keeps_every_page_and_reads_on(
    paced: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = paced
    small = env.admin(
        "POST",
        "/_sandbox/keys",
        {"scopes": ["data.read"], "hour_limit": HOUR_LIMIT, "name": "hourly"},
    )
    monkeypatch.setenv("CENTSYNC_API_KEY", small["key"])
    monkeypatch.setenv("CENTSYNC_MAX_WAIT", "1")
    total = len(env.sb.state()["transactions"])
    stopped, done = _runs_until_done(env)
    assert len(stopped) == 2, stopped  # 250 pages: two hours stopped, the third finishes
    before = 0
    for kept, spent in stopped:
        # every page the run read is kept: all its requests but the opening ones, whole pages
        assert spent == HOUR_LIMIT, stopped
        assert kept - before == (spent - OPENING) * PAGE, stopped
        before = kept
    # the last run reads only the pages not kept (plus the list's total), none twice
    list_requests = done["requests"]["by_endpoint"]["GET /v1/transactions"]
    assert list_requests == math.ceil((total - before) / PAGE) + 1, done["requests"]
    pages = sum(spent - OPENING for _, spent in stopped) + list_requests - 1
    assert pages == math.ceil(total / PAGE)
    assert done["status"] == "ok" and done["verdict"] == "agree", done
    assert done["reason"] == "first sync, read on from where it stopped"
    env.assert_exact()
    resume = "SELECT count(*) FROM ops.meta WHERE key = ? AND value IS NOT NULL"
    assert env.sql(resume, [RESUME_KEY]) == [(0,)]  # nothing left to read on
    # a refresh after it is an ordinary incremental one
    assert env.refresh()["mode"] == "incremental"


@pytest.mark.slow  # about 30-50 s on 2 cores
def test_a_stopped_first_sync_whose_window_changed_reads_that_window_again(
    paced: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages past a stop are only where they were while nothing changed: a window whose total
    moved since is read again from its first page, and the result is still exact."""
    env = paced
    small = env.admin(
        "POST",
        "/_sandbox/keys",
        {"scopes": ["data.read"], "hour_limit": HOUR_LIMIT, "name": "hourly"},
    )
    monkeypatch.setenv("CENTSYNC_API_KEY", small["key"])
    monkeypatch.setenv("CENTSYNC_MAX_WAIT", "1")
    code, out = env.cli("refresh", "--json")
    assert code == errors.SERVICE, out
    # a row lands on the service between the runs: the window's pages shift
    account = env.sb.state()["accounts"][0]["id"]
    body = {"account_id": account, "amount": -1234, "concept": "between", "booked_at": "2020-06-15"}
    created = httpx.post(
        f"{env.base_url}/v1/transactions",
        json=body,
        headers={
            "Authorization": f"Bearer {env.sb.keys['read_write']}",
            "Idempotency-Key": "between-the-runs",
        },
    )
    assert created.status_code == 201, created.text
    env.admin("POST", "/_sandbox/clock/advance", {"hours": 1})
    monkeypatch.setenv("CENTSYNC_API_KEY", env.sb.keys["read_only"])  # the allowance of 300
    done = env.refresh()
    assert done["status"] == "ok" and done["verdict"] == "agree", done
    assert done["reason"] == "first sync, read on from where it stopped", done
    assert done["rereads"] == 1, done  # the pass past the stop was void: read from page 1
    env.assert_exact()
