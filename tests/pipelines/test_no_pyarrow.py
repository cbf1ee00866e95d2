"""A household's refresh, its no-change refresh and its report never import pyarrow (0.13-0.16 s
and about 34 MB of every process): the warehouse's frames go through the Arrow C stream
(`warehouse/frames.py`) and the parse takes a small column's timestamps through Polars
(`extract/_frames.py` `ARROW_CAST_ROWS`). A big read still uses Arrow's cast, and says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from centsync.sandbox import Sandbox

pytestmark = pytest.mark.e2e

# the `centsync` console script, with what it imported printed as it exits (it leaves through
# os._exit, past atexit)
PROBE = r"""
import os, sys
exit_now = os._exit
def leave(code):
    print("pyarrow loaded:", "pyarrow" in sys.modules, flush=True)
    exit_now(code)
os._exit = leave
sys.argv = ["centsync", *sys.argv[1:]]
from centsync.pipelines.cli.console import entry
entry()
leave(0)
"""


def _centsync(env: dict[str, str], *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout.splitlines()


# CI runs it (make test-slow): a demo, a refresh and a report in processes without pyarrow,
# about 12 s on 2 cores
@pytest.mark.slow
def test_a_household_refreshes_and_reports_without_pyarrow(
    live_sandbox: tuple[Sandbox, str], tmp_path: Path
) -> None:
    sb, base_url = live_sandbox
    env = {
        "CENTSYNC_API_BASE_URL": base_url,
        "CENTSYNC_API_KEY": sb.keys["read_only"],
        "CENTSYNC_WAREHOUSE": str(tmp_path / "wh" / "centsync.duckdb"),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "PATH": "/usr/bin:/bin",
    }
    first = _centsync(env, "refresh", "--report")
    assert first[-1] == "pyarrow loaded: False", first
    assert any(line.startswith("First sync:") for line in first), first
    again = _centsync(env, "refresh")
    assert again[-1] == "pyarrow loaded: False", again
    assert any(line.startswith("Up to date") for line in again), again
    assert (tmp_path / "wh" / "centsync-report.html").exists()
