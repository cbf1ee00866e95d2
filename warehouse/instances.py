"""Working copies, and blocks of reads of a small warehouse (`reading`), attached to one DuckDB
instance per thread, not each opened in its own.

Starting a DuckDB instance costs about 25 ms of CPU (`duckdb.connect()`, even in memory): a
tenth of a household's daily refresh. A process that refreshes many owners one after the
other (a fleet shard) pays it once per thread instead: each small working copy is `ATTACH`ed
to the thread's instance, used through a cursor of its own (`USE` makes it the default
database, so every unqualified name resolves as in a file opened alone), and `DETACH`ed at
the end (about 8 ms for all three). Measured in docs/scale.md.

Only a working copy known to be small is attached (`SHARED_MAX_BYTES`): a big ledger's
refresh sets the instance's memory and spills to a temporary directory, and DuckDB keeps one
temporary directory per instance, so a big warehouse keeps an instance of its own, as before.
DuckDB's settings are the instance's (all the refresh's settings are global), so one
instance serves one refresh at a time: one per thread. After any failure the thread's
instance is closed and the next refresh starts a new one, so nothing a failure left behind
(an invalidated database, a half-set setting) reaches another owner.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb

# A working copy up to this size is attached to the thread's shared instance
SHARED_MAX_BYTES = 16 * 1024 * 1024
# Settings of every working copy's instance (DuckDB keeps them per instance, not per file):
# - automatic checkpoints every 16 MB of WAL rewrote the primary-key index again and again (a
#   third of a month-by-month first sync); never checkpointing keeps every row in memory until
#   the end (+700 MB at 1M rows). 64 MB measured best of both (with the key, which migration
#   015 dropped: bench/ledger_insert.py found a 1 GB threshold no better without it).
# - nothing of a working copy is kept after a crash (stale copies are removed before a
#   refresh): its commits need no fsync (~0.5 ms each, a dozen per household). The file that
#   is published is fsynced whole before it replaces the old one (paths.publish_file).
WORKING_SETTINGS = ("SET checkpoint_threshold = '64MB'", "SET fsync_mode = 'NONE'")
# A refresh's own settings (Session.refresh_settings: its memory limit, threads, optimiser)
# stay on the instance for the next refresh, which sets its own (every refresh sets all
# three: pipelines/refresh/run.py); a SET already in effect is skipped (RESET memory_limit
# then SET again cost 6 ms a refresh). A write session that is not a refresh (a publishing
# one, after a refresh in the same thread) runs under the last refresh's settings: they
# change speed, never results, and a warehouse attached here is small.

Config = dict[str, str | bool | int | float | list[str]]
# The block size of a new warehouse file. DuckDB's default, 256 KiB, gives every table and
# index at least one block: a household's 1,700 rows over ~40 tables took 15-27 MB, nearly all
# empty. 16 KiB (DuckDB's least) stores the same warehouse in about 1.5 MB (docs/scale.md). A
# file keeps the block size it was made with: older warehouses keep 256 KiB.
BLOCK_SIZE = 16_384
# Rows of a row group in a table of a warehouse (DuckDB's default, kept by every file made here;
# tests/warehouse/test_row_groups.py reads it back from a file). A first sync sizes its windows
# by it (pipelines/refresh/plan.py `months_per_window`).
ROW_GROUP_ROWS = 122_880
# A new file's settings, of a working copy's instance and of the thread's shared one
NEW_FILE: Config = {"default_block_size": str(BLOCK_SIZE)}


def copy_compact(con: duckdb.DuckDBPyConnection, source: str, target: Path) -> None:
    """Write database `source` of `con` whole into a new file `target`, in compact blocks:
    every table, view, comment, constraint and row, each table written once (`COPY FROM
    DATABASE`; a refresh's publish, warehouse/session.py, and a new file's schema,
    warehouse/migrate.py)."""
    quoted = str(target).replace("'", "''")
    con.execute(f"ATTACH '{quoted}' AS compact (BLOCK_SIZE {BLOCK_SIZE})")
    con.execute(f'COPY FROM DATABASE "{source}" TO compact')
    con.execute("DETACH compact")


class _Thread(threading.local):
    def __init__(self) -> None:
        self.home: duckdb.DuckDBPyConnection | None = None
        self.attached = 0  # working copies attached now (a publishing session may nest)
        self.applied: dict[str, str] = {}  # settings not at DuckDB's default on `home`
        self.failed = False  # a refresh failed: close the instance once nothing is attached


_thread = _Thread()
_aliases = itertools.count()


def _thread_instance() -> duckdb.DuckDBPyConnection:
    if _thread.home is None:
        home = duckdb.connect(":memory:", config=NEW_FILE)
        for sql in WORKING_SETTINGS:
            home.execute(sql)
        _thread.home, _thread.failed, _thread.applied = home, False, {}
    return _thread.home


def thread_instance() -> duckdb.DuckDBPyConnection | None:
    """This thread's shared instance, if it has one now (for tests and diagnostics)."""
    return _thread.home


