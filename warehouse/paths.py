"""A warehouse's working copies and lock, and read-only connections to it.

Where the warehouse lives is a setting (`pipelines/settings.py`: `CENTSYNC_WAREHOUSE`, else
`$XDG_DATA_HOME/centsync/centsync.duckdb`): the warehouse is always given its path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb

from centsync.warehouse import instances
from centsync.warehouse.errors import (
    DamagedError,
    NoWarehouseError,
    RefreshInProgressError,
    UnusableError,
)

# How DuckDB reports a file it cannot read back (its errors carry no code; the message is all):
# a truncated file, a bad header, a block whose checksum does not match.
_DAMAGE = (
    "not a valid DuckDB database file",
    "Could not read enough bytes",
    "Corrupt database file",
    "does not match stored checksum",
)
# A DuckDB file's three header blocks: a file shorter than this never held a committed row
# (DuckDB writes them before anything else), so it is what a write that never completed left.
HEADER_BYTES = 3 * 4096

_WORK_MARK = ".refresh-"


def resolve(path: str | os.PathLike[str]) -> Path:
    """The warehouse file at `path` (a warehouse is always given its path)."""
    return Path(path)


def connect_readonly(path: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the published warehouse; safe to hold while a refresh runs.

    The connection keeps seeing the warehouse as it was when opened (a publish swaps the file
    underneath, it does not change it): reconnect to see a newer refresh.
    """
    target = resolve(path)
    if not target.exists():
        raise NoWarehouseError(f"no warehouse at {target}: run `centsync refresh` first")
    return duckdb.connect(str(target), read_only=True)


@contextlib.contextmanager
def reading(path: str | os.PathLike[str]) -> Iterator[duckdb.DuckDBPyConnection]:
    """`connect_readonly` for one block of reads, closed when it ends. A small warehouse is
    attached read-only to the thread's DuckDB instance instead of starting one of its own
    (`instances.reading`: 14-24 ms less a read)."""
    target = resolve(path)
    if not target.exists():
        raise NoWarehouseError(f"no warehouse at {target}: run `centsync refresh` first")
    if target.stat().st_size <= instances.SHARED_MAX_BYTES:
        with instances.reading(target) as con:
            yield con
        return
    con = connect_readonly(target)
    try:
        yield con
    finally:
        con.close()


def working_path(path: Path, refresh_id: str) -> Path:
    """The private working copy a refresh writes to before publishing."""
    return path.with_name(f"{path.name}{_WORK_MARK}{refresh_id}")


def stale_copies(path: Path) -> list[Path]:
    """Working copies (and their WAL files) left behind by refreshes that did not finish."""
    return sorted(path.parent.glob(f"{path.name}{_WORK_MARK}*"))


def stale_temporaries(path: Path) -> list[Path]:
    """Half-written files of a killed refresh: a publish (publish_progress), a failure record, a
    new warehouse (migrate.new_file)."""
    names = [f"{path.name}.publishing", f"{path.name}.failing", f"{path.name}.new"]
    found = [path.with_name(n) for n in names] + [path.with_name(n + ".wal") for n in names]
    return [p for p in found if p.exists()]


def remove(path: Path) -> None:
    """Delete a database file and its WAL, if present."""
    for p in (path, path.with_name(path.name + ".wal")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


@contextlib.contextmanager
def exclusive_lock(
    lock_path: Path, busy: Callable[[], Exception], wait: float = 0.0
) -> Iterator[None]:
    """Hold an exclusive flock on `lock_path`; raise `busy()` if another still holds it after
    `wait` seconds (at once by default).

    flock is released by the kernel when a holder dies (even by SIGKILL), so no stale lock.
    """
    import time

    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)  # private, whatever the umask
    deadline = time.monotonic() + wait
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError as exc:
                if time.monotonic() >= deadline:
                    raise busy() from exc
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def refresh_lock(path: Path) -> contextlib.AbstractContextManager[None]:
    """Hold the warehouse's refresh lock; fail at once if another refresh holds it."""
    return exclusive_lock(
        path.with_name(path.name + ".lock"),
        lambda: RefreshInProgressError(f"another refresh is running on {path}"),
    )


def fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FlushAhead:
    """A working copy's new bytes written to disk in the background, ahead of the fsync that
    publishes it (`publish_file`), which then finds little left to write.

    A refresh's working copy is written without fsyncs (instances.WORKING_SETTINGS), so the
    kernel holds everything a big refresh wrote until that fsync: a 1,000,000-row first sync's
    130 MB, or the whole copy of a big warehouse a daily refresh starts from, took 0.23-0.42 s
    of a core doing nothing at the end of the refresh (docs/benchmarks.md). `start` after a big
    write (the copy, a first sync's window): one thread at a time calls fsync on the file and
    ends; a start while one runs is dropped (the next one, or the publish, writes what it
    would have). Nothing waits for it, and durability is the publish's fsync's, as before.
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def start(self, path: Path) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(
            target=_fsync_quietly, args=(path,), name="centsync-flush-ahead", daemon=True
        )
        self._thread.start()


def _fsync_quietly(path: Path) -> None:
    """fsync `path`; a file gone already (a failed refresh's copy, removed) is no error."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def publish_file(source: Path, target: Path) -> None:
    """Atomically make `source` the published warehouse (readers of the old file are unaffected)."""
    wal = source.with_name(source.name + ".wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise RuntimeError(f"{source} still has a WAL; checkpoint and close it before publishing")
    fd = os.open(source, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    replaced = _held_if_big(target)
    try:
        os.replace(source, target)
        fsync_dir(target.parent)
    finally:
        if replaced is not None:
            # the file replaced is freed (its blocks given back) when its last descriptor
            # closes: for a big warehouse 0.1 s of the filesystem's, done off this thread
            threading.Thread(
                target=os.close, args=(replaced,), name="centsync-free-replaced", daemon=True
            ).start()


# a published file this big is freed off the publishing thread when it is replaced
FREE_AHEAD_BYTES = 16 * 1024 * 1024


def _held_if_big(path: Path) -> int | None:
    """A descriptor of `path` when it is a file over FREE_AHEAD_BYTES, else None."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    if os.fstat(fd).st_size > FREE_AHEAD_BYTES:
        return fd
    os.close(fd)
    return None


def is_damage(exc: BaseException) -> bool:
    """True when DuckDB failed because a file's bytes are damaged (not a lock, not a full disk)."""
    return isinstance(exc, duckdb.Error) and any(sign in str(exc) for sign in _DAMAGE)


def looks_like_duckdb(path: Path) -> bool:
    """True when the file starts as a DuckDB database does (its magic bytes at offset 8)."""
    with path.open("rb") as f:
        return f.read(12)[8:12] == b"DUCK"


def never_completed(path: Path) -> bool:
    """True for a file too short to hold anything (a create that ran out of disk, say)."""
    try:
        return path.stat().st_size < HEADER_BYTES
    except FileNotFoundError:
        return False


def set_aside(path: Path, why: str = "damaged") -> Path:
    """Rename a file (and its WAL) to `<name>.<why>-<UTC time>`, keeping it; returns the name."""
    import datetime as dt

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.{why}-{stamp}")
    wal = path.with_name(path.name + ".wal")
    os.replace(path, aside)
    if wal.exists():
        os.replace(wal, aside.with_name(aside.name + ".wal"))
    fsync_dir(path.parent)
    return aside


def damage_in(path: Path) -> BaseException | None:
    """The damage DuckDB finds reading every block of `path`'s tables, else None (read only)."""
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        return exc if is_damage(exc) else None
    try:
        tables = con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT internal"
        ).fetchall()
        for schema, table in tables:
            # hashing whole rows reads every column's blocks, so every checksum is checked
            con.execute(f'SELECT sum(hash(t)) FROM "{schema}"."{table}" t').fetchall()
    except duckdb.Error as exc:
        return exc if is_damage(exc) else None
    finally:
        con.close()
    return None


def at_a_glance(path: Path) -> str | None:
    """Why the thing at a warehouse's path is no DuckDB file at all (a folder, an empty file, a
    header that is not DuckDB's), else None; reads 12 bytes at most."""
    if path.is_dir():
        return "it is a folder, not a warehouse file"
    if not path.exists():
        return None
    if path.stat().st_size == 0:
        return "it is an empty file (0 bytes)"
    if not looks_like_duckdb(path):
        return "it is not a DuckDB file (its first bytes are not a DuckDB header)"
    return None


def refuse_unusable(path: Path) -> None:
    """Raise UnusableError (naming the recovery) when `at_a_glance` finds no DuckDB file."""
    why = at_a_glance(path)
    if why is not None:
        raise UnusableError(f"{path}: {why}")


def unusable(path: Path) -> str | None:
    """Why the thing at a warehouse's path cannot be a warehouse (`at_a_glance`, or blocks
    DuckDB cannot read back), else None (nothing there, or a sound file).

    Reads only; a file another process holds (a lock, not damage) is not called unusable.
    """
    glance = at_a_glance(path)
    if glance is not None or not path.exists():
        return glance
    found = damage_in(path)
    return None if found is None else str(found).splitlines()[0][:300]


def rebuild_aside(path: Path) -> tuple[Path, str] | None:
    """`centsync refresh --rebuild`: an unusable warehouse (`unusable`) is renamed to
    `<name>.damaged-<UTC time>` beside it (kept, never deleted; its outbox is another file and
    is left as it is), so the refresh builds a new one. Returns (where it is kept, why); None
    when there is nothing to set aside."""
    why = unusable(path)
    if why is None:
        return None
    return set_aside(path), why


def damaged(published: Path, exc: BaseException) -> DamagedError | None:
    """When a refresh failed on damaged bytes and the published warehouse is what is damaged:
    set it aside (kept, never deleted) and say so; else None (some other file's trouble)."""
    if not is_damage(exc) or not published.exists():
        return None
    if published.stat().st_size and not looks_like_duckdb(published):
        return None  # another kind of file at the warehouse's path (a wrong path?): left alone
    found = damage_in(published)
    if found is None:
        return None
    aside = set_aside(published)
    first = str(found).splitlines()[0][:300]
    return DamagedError(
        f"{published} cannot be read back ({first}); it is kept as {aside}, and the next "
        "`centsync refresh` builds a new warehouse"
    )
