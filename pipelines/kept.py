"""What centsync keeps, kept safe: no output is written over it, and it is private to its owner.

Two promises (docs/reliability.md, "What you keep"):

- **No output overwrites a kept file.** Every command that writes a path a person gives
  (`sql --out`, `export --out`, `report --out`, `docs --out`, `sandbox serve --keys-out` ...)
  asks `guard_output` first: a path that is, or is inside, something centsync keeps (the
  warehouse and every file beside it that carries its name, the outbox, the embedded sandbox's
  state, the Dagster home, the inbox, the lake, the owners' folders, the owners and contract
  files) is refused whatever `--force` says; an existing file the person did not mark as
  disposable (`--force`) is refused too. Both exit 2 (a usage error), naming the file.
- **Private to its owner.** `private_umask` (the CLI's and the Dagster code location's first
  act) makes everything centsync creates 0600 (files) or 0700 (folders) whatever the umask it
  was started with, rewrites included (an atomic replace puts a new file in place: created
  under this umask). `exposed` lists the kept paths others may read, for `centsync doctor`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from centsync.transform.contract import Outcome

if TYPE_CHECKING:
    from centsync.pipelines.settings import Settings

# the permission bits nobody but the owner gets (group and others: read, write, search)
PRIVATE_MASK = 0o077


def private_umask() -> None:
    """Make every file and folder this process (and its children) creates private to its owner:
    the umask keeps its own bits and gains group's and others' (022 becomes 077)."""
    current = os.umask(PRIVATE_MASK)
    os.umask(current | PRIVATE_MASK)


@dataclass(frozen=True)
class Kept:
    """One thing centsync keeps: a file (and the files beside it named after it: its WAL, lock,
    working copies, damaged and rebind copies) or a folder (and all it holds)."""

    path: Path
    what: str
    folder: bool = False


def kept(config: Settings) -> list[Kept]:
    """Every file and folder centsync keeps, for these settings."""
    from centsync.warehouse.outbox import outbox_path

    warehouse = config.warehouse
    return [
        Kept(warehouse, "the warehouse"),
        Kept(outbox_path(warehouse), "the write-back outbox"),
        Kept(config.sandbox_state_file, "the embedded sandbox's state"),
        Kept(config.dagster_home, "the Dagster home", folder=True),
        Kept(config.inbox, "the write-back inbox", folder=True),
        Kept(config.lake, "the shared lake", folder=True),
        Kept(config.data_home / "owners", "the owners' warehouses", folder=True),
        Kept(config.owners_file, "the owners file"),
        Kept(config.contract_file, "the contract file"),
    ]


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def kept_as(path: Path, config: Settings) -> Kept | None:
    """The kept thing `path` would write over (itself, a file named after it, or inside a kept
    folder; symlinks followed, hard links seen), else None."""
    target = _real(path)
    for k in kept(config):
        base = _real(k.path)
        if target == base:
            return k
        if k.folder and base in target.parents:
            return k
        if not k.folder and target.parent == base.parent and target.name.startswith(base.name):
            return k
        if target.exists() and base.exists() and not k.folder and os.path.samefile(target, base):
            return k
    return None


class OutputRefusedError(ValueError):
    """An output pointed at a kept file, or at an existing file not marked disposable: exit 2."""

    outcome: ClassVar[Outcome] = Outcome.USAGE
    headline: ClassVar[str] = "centsync will not write there"
    what_to_do: ClassVar[str] = "give another path, as the message says."


def guard_output(path: Path, config: Settings, *, force: bool = False, flag: str = "--out") -> None:
    """Refuse (OutputRefusedError) to write the output `flag` names at `path` when it is, or is
    inside, something centsync keeps (whatever `force` says), or an existing file unless `force`
    marks it disposable."""
    hit = kept_as(path, config)
    if hit is not None:
        raise OutputRefusedError(
            f"{flag} {path} would write over {hit.what} ({hit.path}), which centsync keeps: an "
            "output never replaces it, not even with --force. Give a path outside it."
        )
    if force or not (path.exists() or path.is_symlink()):
        return
    if path.is_dir():
        raise OutputRefusedError(f"{flag} {path} is a folder: give a file's path")
    raise OutputRefusedError(
        f"{flag} {path} already exists: give --force to replace it, or another path."
    )


def guard_folder(folder: Path, names: list[str], config: Settings, *, force: bool) -> None:
    """`guard_output` for an export into `folder` (files `names` in it): the folder may not be
    kept or inside a kept folder; files it already holds are replaced only when the folder is
    a previous export (its manifest.json is there) or with `force`."""
    hit = kept_as(folder, config)
    if hit is None:
        hit = next((h for n in names if (h := kept_as(folder / n, config)) is not None), None)
    if hit is not None:
        raise OutputRefusedError(
            f"--out {folder} would write into {hit.what} ({hit.path}), which centsync keeps: an "
            "export never goes there, not even with --force. Give another folder."
        )
    if folder.exists() and not folder.is_dir():
        raise OutputRefusedError(f"--out {folder} is a file: give a folder")
    previous = (folder / "manifest.json").exists()
    there = [n for n in names if (folder / n).exists()]
    if there and not previous and not force:
        raise OutputRefusedError(
            f"--out {folder} already holds {there[0]}"
            f"{f' (and {len(there) - 1} more)' if len(there) > 1 else ''}, and it is not a "
            "previous export (no manifest.json): give --force to replace them, or another folder."
        )


def exposed(paths: list[Path]) -> list[tuple[Path, str]]:
    """The paths (existing ones) that another user of the machine may read or enter, with the
    chmod that makes each private."""
    found: list[tuple[Path, str]] = []
    for path in paths:
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        if stat.S_IMODE(mode) & PRIVATE_MASK:
            chmod = f"chmod -R go-rwx {path}" if stat.S_ISDIR(mode) else f"chmod 600 {path}"
            found.append((path, chmod))
    return found


def private_paths(config: Settings) -> list[Path]:
    """What `centsync doctor` checks is private: the data folder and the warehouse's folder,
    every kept file and folder, and the outputs written beside the warehouse by default."""
    warehouse = config.warehouse
    folders = {warehouse.parent}
    if config.data_home in warehouse.parents:  # the data folder, when the warehouse is in it
        folders.add(config.data_home)
    outputs = [
        warehouse.with_name("centsync-report.html"),
        warehouse.parent / "export",
        warehouse.with_name("centsync.beancount"),
    ]
    return [*sorted(folders), *(k.path for k in kept(config)), *outputs]
