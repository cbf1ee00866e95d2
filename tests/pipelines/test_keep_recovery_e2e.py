"""Recovery advice that does what it says (issue 43): a warehouse damaged five ways (truncated to
half, its first 8 KiB overwritten, zero bytes, a text file), on the
embedded sandbox and on a served one: `centsync refresh` exits 6 without a traceback and advises
one command; running exactly that command keeps the damaged thing aside (named), builds a new
warehouse that `status` and a query read, and leaves the outbox's requests as they were."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from centsync.pipelines.cli.main import main
from centsync.warehouse.outbox import Outbox, outbox_path

from .conftest import serving
from .test_sql_cli import shared_demo

pytestmark = pytest.mark.e2e

# (a folder at the path is a set-up mistake, exit 2 naming CENTSYNC_WAREHOUSE: test_setup_mistakes)
KINDS = ("half", "head8k", "zero", "text")
# one kind a mode in the fast suite; every pair under RUN_SLOW
FAST = {("embedded", "half"), ("served", "head8k")}


def damage(warehouse: Path, kind: str) -> None:
    size = warehouse.stat().st_size
    if kind == "half":
        os.truncate(warehouse, size // 2)
    elif kind == "head8k":
        with warehouse.open("r+b") as f:
            f.write(b"\0" * 8192)
    elif kind == "zero":
        warehouse.write_bytes(b"")
    elif kind == "folder":
        warehouse.unlink()
        warehouse.mkdir()
        (warehouse / "something.txt").write_text("a person's file\n")
    elif kind == "text":
        warehouse.write_text("not a warehouse\n" * 100)


def an_outbox(warehouse: Path) -> list[dict[str, object]]:
    """An outbox holding one request (rejected before sending: no refresh confirms or sends
    it), as a write-back leaves it; its rows."""
    box = Outbox(outbox_path(warehouse))
    plan = {
        "idempotency_key": "keep-test-1",
        "body_sha256": "0" * 64,
        "operation": "create",
        "method": "POST",
        "path": "/v1/transactions",
        "body": '{"amount": -1234}',
        "state": "rejected",
        "reason": "a test row",
        "source": "csv",
        "source_name": "inbox/test.csv",
        "source_line": 2,
        "event_ref": "keep-1",
    }
    box.enqueue([plan], dt.datetime(2026, 11, 1, tzinfo=dt.UTC))
    return box.rows()


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def cases() -> list[object]:
    return [
        pytest.param(mode, kind, marks=[] if (mode, kind) in FAST else [pytest.mark.slow])
        for mode in ("embedded", "served")
        for kind in KINDS
    ]


@pytest.mark.parametrize(("mode", "kind"), cases())
def test_the_advised_command_recovers_every_damaged_warehouse(
    mode: str,
    kind: str,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if mode == "served":
        with serving(tmp_path, monkeypatch) as env:
            assert cli("refresh")[0] == 0
            _damage_and_recover(env.warehouse, kind)
        return
    for k in ("CENTSYNC_API_BASE_URL", "CENTSYNC_API_KEY", "XDG_DATA_HOME"):
        monkeypatch.delenv(k, raising=False)
    warehouse = tmp_path / "data" / "centsync.duckdb"
    warehouse.parent.mkdir()
    shutil.copyfile(
        shared_demo(tmp_path_factory, os.environ.get("PYTEST_XDIST_WORKER", "master")), warehouse
    )
    monkeypatch.setenv("CENTSYNC_WAREHOUSE", str(warehouse))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    _damage_and_recover(warehouse, kind)


def _damage_and_recover(warehouse: Path, kind: str) -> None:
    requests = an_outbox(warehouse)
    damage(warehouse, kind)
    code, out = cli("refresh")
    assert code == 6, out
    assert "Traceback" not in out
    advised = re.findall(r"run `(centsync [^`]+)`", out)
    assert advised, out
    command = advised[0]
    # the advice holds for every refresh until it is followed (it does not loop on a state the
    # failing refresh changed): the same command, again
    code, again = cli("refresh")
    assert code == 6 or command == "centsync refresh", again
    assert command in again or command == "centsync refresh"
    code, rebuilt = cli(*command.split()[1:])
    assert code == 0, rebuilt
    assert "Traceback" not in rebuilt
    kept = list(warehouse.parent.glob(f"{warehouse.name}.damaged-*"))
    assert len(kept) == 1, sorted(p.name for p in warehouse.parent.iterdir())
    if kind == "folder":  # what was in its place is kept whole
        assert (kept[0] / "something.txt").read_text() == "a person's file\n"
    else:
        assert kept[0].is_file()
    assert str(kept[0]) in out + again + rebuilt  # named where it is
    # a working warehouse, and the outbox's requests as they were
    assert warehouse.is_file()
    assert cli("status")[0] == 0
    code, counted = cli("sql", "SELECT count(*) AS n FROM core.transactions", "--format", "csv")
    assert code == 0 and int(counted.split()[-1]) > 1000, counted
    assert Outbox(outbox_path(warehouse)).rows() == requests
