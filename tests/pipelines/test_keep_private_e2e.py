"""A person's finances are theirs alone (issue 43): the real demo path (`centsync demo`: refresh,
write-back, report, on the embedded sandbox; then exports, a rewritten report, an output
outside the data folder) run as child processes under umask 022 leaves every file 0600 and
every folder 0700; `centsync doctor` warns of a kept file others can read, with the chmod."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "centsync.pipelines.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        umask=0o022,  # the common default: what it creates would be readable by every user
    )


def open_to_others(root: Path) -> list[str]:
    """Every file and folder under `root` (itself included) that group or others may use."""
    found = []
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        if not stat.S_ISLNK(mode) and stat.S_IMODE(mode) & 0o077:
            found.append(f"{path} {stat.S_IMODE(mode):o}")
    return found


def test_what_the_demo_path_writes_is_private_under_umask_022(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CENTSYNC_", "DAGSTER_"))}
    env |= {"XDG_DATA_HOME": str(tmp_path / "share"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    (tmp_path / "share").mkdir()
    # the person's own, as a system makes it (chmod: an in-process CLI test may have left this
    # worker's umask at centsync's 077)
    (tmp_path / "share").chmod(0o755)
    data = tmp_path / "share" / "centsync"
    demo = run(env, "demo")
    assert demo.returncode == 0, demo.stderr
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    outside.chmod(0o755)
    for args in (
        ["export"],
        ["export", "--format", "csv"],
        ["export", "--format", "beancount"],
        ["report"],  # rewritten in place: the new file replaces the old
        ["refresh"],  # the warehouse rewritten (a working copy published over it)
        ["report", "--out", str(outside / "report.html")],
        ["sql", "SELECT 1 AS x", "--out", str(outside / "one.csv")],
    ):
        done = run(env, *args)
        assert done.returncode == 0, (args, done.stderr)
    names = {p.name for p in data.iterdir()}
    assert {"centsync.duckdb", "centsync.outbox.duckdb", "centsync.sandbox"} <= names
    assert {"centsync.dagster", "inbox", "export", "centsync-report.html"} <= names
    assert open_to_others(data) == []
    assert open_to_others(outside) == [f"{outside} 755"]  # the person's folder, as it was
    # an existing file of the person's, replaced with --force: private from then on
    theirs = outside / "theirs.csv"
    theirs.write_text("old\n")
    theirs.chmod(0o644)
    assert run(env, "sql", "SELECT 1 AS x", "--out", str(theirs), "--force").returncode == 0
    assert stat.S_IMODE(theirs.stat().st_mode) == 0o600

    # the doctor: all private; then a warehouse opened to others is named with its chmod
    checks = {c["name"]: c for c in json.loads(run(env, "doctor", "--json").stdout)["checks"]}
    assert checks["private"]["status"] == "ok", checks["private"]
    (data / "centsync.duckdb").chmod(0o644)
    data.chmod(0o755)
    checks = {c["name"]: c for c in json.loads(run(env, "doctor", "--json").stdout)["checks"]}
    private = checks["private"]
    assert private["status"] == "warn"
    assert f"chmod 600 {data / 'centsync.duckdb'}" in private["detail"]
    assert f"chmod -R go-rwx {data}" in private["detail"]
