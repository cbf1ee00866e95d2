"""The `centsync` console script: the garbage collector off before the CLI's first import, and
centsync's environment writes, before the libraries they tell load: pydantic's plugins off,
Polars' threads and, for `refresh --all`, the allocator.

`main.entry` turns the collector off for a command's imports and `group.imports_done` freezes
what they made, then turns it back on; but the console script imports `main` (and with it the
CLI's commands, httpx, aiohttp and Polars, about 0.3 s) before it can call `entry`, and
those imports set off collections over everything imported so far: a full one of ~18 ms and
~17 ms of younger ones on each command (docs/benchmarks.md, issue 46). This module imports
nothing but `contextlib`, `gc`, `os` and `sys`, so the script that starts here imports the CLI
with the collector already off. Importing `main` from anywhere else (tests, `python -m`)
leaves the collector as it is. A `refresh` first looks for a warm process to hand itself to
(`warm.py`, the standard library only: 6 ms, 0.1 ms more when there is none).

Polars reads its settings once, when it is imported, and importing `main` imports it: what it
is told must be said here, first. `refresh --all` refreshes many households at a time, each a
few hundred small Polars plans; Polars' pool woke a second thread for each of them, which
spent more CPU than it saved, so that command runs Polars on one thread (`POLARS_MAX_THREADS`,
unless the user set it: docs/benchmarks.md, issue 46, tenth round). A single owner's refresh
keeps Polars' pool of every core: a big ledger's first sync parses and validates in parallel.
The fleet's Dagster processes are started with the same setting (docs/scale.md).

The allocator is told before the process starts, so `refresh --all` starts itself again, once,
with jemalloc preloaded (`LD_PRELOAD`) when the system has it (Debian's `libjemalloc2`) and
the user preloads nothing: a household's refresh is about 200 DuckDB statements, and DuckDB's
Python wheel allocates through glibc's malloc, a quarter of a small statement's time; the
fleet's daily refresh spent 10 % less CPU per owner on jemalloc, side by side
(docs/benchmarks.md, issue 46, fifteenth round). `LD_PRELOAD=` (empty) keeps glibc's.
"""

import contextlib
import gc
import os
import sys

# pydantic looks for plugins among the entry points of every installed distribution when a
# process makes its first model (Dagster's config): 11-13 ms of every command in a user's
# install (178 distributions), for plugins centsync never uses. `PYDANTIC_DISABLE_PLUGINS=`
# (empty) lets a user's own plugins load (pydantic's documented switch).
NO_PYDANTIC_PLUGINS = "__all__"
# Polars threads for a command that refreshes many owners (`refresh --all`)
MANY_OWNERS_POLARS_THREADS = "1"
# Where Linux distributions install jemalloc's shared library (Debian and Ubuntu's libjemalloc2,
# by architecture, then Fedora's and a build's own), the first found preloaded by `refresh --all`
JEMALLOC = (
    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
    "/usr/lib64/libjemalloc.so.2",
    "/usr/local/lib/libjemalloc.so.2",
)


def many_owners(args: list[str]) -> bool:
    """Whether the command line (without the program's name) is `refresh --all`."""
    words = [a for a in args if not a.startswith("-")]
    return bool(words) and words[0] == "refresh" and "--all" in args


def jemalloc(candidates: tuple[str, ...] = JEMALLOC) -> str | None:
    """The first of these jemalloc libraries that exists (None: none, or not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    return next((path for path in candidates if os.path.isfile(path)), None)


def with_preload(env: dict[str, str], library: str | None) -> dict[str, str] | None:
    """`env` with `library` preloaded; None when there is no library or `env` has an
    LD_PRELOAD already (the user's, an empty one included, or a start's before this one)."""
    if library is None or "LD_PRELOAD" in env:
        return None
    return {**env, "LD_PRELOAD": library}


def preloaded(args: list[str], env: dict[str, str], library: str | None) -> dict[str, str] | None:
    """The environment to start `refresh --all` again in, with `library` preloaded; None when
    this command stays as it started: another command, or `with_preload` has nothing to add."""
    return with_preload(env, library) if many_owners(args) else None


def prepare(args: list[str]) -> None:
    """What the process and Polars must be told before they load (above); a value set by the
    user wins. May start the command again (`os.execve`: the same process, arguments and
    files), once; if that fails, the command goes on as it is."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", NO_PYDANTIC_PLUGINS)
    if many_owners(args):
        os.environ.setdefault("POLARS_MAX_THREADS", MANY_OWNERS_POLARS_THREADS)
        again = preloaded(args, dict(os.environ), jemalloc())
        if again is not None and sys.executable:
            with contextlib.suppress(OSError):
                os.execve(sys.executable, sys.orig_argv, again)


def entry() -> None:
    """The console script: the collector off, Polars' settings, then the CLI (`main.entry`,
    which never returns)."""
    gc.disable()
    if {"refresh", "warm"} & set(sys.argv[1:]):  # a warm process's to run, or to stamp
        from centsync.pipelines.cli import warm

        code = warm.hand_over(sys.argv[1:])
        if code is not None:
            os._exit(code)
    prepare(sys.argv[1:])
    from centsync.pipelines.cli.main import entry as run

    run()
