"""`centsync ui`: SIGTERM and SIGINT stop the webserver, the daemon and their children."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from centsync.sandbox.server import free_port, run_in_thread
from helpers import make_sandbox

pytestmark = pytest.mark.e2e


@pytest.mark.slow  # CI runs it (make test-slow); about 25-65 s on 2 cores
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_ui_stops_with_every_child_on_a_signal(tmp_path: Path, sig: int, code: int) -> None:
    sb = make_sandbox(rate_limit=False)
    port = free_port()
    with run_in_thread(sb) as base_url:
        env = {
            **os.environ,
            "CENTSYNC_API_BASE_URL": base_url,
            "CENTSYNC_API_KEY": sb.keys["read_only"],
            "CENTSYNC_WAREHOUSE": str(tmp_path / "w.duckdb"),
            "DAGSTER_HOME": str(tmp_path / "dagster"),
        }
        ui = subprocess.Popen(
            [sys.executable, "-m", "centsync.pipelines.cli", "ui", "--port", str(port)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if (
                        httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=2).status_code
                        == 200
                    ):
                        break
                except httpx.HTTPError:
                    time.sleep(0.5)
            else:
                raise AssertionError("the Dagster UI never answered")
            family = psutil.Process(ui.pid).children(recursive=True)
            assert family, "dagster dev started no process"
            ui.send_signal(sig)
            assert ui.wait(timeout=60) == code
            _, alive = psutil.wait_procs(family, timeout=30)
            assert alive == [], [p.cmdline() for p in alive]
        finally:
            if ui.poll() is None:
                ui.kill()
