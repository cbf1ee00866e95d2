"""A sandbox that remembers: the embedded sandbox's write-backs survive the next command, a
second demo posts nothing and leaves one copy of each receipt, `sandbox reset` starts over, `sandbox advance` lets days pass,
and `sandbox serve --state` keeps a served one's."""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import httpx
import pytest

from centsync.sandbox import SandboxConfig
from centsync.sandbox.server import free_port
from centsync.sandbox.service import Service
from centsync.sandbox.state import SandboxStateError, load, save
from helpers import make_sandbox

from .conftest import cli

pytestmark = pytest.mark.e2e

RECEIPTS = "cash-receipts.csv"


def _refresh() -> dict:
    code, out, err = cli("refresh", "--json")
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _copies(state: Path | None, concepts: list[str]) -> list[int]:
    """How many transactions of each concept the saved sandbox (None: a new one) holds."""
    service = load(state, SandboxConfig(seed=1)) if state else Service(SandboxConfig(seed=1))
    assert service is not None
    return [sum(t.concept == c for t in service.ledger.rows) for c in concepts]


def test_write_backs_survive_the_next_command_and_reset_starts_over(embedded: Path) -> None:
    first = _refresh()["rows"]["total"]
    example = resources.files("centsync.pipelines").joinpath("examples", RECEIPTS)
    (embedded / "inbox").mkdir()
    (embedded / "inbox" / RECEIPTS).write_bytes(example.read_bytes())
    code, _, err = cli("writeback")
    assert code == 0, err
    # a new command, a new embedded sandbox: the five receipts are still on it
    assert _refresh()["rows"]["total"] == first + 5
    concepts = [row["concept"] for row in csv.DictReader(io.StringIO(example.read_text()))]
    # one copy of each receipt (the file has two bus tickets of the same price, on purpose)
    before = _copies(None, concepts)
    want = [n + concepts.count(c) for n, c in zip(before, concepts, strict=True)]
    assert _copies(embedded / "w.sandbox", concepts) == want
    assert (embedded / "w.sandbox").stat().st_mode & 0o077 == 0  # it holds the sandbox's keys
    code, out, _ = cli("sandbox", "reset")
    assert code == 0 and "Deleted" in out and not (embedded / "w.sandbox").exists()
    assert _refresh()["rows"]["total"] == first


def test_a_damaged_or_foreign_state_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.sandbox"
    path.write_bytes(b"not a pickle")
    with pytest.raises(SandboxStateError, match="sandbox reset"):
        load(path, SandboxConfig(seed=1))
    save(make_sandbox().service, path)
    with pytest.raises(SandboxStateError, match="seed 7, not 2"):
        load(path, SandboxConfig(seed=2))
    assert load(tmp_path / "none", SandboxConfig(seed=1)) is None


def test_a_damaged_state_file_exits_6_and_is_kept(embedded: Path) -> None:
    (embedded / "w.sandbox").write_bytes(b"\x80garbage")
    code, _, err = cli("refresh")
    assert code == 6 and "sandbox reset" in err
    assert (embedded / "w.sandbox").read_bytes() == b"\x80garbage"  # nothing lost


def test_a_reset_while_another_command_holds_the_state_exits_6_and_deletes_nothing(
    embedded: Path,
) -> None:

    state = embedded / "w.sandbox"
    state.write_bytes(b"kept")
    with open(embedded / "w.sandbox.lock", "a") as lock:  # another command (a daemon) holds it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, _, err = cli("sandbox", "reset")
    assert code == 6 and "in use" in err and "stop the other centsync command" in err
    assert state.read_bytes() == b"kept"  # nothing lost


def _serve(state: Path, keys: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "centsync.pipelines.cli", "sandbox", "serve"),
            *("--port", str(port), "--keys-out", str(keys), "--state", str(state)),
            "--no-rate-limit",
        ],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        if keys.exists():
            return proc
        assert proc.poll() is None, "the sandbox stopped before serving"
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the sandbox did not serve")


