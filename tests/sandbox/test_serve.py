"""`centsync sandbox serve` as a user runs it: a real process, real loopback HTTP, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from centsync.sandbox.server import free_port

pytestmark = pytest.mark.e2e


def test_serve_writes_keys_once_ready_answers_and_stops_on_sigterm(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "centsync.pipelines.cli",
            "sandbox",
            "serve",
            "--port",
            str(port),
            "--seed",
            "3",
            "--years",
            "1",
            "--minute-limit",
            "50",
            "--keys-out",
            str(keys_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not keys_file.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert stat.S_IMODE(os.stat(keys_file).st_mode) == 0o600
        keys = json.loads(keys_file.read_text())
        assert set(keys) == {"base_url", "read_only", "read_write", "expired", "admin_token"}
        assert keys["base_url"] == f"http://127.0.0.1:{port}"
        # The file appears only once the server accepts connections: the first request works.
        with httpx.Client(
            base_url=keys["base_url"], headers={"Authorization": f"Bearer {keys['read_only']}"}
        ) as c:
            me = c.get("/v1/me")
            assert me.status_code == 200 and me.json()["rate_limit"]["minute_limit"] == 50
            page = c.get("/v1/transactions", params={"limit": 200}).json()
            assert len(page["data"]) == 200
            assert c.get("/openapi.json").json()["openapi"].startswith("3.")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Sandbox serving" in out
    for name in ("read_only", "read_write", "expired"):
        assert keys[name] not in out + err
