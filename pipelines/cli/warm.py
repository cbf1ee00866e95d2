"""A warm process for `centsync refresh`: the imports made once, each refresh a forked child.

Most of a household's refresh from the CLI is its imports (Dagster, SQLAlchemy, Polars, pandera,
DuckDB, aiohttp: about 2.3 s of 3.2 on a slow host, docs/benchmarks.md, issue 46), which every
command pays again. `centsync warm` makes them once, freezes its heap and listens on a Unix
socket of this user's; the console script, before it imports anything, hands a `refresh` to it
(`hand_over`): its arguments, environment, working folder and its three standard files. The
warm process forks a child that runs the console script's `entry` with them, exactly as the
command would have run (a recorded Dagster run, its output on the same terminal), passes on
Ctrl-C and SIGTERM to it, and hands back its exit code: 1.31 s against 3.18 s for the same
refresh (`bench/warm_fork.py`).

Nothing changes for a command that finds no warm process: it runs itself. The socket's name
holds a stamp of the code and of the settings read at import time (`stamp`), so a warm process
started from other code, another interpreter or other Polars, allocator or time zone settings
is never used (it is not found, and the command runs itself). `refresh --all` (it starts itself
again with jemalloc) and `CENTSYNC_WARM=0` always run themselves.

This module imports only the standard library until the warm process itself starts (`serve`):
the console script imports it first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from pathlib import Path

# the package's root (pipelines/cli/warm.py -> the folder holding the layers)
ROOT = Path(__file__).resolve().parent.parent.parent
LAYERS = ("extract", "pipelines", "sandbox", "transform", "warehouse")
# settings libraries read once, when imported or started: a warm process made under other
# values would run the command under its own, so they are part of its stamp
IMPORT_TIME = ("LD_PRELOAD", "PYDANTIC_DISABLE_PLUGINS", "TZ", "_RJEM_MALLOC_CONF")
IMPORT_TIME_PREFIXES = ("POLARS_", "PYTHON")
OFF = "CENTSYNC_WARM"  # "0": never hand a command over
MESSAGE = 1 << 20  # the largest message (the environment travels in one)
# the environment the console script started with, before the imports set defaults of their
# own (Polars its allocator's, the console script pydantic's): `centsync warm` stamps that
STARTED_WITH: dict[str, str] = {}


def runtime_dir() -> Path:
    """This user's folder of warm processes' sockets (XDG_RUNTIME_DIR, else ~/.cache)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or str(Path.home() / ".cache")
    return Path(base) / "centsync"


def stamp(environ: dict[str, str] | None = None) -> str:
    """What the code and the settings read at import are: every module of centsync (path,
    size, modification time), the interpreter, the installed libraries' folder, and the
    import-time settings (`IMPORT_TIME`)."""
    env = os.environ if environ is None else environ
    digest = hashlib.sha256(f"{sys.executable}\0{sys.version}".encode())
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            st = path.stat()
            digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    import sysconfig

    libraries = Path(sysconfig.get_paths()["purelib"])  # an install or removal changes it
    if libraries.is_dir():
        digest.update(f"{libraries}\0{libraries.stat().st_mtime_ns}".encode())
    settings = sorted(
        (k, v) for k, v in env.items() if k in IMPORT_TIME or k.startswith(IMPORT_TIME_PREFIXES)
    )
    digest.update(json.dumps(settings).encode())
    return digest.hexdigest()[:20]


def socket_path(environ: dict[str, str] | None = None) -> Path:
    """The socket a warm process of this code and these settings listens on."""
    return runtime_dir() / f"warm-{stamp(environ)}.sock"


def handed_over(args: list[str]) -> bool:
    """Whether this command is one a warm process runs: `refresh`, not `refresh --all` (the
    console script's `many_owners`: it starts itself again with jemalloc)."""
    from centsync.pipelines.cli.console import many_owners

    words = [a for a in args if not a.startswith("-")]
    return bool(words) and words[0] == "refresh" and not many_owners(args)


def hand_over(args: list[str]) -> int | None:
    """Run the command in a warm process when there is one for it: its exit code, or None
    (no warm process, or it refused before starting the command: the caller runs it)."""
    STARTED_WITH.update(os.environ)
    if os.environ.get(OFF) == "0" or not handed_over(args):
        return None
    try:
        folder = runtime_dir()
    except (KeyError, RuntimeError):  # no home folder to look in: no warm process
        return None
    if not folder.is_dir() or not any(folder.glob("warm-*.sock")):
        return None
    path = socket_path()
    if not path.exists():
        return None
    import signal
    import socket

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(str(path))
        mask = os.umask(0o077)
        os.umask(mask)
        job = {
            "argv0": sys.argv[0],
            "args": args,
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "umask": mask,
        }
        socket.send_fds(conn, [json.dumps(job).encode()], [0, 1, 2])
        if conn.recv(64) != b"started":
            conn.close()
            return None
    except OSError:
        conn.close()
        return None

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            conn.send(b"signal %d" % signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    while True:
        try:
            reply = conn.recv(64)
        except InterruptedError:
            continue
        except OSError:
            reply = b""
        if reply.startswith(b"exit "):
            return int(reply[5:])
        sys.stderr.write("centsync: the warm process stopped before the command ended\n")
        return 70  # errors.INTERNAL (not imported here: it imports the CLI's libraries)