def attached_files() -> list[str]:
    """The files attached to this thread's instance now (for tests and diagnostics)."""
    if _thread.home is None:
        return []
    rows = _thread.home.execute(
        "SELECT path FROM duckdb_databases() WHERE NOT internal AND path IS NOT NULL"
    ).fetchall()
    return sorted(str(r[0]) for r in rows)


def _drop_if_failed() -> None:
    if _thread.failed and _thread.attached == 0 and _thread.home is not None:
        home, _thread.home, _thread.failed = _thread.home, None, False
        with contextlib.suppress(duckdb.Error):
            home.close()


def applied_settings() -> dict[str, str]:
    """The settings a refresh set on this thread's instance (not DuckDB's defaults), kept up
    to date by `Session.refresh_settings`, which skips a SET already in effect."""
    return _thread.applied  # a new instance starts a new dict


def attach(
    work: Path, *, read_only: bool = False
) -> tuple[duckdb.DuckDBPyConnection, Callable[[bool, bool], None]]:
    """A connection whose default database is the working copy `work` (or, `read_only`, a
    file only read: `reading`), attached to this thread's instance, and `detach(failed,
    checkpoint)`, which closes it and detaches the file: checkpointed first unless
    `checkpoint` is False (its state was copied elsewhere, or it is discarded). After a
    failure (`failed`) the instance is closed once nothing else of this thread is attached,
    and the next refresh starts a new one."""
    home = _thread_instance()
    alias = f"{'reading' if read_only else 'working_copy'}_{next(_aliases)}"
    quoted = str(work).replace("'", "''")
    _thread.attached += 1
    try:
        home.execute(f"ATTACH '{quoted}' AS {alias}" + (" (READ_ONLY)" if read_only else ""))
        con = home.cursor()
        con.execute(f"USE {alias}")
    except BaseException:
        _thread.attached -= 1
        _thread.failed = True
        _drop_if_failed()
        raise
    done = False

    def detach(failed: bool = False, checkpoint: bool = True) -> None:
        nonlocal done
        if done:
            return
        done = True
        _thread.failed = _thread.failed or failed
        try:
            con.close()
            if not checkpoint:
                home.execute("PRAGMA disable_checkpoint_on_shutdown")
            home.execute(f"DETACH {alias}")
            if not checkpoint:
                home.execute("PRAGMA enable_checkpoint_on_shutdown")
        except BaseException:
            _thread.failed = True
            raise
        finally:
            _thread.attached -= 1
            _drop_if_failed()

    return con, detach


@contextlib.contextmanager
def reading(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to the small warehouse file `path` for one block of reads: the
    file attached `READ_ONLY` to this thread's instance, detached at the end.

    A read-only `duckdb.connect` starts an instance of its own (14-24 ms of a household's
    1.5 s refresh, which opened two: the definitions' first month and the landed rows' check);
    an attach to the instance the refresh's working copy uses costs about a tenth of that
    (docs/benchmarks.md). The reads see the file as it was when attached, as with a connection
    of its own. A file this thread has attached already (by any name) is opened in an
    instance of its own: DuckDB refuses a file attached for writing to be attached again."""
    target = os.path.realpath(path)
    if target in {os.path.realpath(p) for p in attached_files()}:
        con = duckdb.connect(target, read_only=True)
        try:
            yield con
        finally:
            con.close()
        return
    con, detach = attach(Path(target), read_only=True)
    try:
        yield con
    finally:
        detach(False, True)  # a read-only file has nothing to checkpoint


def release(con: duckdb.DuckDBPyConnection) -> None:
    """Give DuckDB's cached blocks and its allocator's free memory back to the system.

    DuckDB keeps the blocks it read or wrote cached up to its memory limit, and its allocator
    keeps freed memory: after a million rows' checkpoint, or their Parquet copy, about 90 MB of
    the process that nothing uses until the next load. Lowering the limit for a moment evicts
    the cache and flushes the allocator; the limit is then set back (`_limit_as_shown`). At
    1,000,000 rows `centsync reconcile` peaked about 60 MB lower (docs/benchmarks.md)."""
    (shown,) = con.execute("SELECT current_setting('memory_limit')").fetchall()[0]
    con.execute("SET memory_limit = '8MB'")
    con.execute("SET memory_limit = ?", [_limit_as_shown(str(shown))])


_UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}


def _limit_as_shown(shown: str) -> str:
    """A memory limit DuckDB shows as `shown`, in bytes: DuckDB shows a limit cut to a tenth of
    its unit ('244.1 MiB' for 256MB), so setting the text back would lower it each time; half
    a tenth more shows the same again (within 0.05 of the unit of what was set, and the same
    however often it is released)."""
    number, unit = shown.split()
    tenths = round(float(number) * 10)
    return f"{(tenths * 2 + 1) * _UNITS[unit] // 20}B" if unit != "bytes" else f"{number}B"
