"""The `centsync` console script: the garbage collector off before the CLI's first import, and
the one environment write of centsync, before Polars loads.

`main.entry` turns the collector off for a command's imports and `group.imports_done` freezes
what they made, then turns it back on; but the console script imports `main` (and with it the
CLI's commands, httpx, aiohttp and Polars, about 0.3 s) before it can call `entry`, and
those imports set off collections over everything imported so far: a full one of ~18 ms and
~17 ms of younger ones on each command (docs/benchmarks.md, issue 46). This module imports
nothing but `gc`, `os` and `sys`, so the script that starts here imports the CLI with the
collector already off. Importing `main` from anywhere else (tests, `python -m`) leaves the
collector as it is.

Polars reads its settings once, when it is imported, and importing `main` imports it: what it
is told must be said here, first. `refresh --all` refreshes many households at a time, each a
few hundred small Polars plans; Polars' pool woke a second thread for each of them, which
spent more CPU than it saved, so that command runs Polars on one thread (`POLARS_MAX_THREADS`,
unless the user set it: docs/benchmarks.md, issue 46, tenth round). A single owner's refresh
keeps Polars' pool of every core: a big ledger's first sync parses and validates in parallel.
The fleet's Dagster processes are started with the same setting (docs/scale.md).
"""

import gc
import os
import sys

# Polars threads for a command that refreshes many owners (`refresh --all`)
MANY_OWNERS_POLARS_THREADS = "1"


def many_owners(args: list[str]) -> bool:
    """Whether the command line (without the program's name) is `refresh --all`."""
    words = [a for a in args if not a.startswith("-")]
    return bool(words) and words[0] == "refresh" and "--all" in args


def prepare(args: list[str]) -> None:
    """What Polars must be told before it loads (above); a value set by the user wins."""
    if many_owners(args):
        os.environ.setdefault("POLARS_MAX_THREADS", MANY_OWNERS_POLARS_THREADS)


def entry() -> None:
    """The console script: the collector off, Polars' settings, then the CLI (`main.entry`,
    which never returns)."""
    gc.disable()
    prepare(sys.argv[1:])
    from centsync.pipelines.cli.main import entry as run

    run()
