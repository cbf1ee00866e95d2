"""Interrupts: SIGINT and SIGTERM keep what a refresh read, say so, and the next one resumes;
SIGKILL loses no published data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

import centsync.pipelines.refresh.plan as refresh_module
from centsync.extract import ApiClient
from centsync.extract._frames import PageChunk
from centsync.pipelines import failures as errors
from centsync.pipelines.refresh.plan import FIRST_SYNC_RESUMED
from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
from centsync.sandbox.server import run_in_thread
from helpers import assert_windows_kept, make_sandbox, months_kept, wait_for_reading

from .conftest import HttpEnv

# An interrupted read must leave nothing pending on the client's loop: a coroutine finalised
# after the loop closed (a reader's queue waiter) would be reported here as an error.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning"),
]


def _warehouse_state(path: Path) -> tuple[str, int, int]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        (status,) = con.execute(
            "SELECT status FROM ops.refreshes ORDER BY started_at DESC LIMIT 1"
        ).fetchall()[0]
        rows, months = con.execute(
            "SELECT count(*), count(DISTINCT month) FROM core.transactions"
        ).fetchall()[0]
    finally:
        con.close()
    return str(status), int(rows), int(months)


# one point in make test; the others in CI (make test-slow): 4-5 s each on 2 cores
@pytest.mark.parametrize(
    "after",
    [pytest.param(0.6, marks=pytest.mark.slow), 1.2, pytest.param(2.0, marks=pytest.mark.slow)],
)
def test_a_first_sync_interrupted_anywhere_keeps_every_page_read_and_reads_on_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: float
) -> None:
    monkeypatch.setattr(refresh_module, "STREAM_BATCH_PAGES", 10)  # small batches: many points
    _stop_and_read_on(tmp_path, after)


def test_a_first_sync_stopped_with_pages_waiting_compressed_reads_on_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows of about 5,000 rows, read 2 pages ahead as usual: the pages past those that the
    reader requests while a window commits wait compressed (extract PageChunk.pack). Stopped
    with some waiting, the warehouse keeps exactly the pages taken, and the next refresh
    reads on from the next one."""
    monkeypatch.setattr(refresh_module, "STREAM_BATCH_PAGES", 10)
    monkeypatch.setattr(refresh_module, "WINDOW_ROWS", 5_000)
    monkeypatch.setattr("centsync.extract._reader.READ_AHEAD_PAGES", 2)
    packed = []
    pack = PageChunk.pack

    def counted(chunk: PageChunk) -> PageChunk:
        packed.append(chunk)
        return pack(chunk)

    monkeypatch.setattr(PageChunk, "pack", counted)
    _stop_and_read_on(tmp_path, 1.2)
    assert packed, "no page waited compressed: the test no longer covers it"


def _stop_and_read_on(tmp_path: Path, after: float) -> None:
    """A first sync of 30,000 rows stopped by Ctrl-C `after` seconds in, then read on."""
    sb = make_sandbox(rate_limit=False, transactions=30_000, years=4)
    wh = tmp_path / "wh.duckdb"
    with run_in_thread(sb) as base_url:
        sb.service.faults.latency_ms = 25
        # Ctrl-C as a terminal delivers it (a pytest-xdist worker ignores SIGINT otherwise)
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        timer = threading.Timer(after, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with ApiClient(base_url, sb.keys["read_only"], max_window_rows=10**12) as client:
                run_refresh(client, str(wh), RefreshOptions())
            interrupted = False
        except KeyboardInterrupt:
            interrupted = True
        finally:
            timer.cancel()
            signal.signal(signal.SIGINT, previous)
        assert interrupted, "the refresh finished before the interrupt: raise the latency"
        status, rows, _ = _warehouse_state(wh)
        assert status == "interrupted"
        # every page staged is kept: the windows committed whole, then the newest months of
        # the one it stopped in, the oldest of those partial (issue 43)
        state = sb.state()
        kept = months_kept(wh)
        server: dict[str, int] = {}
        for t in state["transactions"]:
            server[t["booked_at"][:7]] = server.get(t["booked_at"][:7], 0) + 1
        assert_windows_kept(kept, server)
        sb.service.faults.latency_ms = 0
        with ApiClient(base_url, sb.keys["read_only"], max_window_rows=10**12) as client:
            summary = run_refresh(client, str(wh), RefreshOptions())
        assert summary.transactions == len(state["transactions"])
        assert summary.verdict == "agree"
        # stopped in the read, it reads on from the page after the last one kept: every row
        # it reads is one the stopped refresh did not keep, and no more (stopped after the
        # read, the next refresh is an incremental one)
        if rows < len(state["transactions"]):
            assert summary.mode == "full"
            assert summary.reason == FIRST_SYNC_RESUMED or not rows  # stopped before a page
            read = sum(m["rows"] for m in summary.months_reread)
            assert read == len(state["transactions"]) - rows


def _cli_refresh(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "centsync.pipelines.cli", "refresh", "--json"],
        env={**os.environ, **env, "CENTSYNC_PROGRESS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# Ctrl-C in make test; SIGTERM in CI (make test-slow): about 10 s each on 2 cores
@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGINT, 130), pytest.param(signal.SIGTERM, 143, marks=pytest.mark.slow)],
)
def test_the_cli_stops_cleanly_on_sigint_and_sigterm_and_the_next_refresh_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: int, code: int
) -> None:
    sb = make_sandbox(rate_limit=False, transactions=60_000, years=4)
    with run_in_thread(sb) as base_url:
        env = HttpEnv(sb, base_url, tmp_path, monkeypatch)
        sb.service.faults.latency_ms = 40
        proc = _cli_refresh(env.env)
        wait_for_reading(proc, then=0.8)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == code, err[-3000:]
        report = json.loads(out.strip().splitlines()[-1])
        assert report["status"] == "interrupted" and report["exit_code"] == code
        assert "Traceback" not in err.split("Error: ")[-1]
        status, _, _ = _warehouse_state(env.warehouse)
        assert status == "interrupted"
        sb.service.faults.latency_ms = 0
        meta = env.refresh()
        assert meta["verdict"] == "agree"
        env.assert_exact()


@pytest.mark.slow  # CI runs it (make test-slow); about 25-65 s on 2 cores
def test_sigkill_at_several_points_never_loses_published_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = make_sandbox(rate_limit=False, transactions=20_000, years=3)
    with run_in_thread(sb) as base_url:
        env = HttpEnv(sb, base_url, tmp_path, monkeypatch)
        env.refresh()
        before = _warehouse_state(env.warehouse)[1]
        sb.service.faults.latency_ms = 30
        for delay in (0.2, 0.8, 1.6):
            proc = subprocess.Popen(
                [sys.executable, "-m", "centsync.pipelines.cli", "refresh", "--full"],
                # its progress lines tell when it reads (stderr is a pipe: asked for)
                env={**os.environ, **env.env, "CENTSYNC_PROGRESS": "1"},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            wait_for_reading(proc, then=0.8)
            time.sleep(delay)
            proc.kill()
            proc.wait()
            # the published file is always a whole warehouse with every row of the last one
            assert _warehouse_state(env.warehouse)[1] == before
        sb.service.faults.latency_ms = 0
        meta = env.refresh()
        assert meta["verdict"] == "agree" and meta["rows"]["total"] == before
        env.assert_exact()
        assert errors.INTERRUPTED == 130
