"""Every command centsync prints for a person to run runs as printed from where they stand
(issue 44): in a fresh `bash -c` with a minimal PATH, where neither `centsync` nor `uv` is."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)  # the project's environment (.venv), as `make setup` made it
MINIMAL_PATH = "/usr/bin:/bin"
# printed commands that open a program and stay (a workbench, a notebook server): each is run
# with --help, which proves it resolves and parses as printed without starting the program
INTERACTIVE = re.compile(r" (sql|notebook [a-z_]+|ui)$")


def _env(home: Path, **extra: str) -> dict[str, str]:
    """A person's environment: a HOME and data folder of its own, no centsync setting."""
    return {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "PATH": MINIMAL_PATH,
        "LANG": "C.UTF-8",
        **extra,
    }


def _bash(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if INTERACTIVE.search(line):
        line += " --help"
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _as_uv_run(home: Path, args: str) -> subprocess.CompletedProcess[str]:
    """`centsync ARGS` as `make demo` starts it: `uv run` executes the environment's script by
    its path with the environment's bin folder put first on the PATH of that process only."""
    script = home / ".venv" / "bin" / "centsync"
    env = _env(home, PATH=f"{script.parent}:{MINIMAL_PATH}", UV_RUN_RECURSION_DEPTH="1")
    return subprocess.run(
        ["bash", "-c", f"{script} {args}"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A folder standing where a clone stands: its `.venv` (the project's, linked)."""
    (tmp_path / ".venv").symlink_to(VENV, target_is_directory=True)
    return tmp_path


def test_a_hint_in_an_error_runs_as_printed(clone: Path) -> None:
    done = _as_uv_run(clone, "status")
    assert done.returncode == 6, done.stderr  # no warehouse yet
    # the hint names the program as the person can run it, relative to where they stand
    (hint,) = set(re.findall(r"run `([^`]+)` first", done.stderr))
    assert hint == ".venv/bin/centsync refresh"
    ran = _bash(hint, clone, _env(clone))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # and `status` now answers, in a shell with nothing but the minimal PATH too
    assert _bash(".venv/bin/centsync status", clone, _env(clone)).returncode == 0


def test_with_centsync_on_the_persons_path_the_hint_says_centsync(clone: Path) -> None:
    """An activated environment (or an installed tool): `centsync` is on the person's own
    PATH, so the hint is the documented `centsync ...`."""
    env = _env(clone, PATH=f"{clone / '.venv' / 'bin'}:{MINIMAL_PATH}")
    done = subprocess.run(
        ["bash", "-c", "centsync status"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert done.returncode == 6 and "run `centsync refresh` first" in done.stderr
    assert ".venv/bin" not in done.stderr


@pytest.mark.slow
def test_every_command_make_demo_prints_runs_as_printed(tmp_path: Path) -> None:
    """`make demo` with uv reached only as `python3 -m uv` (not on the PATH), then every
    command its output names, each in a fresh shell with a minimal PATH, from the clone."""
    outside = [p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != VENV / "bin"]
    python = shutil.which("python3", path=os.pathsep.join(outside))  # not the .venv's own
    probe = python and subprocess.run([python, "-m", "uv", "--version"], capture_output=True)
    if not python or not probe or probe.returncode != 0:
        pytest.skip("no python3 with the uv module on this machine")
    path = f"{Path(python).parent}:{MINIMAL_PATH}"  # python3 and make, no uv, no centsync
    env = _env(tmp_path, PATH=path, UV_LINK_MODE="copy")
    for k in ("UV_CACHE_DIR", "UV_PYTHON_INSTALL_DIR"):
        if k in os.environ:
            env[k] = os.environ[k]
    env["XDG_CACHE_HOME"] = os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))
    demo = subprocess.run(
        ["make", "demo", f"PYTHON={python}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    printed = [
        re.split(r"\s{3,}", line.strip())[0]
        for line in demo.stdout.splitlines()
        if line.strip().startswith(".venv/bin/centsync ")
    ]
    assert "centsync sql" not in demo.stdout.replace(".venv/bin/centsync sql", "")
    assert len(printed) >= 8, demo.stdout  # the intro's, the three queries', the outro's
    fresh = _env(tmp_path)
    for line in printed:
        ran = _bash(line, ROOT, fresh)
        assert ran.returncode == 0, f"{line}\n{ran.stdout}\n{ran.stderr}"
