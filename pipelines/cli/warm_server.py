"""`centsync warm`: the warm process that runs each `centsync refresh` in a forked child
(`warm.py` says why, and what the console script hands over).

One thread, one loop: it accepts a command, forks a child for it, passes on the signals the
command's process receives, and reaps each child, sending its exit code back. It forks only
from that loop, with no other thread running and nothing of Polars or DuckDB started (only
imported), so the child starts as a fresh command would, minus the imports.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

import click

from centsync.pipelines import failures as errors
from centsync.pipelines.cli import warm

LISTEN_BACKLOG = 16


def _warm_up() -> None:
    """The console script's preparations and the imports a refresh makes, the heap frozen."""
    gc.disable()
    from centsync.pipelines.cli import console

    console.prepare(["refresh"])
    import centsync.pipelines.cli.main
    import centsync.pipelines.cli.refresh
    import centsync.pipelines.definitions
    import centsync.pipelines.instance
    import centsync.pipelines.reconcile
    import centsync.pipelines.refresh.run  # noqa: F401

    # what the imports made lives as long as the process: frozen out of the collections the
    # loop's own garbage needs (each child turns its collector on again: `group.imports_done`)
    gc.freeze()
    gc.enable()


def _same_user(conn: socket.socket) -> bool:
    """Whether the other end of `conn` runs as this process's user (Linux's SO_PEERCRED)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def _run_child(job: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become the command (its files, folder, umask, environment,
    arguments, default signal handling) and run the console script's `entry` (it never
    returns)."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, 1 << 16)  # the warm process's socket and every other command's
    os.chdir(job["cwd"])
    os.umask(job["umask"])
    os.environ.clear()
    os.environ.update(job["env"])
    time.tzset()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    # the standard streams again, over the command's files (a terminal's is line-buffered)
    sys.stdin = open(0, closefd=False, encoding="utf-8", errors="replace")  # noqa: SIM115
    for name, fd in (("stdout", 1), ("stderr", 2)):
        tty = os.isatty(fd)
        stream = open(fd, "w", 1 if tty else -1, "utf-8", closefd=False)  # noqa: SIM115
        setattr(sys, name, stream)
    sys.argv = [job["argv0"], *job["args"]]
    from centsync.pipelines.cli.main import entry

    entry()


class Server:
    """The loop: the listening socket, each command's connection, their children."""

    def __init__(self, path: Path, idle: float | None = None) -> None:
        self.path = path
        self.idle = idle  # seconds without a refresh running before it stops; None: never
        self.last = time.monotonic()  # the last refresh's start or end
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, socket.socket] = {}  # pid -> its command's connection
        self.stopping = False

    def start(self) -> None:
        """Listen on the socket (this user's only: its folder 0700, the socket 0600)."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.path.exists():
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                probe.connect(str(self.path))
            except OSError:
                self.path.unlink()  # left by a warm process that did not stop cleanly
            else:
                raise click.UsageError(
                    f"a warm process for this code and these settings already runs ({self.path})"
                )
            finally:
                probe.close()
        old = os.umask(0o177)
        try:
            self.listener.bind(str(self.path))
        except OSError as exc:
            raise click.UsageError(
                f"cannot listen at {self.path} ({exc.strerror or exc}): set XDG_RUNTIME_DIR to "
                "a short folder of yours, then run `centsync warm` again"
            ) from None
        finally:
            os.umask(old)
        self.listener.listen(LISTEN_BACKLOG)
        self.selector.register(self.listener, selectors.EVENT_READ)

    def loop(self) -> None:
        while not self.stopping or self.children:
            for key, _ in self.selector.select(timeout=0.05):
                if key.fileobj is self.listener:
                    self._accept()
                else:
                    self._from_command(key.fileobj)  # type: ignore[arg-type]
            self._reap()
            if self._idle_over():
                print(f"warm: no refresh for {_duration(self.idle or 0)}: stopping", flush=True)
                self.stop()

    def _idle_over(self) -> bool:
        return (
            self.idle is not None
            and not self.stopping
            and not self.children
            and time.monotonic() - self.last >= self.idle
        )

    def _accept(self) -> None:
        """Take a command: its message and files, then a child for it. Anything wrong before
        the child starts closes the connection, and the command runs itself."""
        conn, _ = self.listener.accept()
        fds: list[int] = []
        try:
            if self.stopping or not _same_user(conn):
                raise OSError("refused")
            data, fds, _flags, _addr = socket.recv_fds(conn, warm.MESSAGE, 3)
            job = json.loads(data)
            if len(fds) != 3:
                raise OSError("no standard files")
            pid = os.fork()
        except (OSError, ValueError):
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        if pid == 0:
            try:
                _run_child(job, fds)
            except BaseException:  # before the command's own handling: shown, exit 70
                import traceback

                traceback.print_exc()
                sys.stderr.flush()
            os._exit(errors.INTERNAL)
        for fd in fds:
            os.close(fd)
        self.last = time.monotonic()
        self.children[pid] = conn
        self.selector.register(conn, selectors.EVENT_READ)
        with contextlib.suppress(OSError):  # a command gone already: its child is reaped
            conn.send(b"started")
        print(f"warm: centsync {' '.join(job['args'])} in process {pid}", flush=True)

    def _from_command(self, conn: socket.socket) -> None:
        """A signal the command's process received, passed on to its child; or it is gone."""
        pid = next((p for p, c in self.children.items() if c is conn), None)
        try:
            message = conn.recv(64)
        except OSError:
            message = b""
        if pid is None:
            return
        if message.startswith(b"signal "):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, int(message[7:]))
        elif not message:  # the command's process went away: stop its child as Ctrl-C would
            self.selector.unregister(conn)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            self.last = time.monotonic()
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code  # killed by a signal: a shell's 128 + n
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(conn)
            with contextlib.suppress(OSError):
                conn.send(b"exit %d" % code)
            conn.close()

    def stop(self, *_args: object) -> None:
        """Stop taking commands; the loop ends when the running ones have."""
        if not self.stopping:
            self.stopping = True
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(self.listener)
            self.listener.close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


