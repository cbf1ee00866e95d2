"""Serving the sandbox over real loopback HTTP: the CLI's server and a thread for tests."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
import uvloop

from centsync.sandbox import Sandbox
from centsync.sandbox.fleet import Fleet, keys_document


def _config(sb: Sandbox | Fleet, host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(
        sb.app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_keep_alive=30,
        date_header=False,  # the app sends its own clock's Date (sandbox/http.py: http_date)
    )


def write_keys_file(path: Path, sb: Sandbox | Fleet, base_url: str) -> None:
    """The keys file of contract section 1 (for a fleet: per owner), mode 0600, atomically."""
    data = (
        keys_document(sb, base_url) if isinstance(sb, Fleet) else {"base_url": base_url, **sb.keys}
    )
    write_private(path, json.dumps(data, indent=2))


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read (it holds keys), atomically."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class _Server(uvicorn.Server):
    """A uvicorn server whose SIGTERM/SIGINT end `serve` cleanly (exit 0), not by re-raising."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {
            sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


@contextmanager
def run_in_thread(
    sb: Sandbox | Fleet, host: str = "127.0.0.1", port: int = 0, *, wait: bool = True
) -> Iterator[str]:
    """Serve `sb` on loopback in a background thread; yields the base URL.

    At the end the server is told to stop; with `wait` the block also waits for its thread to
    end (uvicorn's shutdown polls every 0.1 s: 0.15 s in all). Without it, the thread closes
    its sockets on its own (a daemon thread: a process that exits first ends it), which a
    command that is done with the server need not wait for (the embedded sandbox's refresh:
    docs/benchmarks.md).
    """
    port = port or free_port(host)
    server = _Server(_config(sb, host, port))
    thread = threading.Thread(target=server.run, name="sandbox-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the sandbox server did not start on {host}:{port}")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        if wait:
            thread.join(timeout=10)


def serve(
    sb: Sandbox | Fleet,
    host: str,
    port: int,
    keys_out: Path | None,
    on_ready: str | None = None,
    on_serving: Callable[[str], None] | None = None,
) -> None:
    """Serve until SIGTERM or Ctrl-C; the keys file appears once connections are accepted."""
    # The ledger is millions of long-lived objects: keep them out of every GC pass.
    gc.collect()
    gc.freeze()
    server = _Server(_config(sb, host, port))
    base_url = f"http://{host}:{port}"

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.01)
        if on_serving is not None:
            on_serving(base_url)  # files naming the URL, before the keys file says "serving"
        if keys_out is not None:
            write_keys_file(keys_out, sb, base_url)
        if on_ready:
            print(on_ready.format(base_url=base_url), flush=True)

    async def main() -> None:
        task = asyncio.create_task(announce())
        await server.serve()
        task.cancel()

    uvloop.run(main())


def spawn_serve(keys_out: Path, *options: str, timeout: float = 900.0) -> subprocess.Popen[bytes]:
    """Start ``centsync sandbox serve --keys-out KEYS OPTIONS...`` as its own process (in its
    own session, so ``os.killpg(proc.pid, SIGTERM)`` stops it) and return once it serves.

    For benchmarks, which need the server on its own core: the keys file appears only once the
    server accepts connections. Raises ``RuntimeError`` if it exits or is not up in time.
    """
    # stderr to a file, not a pipe: a long run's log lines must never block the server (the
    # child keeps its own descriptor once ours is closed)
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "centsync.pipelines.cli",
                "sandbox",
                "serve",
                "--keys-out",
                str(keys_out),
                *options,
            ],
            stdout=subprocess.DEVNULL,
            stderr=errors,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while not keys_out.exists():
            if proc.poll() is not None:
                errors.seek(0)
                err = errors.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"the sandbox server exited with {proc.returncode}: {err}")
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGTERM)
                raise RuntimeError(f"the sandbox server did not serve within {timeout:.0f} s")
            time.sleep(0.1)
    return proc
