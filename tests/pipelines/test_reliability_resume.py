"""A first sync larger than one hour's allowance keeps each batch it read and resumes (issue
25): the CLI against the sandbox, with a key whose hourly allowance runs out mid-read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from centsync.pipelines import failures as errors
from centsync.sandbox.server import run_in_thread
from helpers import make_sandbox

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e

ROWS = 40_000  # 200 pages: batches of 75 pages at the default 300 requests a minute
HOUR_LIMIT = 185  # the opening requests and some 160 pages: one batch read whole, not the ledger


@pytest.fixture
def paced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpEnv]:
    """A sandbox that enforces its rate limits, over loopback."""
    sb = make_sandbox(transactions=ROWS)
    with run_in_thread(sb) as base_url:
        yield HttpEnv(sb, base_url, tmp_path, monkeypatch)


@pytest.mark.slow  # CI runs it (make test-slow); about 25-65 s on 2 cores
def test_a_first_sync_stopped_by_the_hourly_allowance_keeps_its_rows_and_resumes(
    paced: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = paced
    small = env.admin("POST", "/_sandbox/keys", {"scopes": ["data.read"], "hour_limit": HOUR_LIMIT})
    monkeypatch.setenv("CENTSYNC_API_KEY", small["key"])
    monkeypatch.setenv("CENTSYNC_MAX_WAIT", "1")
    code, out = env.cli("refresh", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.SERVICE and report["error"]["class"] == "RateLimited", out
    assert "run again after" in report["error"]["message"]
    (kept,) = env.sql("SELECT count(*) FROM core.transactions")[0]
    total = len(env.sb.state()["transactions"])
    assert 0 < kept < total, (kept, total)  # the batches read are there, not nothing
    assert env.sql("SELECT status FROM ops.refreshes") == [("interrupted",)]
    # the next hour (here: a key with its allowance left) resumes and finishes
    monkeypatch.setenv("CENTSYNC_API_KEY", env.sb.keys["read_only"])
    done = env.refresh()
    assert done["status"] == "ok" and done["verdict"] == "agree"
    env.assert_exact()
