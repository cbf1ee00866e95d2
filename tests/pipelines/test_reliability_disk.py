"""Blocked by its own files, a full disk, a damaged warehouse (issue 25): the CLI against the
sandbox, the warehouse on a small tmpfs (as root; skipped with the reason otherwise)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from centsync.pipelines import failures as errors
from centsync.pipelines.cli.main import main
from centsync.warehouse.outbox import Outbox, outbox_path
from centsync.warehouse.paths import stale_copies

from .conftest import HttpEnv
from .test_writeback_e2e import HEADER, drop, server_rows, writer

pytestmark = pytest.mark.e2e


@pytest.fixture
def small_disk(http_env: HttpEnv) -> Iterator[Path]:
    """The warehouse's folder on a 48 MB tmpfs of its own, unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the disk-full tests run as root in CI)")
    folder = http_env.warehouse.parent
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"could not mount a tmpfs: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the disk to `leave` bytes free with one file (removed to free the disk again)."""
    filler = folder / "filler"
    with filler.open("wb") as f, contextlib.suppress(OSError):
        while True:
            free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
            if free <= leave:
                break
            f.write(b"\0" * min(1 << 20, max(4096, free - leave)))
            f.flush()
    return filler


def test_a_write_back_on_a_full_disk_blocks_nothing_once_space_is_back(
    http_env: HttpEnv, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer(http_env, monkeypatch)
    http_env.refresh()
    drop(http_env, "cash.csv", HEADER + "d-1,Cash Wallet,2026-11-12,-4.50,DISK Lunch,,\n")
    filler = fill(small_disk)
    code, out = http_env.cli("writeback", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.WAREHOUSE, out
    assert "disk is full" in report["error"]["what_to_do"] + report["error"]["message"] or (
        os.strerror(errno.ENOSPC) in report["error"]["message"]
    ), report
    assert "another process" not in report["error"]["message"]
    assert server_rows(http_env, "DISK Lunch") == []  # nothing was sent
    box = outbox_path(http_env.warehouse)
    assert not box.exists() or box.stat().st_size < 12288  # what the full disk left, if any
    filler.unlink()
    # space is back: the incomplete outbox is recognised and removed, nothing is blocked
    code, out = http_env.cli("writeback", "--json")
    assert code == 0, out
    assert len(server_rows(http_env, "DISK Lunch")) == 1
    assert [r["state"] for r in Outbox(box).rows()] == ["sent"]
    assert http_env.refresh()["status"] == "ok"
    assert [r["state"] for r in Outbox(box).rows()] == ["confirmed"]


def test_a_refresh_on_a_full_disk_leaves_no_working_copy_and_says_so(
    http_env: HttpEnv, small_disk: Path
) -> None:
    http_env.refresh()
    before = http_env.warehouse.read_bytes()
    filler = fill(small_disk, leave=http_env.warehouse.stat().st_size // 2)
    code, out = http_env.cli("refresh", "--json", "--full")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.WAREHOUSE, out
    assert report["error"]["what_to_do"].startswith("free space"), report
    assert stale_copies(http_env.warehouse) == []  # the working copy did not stay to fill the disk
    assert http_env.warehouse.read_bytes() == before  # the published warehouse is untouched
    filler.unlink()
    assert http_env.refresh("--full")["status"] == "ok"


def test_a_damaged_warehouse_is_kept_aside_and_rebuilt_with_its_outbox(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer(http_env, monkeypatch)
    http_env.refresh()
    drop(http_env, "cash.csv", HEADER + "w-1,Cash Wallet,2026-11-12,-3.20,DAMAGE Coffee,,\n")
    assert http_env.cli("writeback")[0] == 0
    size = http_env.warehouse.stat().st_size
    os.truncate(http_env.warehouse, size // 2)  # a torn copy, a bad disk
    code, out = http_env.cli("status", "--json")
    assert code == errors.WAREHOUSE and "damaged" in out
    code, out = http_env.cli("refresh", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.WAREHOUSE and report["error"]["class"] == "DamagedError", out
    assert "centsync refresh" in report["error"]["what_to_do"]
    (kept,) = http_env.warehouse.parent.glob("centsync.duckdb.damaged-*")
    assert kept.stat().st_size == size // 2 and kept.name in report["error"]["message"]
    # the recovery named: a new refresh rebuilds it; the outbox was never touched
    rebuilt = http_env.refresh()
    assert rebuilt["reason"] == "first sync" and rebuilt["verdict"] == "agree"
    http_env.assert_exact()
    assert http_env.sql("SELECT concept, state FROM ops.outbox") == [("DAMAGE Coffee", "confirmed")]
    assert len(server_rows(http_env, "DAMAGE Coffee")) == 1


def test_an_outbox_that_was_never_completed_is_removed_not_blamed_on_another_process(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer(http_env, monkeypatch)
    http_env.refresh()
    outbox_path(http_env.warehouse).write_bytes(b"")  # a create that ran out of disk
    drop(http_env, "cash.csv", HEADER + "z-1,Cash Wallet,2026-11-12,-2.10,ZERO Tea,,\n")
    code, out = http_env.cli("writeback", "--json")
    assert code == 0, out
    assert len(server_rows(http_env, "ZERO Tea")) == 1
    # an outbox that held requests and is damaged is named, kept, and nothing is sent
    box = outbox_path(http_env.warehouse)
    data = bytearray(box.read_bytes())
    data[8:12] = b"XXXX"
    box.write_bytes(bytes(data))
    drop(http_env, "more.csv", HEADER + "z-2,Cash Wallet,2026-11-12,-2.20,ZERO Cake,,\n")
    code, out = http_env.cli("writeback", "--json")
    report = json.loads(out.strip().splitlines()[-1])
    assert code == errors.WAREHOUSE and report["error"]["class"] == "OutboxDamagedError", out
    assert "backup" in report["error"]["message"] and box.read_bytes() == bytes(data)
    assert server_rows(http_env, "ZERO Cake") == []


def test_every_reader_of_a_damaged_warehouse_says_so_with_exit_6_and_names_the_recovery(
    http_env: HttpEnv, tmp_path: Path
) -> None:
    """status, reconcile, export and sql on a warehouse with bad checksums: exit 6, the word
    damaged, the recovery (`centsync refresh`, the outbox kept), never a traceback."""
    http_env.refresh()
    good = http_env.warehouse.read_bytes()
    damaged = bytearray(good)
    damaged[5000:5100] = b"x" * 100  # a bad block: its checksum no longer matches
    commands = [
        ("status", "--json"),
        ("sql", "SELECT count(*) FROM core.accounts"),
        ("export", "--out", str(tmp_path / "out")),
        ("reconcile", "--json"),
    ]
    for args in commands:
        http_env.warehouse.write_bytes(bytes(damaged))
        result = CliRunner().invoke(main, list(args))
        text = result.output + (result.stderr if result.stderr_bytes is not None else "")
        assert result.exit_code == errors.WAREHOUSE, (args, text)
        assert "damaged" in text and "centsync refresh" in text, (args, text)
        assert "outbox" in text and "Traceback" not in text, (args, text)
        if "--json" in args:
            (line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("{")]
            assert json.loads(line)["exit_code"] == errors.WAREHOUSE
        for kept in http_env.warehouse.parent.glob("centsync.duckdb.damaged-*"):
            assert kept.read_bytes() == bytes(damaged)  # set aside whole, never changed
            kept.unlink()
    http_env.warehouse.write_bytes(good)
    assert http_env.cli("status")[0] == 0
