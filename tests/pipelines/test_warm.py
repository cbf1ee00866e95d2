"""`centsync warm`: a refresh from the console script runs in a child of the warm process, with
its own environment, folder, output, exit code and Ctrl-C; a command the warm process does not
match runs itself. Real processes: the console script, the warm process, a loopback sandbox."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from centsync.pipelines import failures as errors
from centsync.sandbox.server import run_in_thread
from helpers import make_sandbox, wait_for_reading

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


class Warm:
    """A running `centsync warm` (its output read as it comes) and this user's runtime folder."""

    def __init__(self, runtime: Path, *args: str) -> None:
        self.runtime = runtime
        self.env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
        self.proc = subprocess.Popen(
            [_centsync(), "warm", *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.seen = 0  # lines `wait_for` has looked at
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_for("warm: ready")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float = 60) -> str:
        """The first line not looked at yet that holds `text`, waiting for it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while self.seen < len(self.lines):
                line = self.lines[self.seen]
                self.seen += 1
                if text in line:
                    return line
            if self.proc.poll() is not None and self.seen == len(self.lines):
                break
            time.sleep(0.05)
        raise AssertionError(f"`centsync warm` never printed {text!r}: {''.join(self.lines)}")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


def _centsync() -> str:
    found = shutil.which("centsync", path=str(Path(sys.executable).parent))
    assert found, "the console script is installed beside this interpreter"
    return found


@pytest.fixture(scope="module")
def warm() -> Iterator[Warm]:
    # a short folder: a Unix socket's path holds at most 107 bytes
    runtime = Path(tempfile.mkdtemp(prefix="cw", dir="/tmp"))
    process = Warm(runtime)
    try:
        yield process
    finally:
        if process.proc.poll() is None:
            process.stop()
        shutil.rmtree(runtime, ignore_errors=True)


def _refresh(
    warm: Warm, env: HttpEnv, *args: str, extra: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        [_centsync(), "refresh", "--json", *args],
        env={**warm.env, **env.env, **(extra or {})},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=env.tmp,
    )
    lines = done.stdout.strip().splitlines()
    return done.returncode, json.loads(lines[-1]) if lines else {}, done.stderr


def test_a_refresh_runs_in_a_child_of_the_warm_process_and_lands_exactly(
    warm: Warm, http_env: HttpEnv
) -> None:
    code, report, err = _refresh(warm, http_env)
    assert code == 0 and report["verdict"] == "agree", err[-2000:]
    line = warm.wait_for("warm: centsync refresh --json in process")
    child = int(line.split()[-1])
    assert child != os.getpid()
    http_env.assert_exact()
    # the same command again: nothing changed, still a recorded run, in another child
    code, again, err = _refresh(warm, http_env)
    assert code == 0 and again["verdict"] == "agree" and again["run_id"] != report["run_id"]
    assert int(warm.wait_for("warm: centsync refresh").split()[-1]) != child


def test_a_failure_s_exit_code_and_message_come_back(warm: Warm, http_env: HttpEnv) -> None:
    code, report, err = _refresh(warm, http_env, extra={"CENTSYNC_API_KEY": "pfd_live_not_a_key"})
    assert code == errors.AUTH and report["exit_code"] == errors.AUTH
    assert "the service refused the API key" in err and "pfd_live_not_a_key" not in err
    warm.wait_for("warm: centsync refresh --json in process")


def test_other_import_time_settings_or_warm_off_run_the_command_itself(
    warm: Warm, http_env: HttpEnv
) -> None:
    before = len(warm.lines)
    for extra in ({"POLARS_MAX_THREADS": "1"}, {"CENTSYNC_WARM": "0"}):
        code, report, err = _refresh(warm, http_env, extra=extra)
        assert code == 0 and report["verdict"] == "agree", err[-2000:]
    code, report, err = _refresh(warm, http_env, "--all")  # starts itself again with jemalloc
    time.sleep(0.5)  # a line the warm process would print has been printed by now
    assert warm.proc.poll() is None and len(warm.lines) == before


def test_ctrl_c_reaches_the_child_and_the_next_refresh_resumes(
    warm: Warm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = make_sandbox(rate_limit=False, transactions=20_000, years=3)
    with run_in_thread(sb) as base_url:
        env = HttpEnv(sb, base_url, tmp_path, monkeypatch)
        sb.service.faults.latency_ms = 40
        proc = subprocess.Popen(
            [_centsync(), "refresh", "--json"],
            env={**warm.env, **env.env, "CENTSYNC_PROGRESS": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for_reading(proc, then=0.5)  # its progress lines come from the child
        warm.wait_for("warm: centsync refresh --json in process")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == errors.INTERRUPTED, err[-3000:]
        assert json.loads(out.strip().splitlines()[-1])["status"] == "interrupted"
        sb.service.faults.latency_ms = 0
        code, report, err = _refresh(warm, env)
        assert code == 0 and report["verdict"] == "agree", err[-2000:]
        env.assert_exact()


def test_a_second_warm_process_is_refused_and_a_stopped_one_removes_its_socket() -> None:
    runtime = Path(tempfile.mkdtemp(prefix="cw", dir="/tmp"))  # its own: the module's runs on
    try:
        first = Warm(runtime)
        (socket_file,) = (runtime / "centsync").glob("warm-*.sock")
        second = subprocess.run(
            [_centsync(), "warm"], env=first.env, capture_output=True, text=True, timeout=120
        )
        assert second.returncode == errors.USAGE
        assert "already runs" in second.stderr and socket_file.exists()
        assert first.stop() == 0
        assert not socket_file.exists()
        assert first.wait_for("warm: stopped")
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
        shutil.rmtree(runtime, ignore_errors=True)


def test_an_idle_warm_process_stops_a_while_after_the_last_refresh(http_env: HttpEnv) -> None:
    runtime = Path(tempfile.mkdtemp(prefix="cw", dir="/tmp"))
    idle = 4.0
    try:
        warm = Warm(runtime, "--idle", "4s")
        assert any(
            "ready" in line and "stops after 4s with no refresh" in line for line in warm.lines
        )
        (socket_file,) = (runtime / "centsync").glob("warm-*.sock")
        code, report, err = _refresh(warm, http_env)
        ended = time.monotonic()
        assert code == 0 and report["verdict"] == "agree", err[-2000:]
        assert warm.wait_for("centsync refresh")  # it ran in a child of the warm process
        assert socket_file.exists()  # the idle clock starts again when a refresh ends
        assert warm.wait_for("warm: no refresh for 4s: stopping", timeout=60)
        assert time.monotonic() - ended >= idle - 0.5
        assert warm.proc.wait(timeout=30) == 0
        assert not socket_file.exists()
        # a refresh now finds no warm process and runs itself
        code, report, err = _refresh(warm, http_env)
        assert code == 0 and report["verdict"] == "agree", err[-2000:]
    finally:
        if warm.proc.poll() is None:
            warm.proc.kill()
        shutil.rmtree(runtime, ignore_errors=True)


def test_idle_takes_a_length_of_time_or_says_how_to_write_one() -> None:
    for bad in ("0", "-5m", "soon", "1.5x", "infh"):
        done = subprocess.run(
            [_centsync(), "warm", "--idle", bad], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == errors.USAGE, bad
        assert "write it as 90s, 30m or 2h" in done.stderr, bad