_UNITS = {"s": 1, "m": 60, "h": 3600}


class Duration(click.ParamType):
    """A length of time as people write it: 90s, 30m, 2h (a bare number is seconds)."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        text = str(value).strip().lower()
        unit = text[-1:] if text[-1:] in _UNITS else "s"
        number = text[:-1] if text[-1:] in _UNITS else text
        try:
            seconds = float(number) * _UNITS[unit]
        except ValueError:
            seconds = -1.0
        if not seconds > 0 or seconds == float("inf"):
            self.fail(f"{value!r} is not a length of time: write it as 90s, 30m or 2h", param, ctx)
        return seconds


def _duration(s: float) -> str:
    """90s, 30m, 2h: as the option takes it."""
    for unit in ("h", "m"):
        size = _UNITS[unit]
        if s >= size and s % size == 0:
            return f"{s / size:g}{unit}"
    return f"{s:g}s"


@click.command("warm")
@click.option(
    "--idle",
    type=Duration(),
    default=None,
    metavar="DURATION",
    help="Stop after this long with no refresh (90s, 30m, 2h). By default it runs until stopped.",
)
def warm_command(idle: float | None) -> None:
    """Keep a warm process for `centsync refresh`: the imports made once, each refresh about
    2 s sooner. Runs until Ctrl-C or SIGTERM (or --idle); commands that find none run
    themselves."""
    if not sys.platform.startswith("linux"):
        raise click.UsageError("`centsync warm` needs Linux (Unix sockets with peer credentials)")
    # stamped with the settings the command was started with (imports set some of their own)
    path = warm.socket_path(warm.STARTED_WITH or None)
    _warm_up()
    server = Server(path, idle)
    server.start()
    signal.signal(signal.SIGTERM, server.stop)
    signal.signal(signal.SIGINT, server.stop)
    until = f" (stops after {_duration(idle)} with no refresh)" if idle is not None else ""
    print(f"warm: ready for `centsync refresh` at {server.path}{until}", flush=True)
    server.loop()
    print("warm: stopped", flush=True)
