"""The `centsync` console script: the garbage collector off before the CLI's first import.

`main.entry` turns the collector off for a command's imports and `group.imports_done` freezes
what they made, then turns it back on; but the console script imports `main` (and with it the
CLI's commands, httpx, aiohttp and pyarrow, about 0.3 s) before it can call `entry`, and those
imports set off collections over everything imported so far: a full one of ~18 ms and ~17 ms of
younger ones on each command (docs/benchmarks.md, issue 46). This module imports nothing but
`gc`, so the script that starts here imports the CLI with the collector already off. Importing
`main` from anywhere else (tests, `python -m`) leaves the collector as it is.
"""

import gc


def entry() -> None:
    """The console script: the collector off, then the CLI (`main.entry`, which never returns)."""
    gc.disable()
    from centsync.pipelines.cli.main import entry as run

    run()
