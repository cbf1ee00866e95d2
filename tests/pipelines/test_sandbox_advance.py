"""`centsync sandbox advance --days N`: the embedded sandbox's clock moves on between commands, its
scheduled bank syncs bring new transactions, and the next refresh lands them (through the real
CLI, the embedded sandbox and a warehouse in a temp folder)."""

from __future__ import annotations

import fcntl
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from centsync.pipelines.cli.main import main
from centsync.sandbox import SandboxConfig
from centsync.sandbox.state import load

pytestmark = pytest.mark.e2e


@pytest.fixture
def embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The embedded sandbox (no service configured) with a warehouse in a temp folder."""
    for name in ("CENTSYNC_API_BASE_URL", "CENTSYNC_API_KEY", "CENTSYNC_SANDBOX_STATE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CENTSYNC_WAREHOUSE", str(tmp_path / "w.duckdb"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    return tmp_path


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _refresh() -> dict:
    code, out, err = _cli("refresh", "--json")
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_a_day_passes_and_the_next_refresh_lands_its_transactions(embedded: Path) -> None:
    first = _refresh()
    assert first["verdict"] == "agree"
    assert _refresh()["rows"]["changed"] == 0  # the clock stands still between commands
    state = embedded / "w.sandbox"
    before = load(state, SandboxConfig(seed=1))
    assert before is not None
    code, out, err = _cli("sandbox", "advance", "--days", "2")
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
    code, out, err = _cli("sandbox", "advance", "--days", "1")
    assert "now at" in out
    assert code == 0 and "starts afresh" in err and state.exists(), err
    kept = state.read_bytes()
    with open(embedded / "w.sandbox.lock", "a") as lock:  # another command (a daemon) holds it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, _, err = _cli("sandbox", "advance", "--days", "1")
    assert code == 6 and "in use" in err and "stop the other centsync command" in err
    assert state.read_bytes() == kept  # nothing moved
    for bad in ("0", "-1", "1.5"):
        code, _, err = _cli("sandbox", "advance", "--days", bad)
        assert code == 2 and "--days" in err
