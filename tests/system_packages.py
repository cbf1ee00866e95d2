"""Debian packages a test needs, installed with apt-get when missing: CI starts from a clean
machine, and a test that needs a real browser or server runs there too (never skipped, never a
downloaded build)."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from collections.abc import Callable


def apt_install(packages: list[str], present: Callable[[], bool]) -> None:
    """Install Debian's `packages` with apt-get unless `present()` already says they are here
    (CI starts from a clean machine; never a downloaded build). One install at a time: every
    pytest-xdist worker may ask. Fails the test with apt's own words when apt cannot."""
    with open("/tmp/centsync-apt-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if present():
            return
        env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
            if done.returncode != 0:
                raise AssertionError(
                    f"{' '.join(cmd)} failed (exit {done.returncode}): {done.stderr[-2000:]}"
                )
    assert present(), f"{' '.join(packages)}: still missing after apt-get install"


def need_command(name: str, package: str | None = None) -> str:
    """The path of command `name`, its Debian package (`package`, default the same name)
    installed with apt first when it is not on PATH."""
    apt_install([package or name], lambda: shutil.which(name) is not None)
    found = shutil.which(name)
    assert found is not None
    return found
