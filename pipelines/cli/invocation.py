"""How a person runs centsync from where they stand: the one form every command centsync
prints for a person to run takes (the demo's closing lines, the hints of errors and status).

`make demo` runs centsync through uv (`uv run`, or `python3 -m uv run` when uv is not on the
PATH), which puts `.venv/bin` on the PATH of that process only: in the person's shell neither
`centsync` nor `uv` may be there. So a printed command is `centsync ...` only when `centsync` on
the person's PATH is this very program; else it names the program by its path, relative to the
current folder when it is under it (`.venv/bin/centsync ...`), which runs as printed in any
shell standing there, with no uv and no activated environment.
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import sys
from pathlib import Path

NAME = "centsync"
# a command in a message: `centsync ...` between backticks
_QUOTED = re.compile(r"`centsync(?=[ `])")


@functools.cache
def prefix() -> str:
    """What a printed command starts with: `centsync`, or the program's own path."""
    script = _script()
    if script is None or _on_persons_path(script):
        return NAME
    try:
        shown = str(script.relative_to(Path.cwd()))
    except ValueError:
        shown = str(script)
    return shlex.quote(shown)


def standing() -> str:
    """Where the printed commands run as printed: "this folder", named when the program is
    named by a path relative to it."""
    p = prefix()
    return "this folder" if p == NAME or p.startswith(("/", "'/")) else str(Path.cwd())


def command(args: str = "") -> str:
    """A command line for a person: the prefix, then `args`."""
    return f"{prefix()} {args}".rstrip()


def runnable(text: str) -> str:
    """`text` with every `centsync ...` between backticks as the person runs it."""
    p = prefix()
    return text if p == NAME else _QUOTED.sub(lambda _m: "`" + p, text)


def _script() -> Path | None:
    """The console script this process runs as (None: in process, as the tests run it, or as
    `python -m`: the name is then the documented one)."""
    argv0 = sys.argv[0] if sys.argv else ""
    if not argv0 or Path(argv0).name != NAME:
        return None
    path = Path(argv0)
    if path.parent == Path("."):  # found on the PATH by the shell: a bare name
        found = shutil.which(argv0)
        return Path(found).absolute() if found else None
    return path.absolute() if path.exists() else None


def _on_persons_path(script: Path) -> bool:
    """`centsync` on the person's PATH is this program (`settings.persons_path`: under `uv
    run`, the environment's bin folder put first for this process only does not count; a
    second entry, an activated environment's, still does)."""
    from centsync.pipelines.settings import persons_path

    found = shutil.which(NAME, path=persons_path(str(script.parent)))
    return found is not None and Path(found).resolve() == script.resolve()