def test_sandbox_serve_state_keeps_a_served_sandbox(tmp_path: Path) -> None:
    state, port = tmp_path / "served.sandbox", free_port()
    proc = _serve(state, tmp_path / "k1.json", port)
    keys = json.loads((tmp_path / "k1.json").read_text())
    auth = {"Authorization": f"Bearer {keys['read_write']}"}
    with httpx.Client(base_url=keys["base_url"], headers=auth) as c:
        account = c.get("/v1/accounts").json()[0]["id"]
        body = {"account_id": account, "concept": "kept", "amount": -100, "booked_at": "2026-11-02"}
        posted = c.post("/v1/transactions", json=body, headers={"Idempotency-Key": "k-1"})
        assert posted.status_code == 201, posted.text
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == 0 and state.exists()
    proc = _serve(state, tmp_path / "k2.json", port)
    try:
        keys = json.loads((tmp_path / "k2.json").read_text())
        auth = {"Authorization": f"Bearer {keys['read_write']}"}
        with httpx.Client(base_url=keys["base_url"], headers=auth) as c:
            got = c.get(f"/v1/transactions/{posted.json()['id']}")
            assert got.status_code == 200 and got.json()["concept"] == "kept"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.parametrize("dialect", ["contract", "camel", "tagged"])
def test_the_tour_reads_each_dialect_as_a_refresh_would(
    embedded: Path, monkeypatch: pytest.MonkeyPatch, dialect: str
) -> None:
    """`centsync tour` on the embedded sandbox: its net worth learned from the accounts whatever
    the answer's names; a spending answer in a shape of its own said to be one, never a crash."""
    monkeypatch.setenv("CENTSYNC_SANDBOX_DIALECT", dialect)
    code, out, err = cli("tour")
    assert code == 0, err
    assert "Net worth: " in out and "(assets " in out
    assert ("Spending by category, " in out) == (dialect == "contract")


# ---- `sandbox advance --days N`: a day passes on the default target ----
def test_a_day_passes_and_the_next_refresh_lands_its_transactions(embedded: Path) -> None:
    first = _refresh()
    assert first["verdict"] == "agree"
    assert _refresh()["rows"]["changed"] == 0  # the clock stands still between commands
    state = embedded / "w.sandbox"
    before = load(state, SandboxConfig(seed=1))
    assert before is not None
    code, out, err = cli("sandbox", "advance", "--days", "2")
    assert code == 0, err
    said = re.fullmatch(
        r"The embedded sandbox is now at (\d{4}-\d\d-\d\d): (\d+) bank syncs? brought (\d+) new "
        r"transactions?; `centsync refresh` brings them in\.\n",
        out,
    )
    assert said, out
    after = load(state, SandboxConfig(seed=1))
    assert after is not None
    assert after.now_ms == before.now_ms + 2 * 86_400_000  # kept in the state file
    new = {t.id for t in after.ledger.rows} - {t.id for t in before.ledger.rows}
    assert int(said.group(2)) > 0 and int(said.group(3)) == len(new) > 0
    second = _refresh()
    assert second["rows"]["changed"] > 0 and second["verdict"] == "agree"
    assert second["rows"]["total"] == len(after.ledger.rows)


def test_advance_starts_afresh_without_state_and_refuses_a_held_one(embedded: Path) -> None:
    state = embedded / "w.sandbox"
    code, out, err = cli("sandbox", "advance", "--days", "1")
    assert "now at" in out
    assert code == 0 and "starts afresh" in err and state.exists(), err
    kept = state.read_bytes()
    with open(embedded / "w.sandbox.lock", "a") as lock:  # another command (a daemon) holds it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, _, err = cli("sandbox", "advance", "--days", "1")
    assert code == 6 and "in use" in err and "stop the other centsync command" in err
    assert state.read_bytes() == kept  # nothing moved
    for bad in ("0", "-1", "1.5"):
        code, _, err = cli("sandbox", "advance", "--days", bad)
        assert code == 2 and "--days" in err


def test_the_embedded_server_stops_on_its_own_after_the_command(embedded: Path) -> None:
    """The embedded sandbox's server is told to stop when the command is done with it, and its
    thread closes its port on its own (the command does not wait for uvicorn's shutdown)."""
    import threading

    before = {t for t in threading.enumerate() if t.name == "sandbox-server"}
    _refresh()
    started = [t for t in threading.enumerate() if t.name == "sandbox-server" and t not in before]
    for thread in started:
        thread.join(timeout=10)
        assert not thread.is_alive()
    assert not [t for t in threading.enumerate() if t.name == "sandbox-server" and t not in before]
