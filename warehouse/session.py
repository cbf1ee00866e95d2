"""The warehouse session: opening, the refresh's working copy and its atomic publish,
one-transaction plumbing, and the refresh's own ops rows (ops.refreshes, ops.meta)."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self

import duckdb
import orjson
import polars as pl

from centsync.warehouse import common, frames, history, instances, paths
from centsync.warehouse import validation as v
from centsync.warehouse.common import (
    RefreshMode,
    RefreshStats,
    new_refresh_id,
    transaction,
)
from centsync.warehouse.errors import WarehouseError
from centsync.warehouse.instances import BLOCK_SIZE, NEW_FILE
from centsync.warehouse.migrate import migrate, new_file

log = logging.getLogger("centsync.warehouse.store")

# A small ledger's refresh (one thread) runs about 200 small statements that take longer to
# optimise than to run: without DuckDB's optimiser a household's daily refresh spent 7-9 % less
# CPU (bench/small_statements.py, docs/scale.md). Its passes change plans, never results; a big
# ledger keeps them (join order, filters pushed into the scans of a million rows).
SMALL_REFRESH_OPTIMIZER = False
# Below this many rows (in the warehouse, or announced by the server for a full read) DuckDB
# runs a refresh on one thread and Polars runs the marts' plans on its in-memory engine: the
# statements are small and many, and a second worker for each cost more than it gave (2.04 ->
# 2.00 s, median of 10, docs/benchmarks.md). A bigger ledger gets the defaults, all cores.
ONE_THREAD_ROWS = 100_000
# A frame up to this many rows stays registered after use until the next frame replaces it
KEEP_REGISTERED_ROWS = 10_000


class Session:
    """A handle on one warehouse file: the connection, the refresh it belongs to, publishing."""

    """A read-write handle on one DuckDB warehouse file (usually a refresh's working copy)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, *, read_only: bool = False):
        self.con = con
        self.path = path
        self.read_only = read_only
        self.refresh_id: str | None = None
        # the service's "now" (its net worth as_of), recorded as when a month was verified;
        # None: DuckDB's now()
        self.service_now: dt.datetime | None = None
        # the service's clock this refresh wrote to history.refresh_clock (history.note_clock);
        # a month replace then does not write it again
        self.clock_noted: dt.datetime | None = None
        self.stats = RefreshStats()
        self._published_path: Path | None = None
        self._flush = paths.FlushAhead()  # a working copy's bytes to disk before its publish
        self._depth = 0  # frames registered now (_registered)
        self._together = False  # loads share one transaction (together)
        self._snapshots: set[str] = set()  # entities snapshotted by this session's refresh
        # closes `con` and detaches the file from the thread's instance (instances.attach)
        self._detach: Callable[[bool, bool], None] | None = None
        # settings a refresh set on this connection's instance (refresh_settings)
        self._applied: dict[str, str] = {}

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, read_only: bool = False) -> Self:
        """Open a warehouse file directly (migrating it unless read-only).

        Writing the published file directly blocks analysts' read-only connections: refreshes
        should use `Warehouse.refreshing` instead.
        """
        target = paths.resolve(path)
        if read_only:
            return cls(paths.connect_readonly(target), target, read_only=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            new_file(target)
        con = duckdb.connect(str(target), config=NEW_FILE)
        migrate(con)
        return cls(con, target)

    @classmethod
    @contextlib.contextmanager
    def refreshing(
        cls,
        path: str | os.PathLike[str],
        *,
        mode: RefreshMode = "incremental",
        refresh_id: str | None = None,
        record: bool = True,
        check: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    ) -> Iterator[Self]:
        """Run a refresh on a private working copy; publish it atomically on success.

        On an exception the working copy is discarded and the published warehouse is left as it
        was (plus a 'failed' row in ops.refreshes). Only one refresh runs at a time (a lock file);
        copies left by a killed refresh are removed first. `record=False` is the same write
        session without an ops.refreshes row (see `Warehouse.publishing`). `check` is called
        on the working copy before anything is written to it; an exception it raises that says
        `record_failure = False` (a warehouse bound to another source) records nothing.
        """
        published = paths.resolve(path)
        paths.refuse_unusable(published)  # a folder, an empty file, not DuckDB: named, left
        published.parent.mkdir(parents=True, exist_ok=True)
        rid = refresh_id or new_refresh_id()
        with paths.refresh_lock(published):
            for stale in paths.stale_copies(published) + paths.stale_temporaries(published):
                log.warning("removing %s left by an interrupted refresh", stale.name)
                stale.unlink(missing_ok=True)
            work = paths.working_path(published, rid)
            wh: Self | None = None
            try:
                # a copy of the published file (on a full disk: removed below), else a new one
                shutil.copyfile(published, work) if published.exists() else new_file(work)
                con, detach = _connect_working_copy(work, published)
                wh = cls(con, work)
                if detach is not None:
                    wh._detach, wh._applied = detach, instances.applied_settings()
                wh._published_path = published
                wh.flush_ahead()  # a big warehouse's copy, on to the disk
                if check is not None:
                    check(con)
                migrate(con)
                if record:
                    wh.start_refresh(mode=mode, refresh_id=rid)
                else:
                    wh.refresh_id = rid
                yield wh
                if record and wh.refresh_status() == "running":
                    wh.finish_refresh()
                paths.publish_file(_finish_file(wh, work), published)
            except BaseException as exc:
                # SIGINT or SIGTERM: keep what was read (every load is one transaction, so the
                # working copy is consistent), say so, and let the next refresh resume
                # The same for a service that stopped answering for now (its hourly allowance
                # spent past the wait budget, errors past the retries): what was read is kept,
                # or a ledger larger than an hour's allowance could never finish
                if (
                    (is_interrupt(exc) or resumable(exc))
                    and wh is not None
                    and record
                    and _publish_interrupted(wh, work, published, exc)
                ):
                    if isinstance(exc, KeyboardInterrupt) or not is_interrupt(exc):
                        raise
                    raise KeyboardInterrupt("a query was interrupted") from exc
                stats = wh.stats if wh is not None else RefreshStats()
                if wh is not None:
                    # on a full disk closing fails too; the copy must go all the same, or it
                    # keeps the disk full
                    with contextlib.suppress(Exception):
                        wh.close(failed=True)
                paths.remove(work)
                paths.remove(_compact_path(work))
                damaged = paths.damaged(published, exc)
                if damaged is not None:
                    raise damaged from exc
                if record and getattr(exc, "record_failure", True):
                    _record_failure(published, rid, mode, stats, exc)
                if is_interrupt(exc) and not isinstance(exc, KeyboardInterrupt):
                    # DuckDB's report of a query the signal stopped (before anything was read)
                    raise KeyboardInterrupt("a query was interrupted") from exc
                raise

    @classmethod
    def publishing(cls, path: str | os.PathLike[str]) -> contextlib.AbstractContextManager[Self]:
        """A write session that is not a refresh (reconciliation results, marts, the outbox).

        Same guarantees as `refreshing`: a private copy, published atomically on success,
        discarded on an exception, one writer at a time; no ops.refreshes row.
        """
        return cls.refreshing(path, record=False)

    def flush_ahead(self) -> None:
        """Start writing a refresh's working copy to disk in the background (paths.FlushAhead),
        after a big write such as a first sync's window checkpointed. Nothing for a warehouse
        that is not a refresh's copy, nor for a small one (its copy is not what is published:
        `_finish_file` writes it anew, compact)."""
        if self._published_path is not None and self.path.stat().st_size > COMPACT_MAX_BYTES:
            self._flush.start(self.path)

    def publish_progress(self) -> None:
        """Publish the working copy as it stands, mid-refresh, so a stopped refresh resumes here.

        Every load is one transaction, so the copy is consistent; its ops.refreshes row says
        'running' until a later publish. For long first syncs under a rate limit.
        """
        if self._published_path is None:
            raise WarehouseError("publish_progress only works inside Warehouse.refreshing")
        self.con.execute("CHECKPOINT")
        tmp = self._published_path.with_name(self._published_path.name + ".publishing")
        shutil.copyfile(self.path, tmp)
        paths.publish_file(tmp, self._published_path)

    def close(self, *, failed: bool = False, checkpoint: bool = True) -> None:
        """Close the connection (idempotent). `failed`: after a failure (the copy is
        discarded unwritten; a shared instance is started anew: instances.py). `checkpoint`
        False: the file is not written first (its state was copied elsewhere)."""
        if self._detach is not None:
            self._detach(failed, checkpoint and not failed)
            return
        with contextlib.suppress(duckdb.Error):
            if failed or not checkpoint:
                self.con.execute("PRAGMA disable_checkpoint_on_shutdown")
            self.con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -----------------------------------------------------------------------------

    def transaction(self) -> contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]:
        """One DuckDB transaction: commit on success, roll back on any exception (inside
        `together`, the loads' shared transaction)."""
        if self._together:
            return contextlib.nullcontext(self.con)
        return transaction(self.con)

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """Several loads in one transaction, each load's own joining it: all of them land or
        none, with one commit where each would make its own (~1.7 ms each: a refresh's six
        snapshots and service aggregates, steps.Refresher._after_ledger)."""
        if self._together:
            yield
            return
        with transaction(self.con):
            self._together = True
            try:
                yield
            finally:
                self._together = False

    @contextlib.contextmanager
    def _registered(self, frame: pl.DataFrame) -> Iterator[str]:
        """Expose a frame to SQL as an Arrow stream (zero copy), for INSERT ... SELECT."""
        # a name per nesting level, registered again by the next frame at that level (which
        # replaces it: 0.5 ms, against 0.8 ms to register and unregister, ~20 frames a refresh)
        name = f"_incoming_{self._depth}"
        self._depth += 1
        frames.register(self.con, name, frame)
        try:
            yield name
        finally:
            self._depth -= 1
            if frame.height > KEEP_REGISTERED_ROWS:  # a big frame is let go at once
                # Inside a failed transaction DuckDB refuses even this; the original error matters.
                with contextlib.suppress(duckdb.TransactionException):
                    self.con.unregister(name)

    def note_service_clock(self, now: dt.datetime | None) -> None:
        """The service's clock: months read are verified at it; history notes it once."""
        self.service_now = now
        history.note_clock(self.con, self.refresh_id, now)
        self.clock_noted = now

    def _snapshotted(self, entity: str) -> bool:
        """Whether `entity` was already snapshotted in this session (its history rows of this
        refresh are then replaced, not added to; a service aggregate's rows of this refresh
        likewise); marks it snapshotted."""
        again = entity in self._snapshots
        self._snapshots.add(entity)
        return again

    def _rid(self) -> str:
        if self.refresh_id is None:
            raise WarehouseError("no refresh started: call start_refresh() (refreshing() does)")
        return self.refresh_id

    def _split(self, entity: str, frame: pl.DataFrame) -> v.Split:
        """Validate a frame, also rejecting rows whose raw payload is not valid JSON."""
        return self._reject_bad_json(v.split_valid(entity, frame))

    def _reject_bad_json(self, split: v.Split) -> v.Split:
        """Move the valid rows whose raw payload DuckDB's JSON type refuses to the rejected."""
        if split.valid.height == 0:
            return split
        if split.valid.height <= common.PARSED_HERE and common.all_json(
            split.valid.get_column("raw")
        ):
            return split  # strict JSON to orjson is JSON to DuckDB: nothing to ask it
        with self._registered(split.valid.select("raw")) as name:
            bad = self.con.execute(
                f"SELECT DISTINCT raw FROM {name} WHERE NOT json_valid(raw)"
            ).fetchall()
        if not bad:
            return split
        bad_raw = [row[0] for row in bad]
        is_bad = pl.col("raw").is_in(bad_raw)
        rejected = pl.concat(
            [
                split.rejected,
                split.valid.filter(is_bad).select(
                    pl.col("raw").alias("record"), pl.lit("raw: not valid JSON").alias("reason")
                ),
            ]
        )
        return v.Split(split.valid.filter(~is_bad), rejected)

    def _land_rejected(self, entity: str, rejected: pl.DataFrame) -> None:
        """Store rejected rows with their reasons (inside the caller's transaction): once per
        refresh, however often the refresh read the row (a window re-read reads it again)."""
        if rejected.height == 0:
            return
        with self._registered(rejected.unique(subset=["record"], keep="first")) as name:
            self.con.execute(
                f"""
                INSERT INTO raw.rejected_rows SELECT ?1, ?2, r.record, r.reason, now()
                FROM (SELECT CASE WHEN json_valid(record) THEN record::JSON ELSE to_json(record) END
                             AS record, reason FROM {name}) r
                WHERE NOT EXISTS (SELECT 1 FROM raw.rejected_rows x WHERE x.refresh_id = ?1
                    AND x.entity = ?2 AND x.record::VARCHAR = r.record::VARCHAR)
                """,
                [self._rid(), entity],
            )

    def _one(self, sql: str, params: Sequence[Any] | None = None) -> tuple[Any, ...] | None:
        """The first row of a query, reading the result to its end (DuckDB 2 refuses new work
        on a connection while an execute() result is unfinished)."""
        rows = self.con.execute(sql, params or []).fetchall()
        return rows[0] if rows else None

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """Run SQL and return the result as a Polars frame."""
        return frames.frame(self.con, sql, params)

    # -- ops: refreshes, meta, month state -----------------------------------------------------

    def start_refresh(
        self, *, mode: RefreshMode = "incremental", refresh_id: str | None = None
    ) -> str:
        """Record a refresh as running; earlier refreshes still 'running' become 'interrupted'."""
        if mode not in ("full", "incremental", "hot", "months"):
            raise ValueError(f"mode must be full, incremental, hot or months, got {mode!r}")
        rid = refresh_id or new_refresh_id()
        with self.transaction() as con:
            con.execute(
                "UPDATE ops.refreshes SET status = 'interrupted', finished_at = coalesce(finished_at, now()) "
                "WHERE status = 'running'"
            )
            con.execute(
                "INSERT INTO ops.refreshes (refresh_id, started_at, status, mode) VALUES (?, now(), 'running', ?)",
                [rid, mode],
            )
        self.refresh_id = rid
        self.stats = RefreshStats()
        self._snapshots = set()
        return rid

    def finish_refresh(
        self,
        status: Literal["succeeded", "failed", "interrupted"] = "succeeded",
        *,
        requests: Mapping[str, int] | None = None,
        months_checked: int | None = None,
        error: str | None = None,
        mode: RefreshMode | None = None,
    ) -> None:
        """Close the refresh's ops.refreshes row with its counters and requests per endpoint.

        `mode` corrects the recorded mode to what the refresh did (full because the timezone
        changed or nothing was local; hot; a `--months` range).
        """
        req = dict(requests) if requests is not None else None
        with self.transaction() as con:
            con.execute(
                """
                UPDATE ops.refreshes SET
                    finished_at = now(), status = ?, rows_landed = ?, rows_changed = ?,
                    rows_rejected = ?, requests = ?, requests_total = ?, months_checked = ?,
                    months_reread = ?, error = ?, mode = coalesce(?, mode),
                    transactions_new = ?, transactions_updated = ?, transactions_removed = ?
                WHERE refresh_id = ?
                """,
                [
                    status,
                    self.stats.rows_landed,
                    self.stats.rows_changed,
                    self.stats.rows_rejected,
                    orjson.dumps(req).decode() if req is not None else None,
                    sum(req.values()) if req is not None else None,
                    months_checked,
                    orjson.dumps(self.stats.months_reread).decode(),
                    error,
                    mode,
                    *self.stats.transaction_counts,
                    self._rid(),
                ],
            )

    def refresh_status(self, refresh_id: str | None = None) -> str | None:
        """The status recorded for a refresh (this one by default)."""
        row = self._one(
            "SELECT status FROM ops.refreshes WHERE refresh_id = ?", [refresh_id or self._rid()]
        )
        return str(row[0]) if row else None

    def set_meta(self, key: str, value: str | None) -> None:
        """Set one ops.meta key."""
        self.set_metas({key: value})

    def set_metas(self, values: Mapping[str, str | None]) -> None:
        """Set several ops.meta keys in one transaction."""
        if values:
            with self.transaction() as con:
                common.write_metas(con, values)

    def refresh_settings(
        self, *, memory: str | None = None, single_thread: bool | None = None
    ) -> None:
        """DuckDB's knobs for a refresh: its buffer pool (`memory`, a DuckDB size such as
        '160MB'; it spills past it), and one thread or DuckDB's default (all cores)."""
        if memory is not None:
            quoted = memory.replace("'", "''")  # a setting's text, never SQL
            self._setting("memory_limit", f"'{quoted}'")
        if single_thread is not None:
            self._setting("threads", "1" if single_thread else None)
            optimise = not single_thread or SMALL_REFRESH_OPTIMIZER
            self._setting("enable_optimizer", None if optimise else "false")

    def _setting(self, name: str, value: str | None) -> None:
        """SET a DuckDB setting (None: RESET it to DuckDB's default), unless already in effect
        (a shared instance keeps the last refresh's: instances.py)."""
        if self._applied.get(name) == value:
            return
        self.con.execute(f"SET {name} = {value}" if value is not None else f"RESET {name}")
        if value is None:
            self._applied.pop(name, None)
        else:
            self._applied[name] = value

    def get_meta(self, key: str) -> str | None:
        """Read one ops.meta key (None when unset)."""
        row = self._one("SELECT value FROM ops.meta WHERE key = ?", [key])
        return None if row is None or row[0] is None else str(row[0])


def checkpoint(con: duckdb.DuckDBPyConnection) -> None:
    """Write what the connection holds in memory to its file (DuckDB's CHECKPOINT), then give
    the memory that held it back to the system (`release`)."""
    con.execute("CHECKPOINT")
    instances.release(con)


def is_interrupt(exc: BaseException) -> bool:
    """Ctrl-C or SIGTERM: Python's KeyboardInterrupt, or DuckDB's own report of a query that
    the signal interrupted."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    interrupt = getattr(duckdb, "InterruptException", None)
    if interrupt is not None and isinstance(exc, interrupt):
        return True
    if isinstance(exc, RuntimeError) and "Query interrupted" in str(exc):
        return True
    # the signal landed in Python code DuckDB was calling back (reading a registered Arrow
    # object): DuckDB reports the KeyboardInterrupt inside its own error
    return isinstance(exc, duckdb.Error) and "KeyboardInterrupt" in str(exc)


def resumable(exc: BaseException) -> bool:
    """A failure a later refresh resumes from: one that says it is transient (`retryable`:
    the service's rate limit, its errors, a dropped connection), not a bug or a bad row."""
    return isinstance(exc, Exception) and bool(getattr(exc, "retryable", False))


def _publish_interrupted(wh: Session, work: Path, published: Path, exc: BaseException) -> bool:
    """Publish an interrupted refresh's working copy, marked 'interrupted'; False if it can't."""
    try:
        error = "interrupted" if is_interrupt(exc) else str(exc).splitlines()[0][:500]
        wh.finish_refresh(status="interrupted", error=f"{type(exc).__name__}: {error}")
        wh.con.execute("CHECKPOINT")
        wh.close()
        paths.publish_file(work, published)
        return True
    except Exception:
        log.exception("could not keep what the interrupted refresh read")
        return False


def _record_failure(
    published: Path, refresh_id: str, mode: str, stats: RefreshStats, exc: BaseException
) -> None:
    """Best effort: add a 'failed' ops.refreshes row to the published warehouse (data untouched)."""
    tmp = published.with_name(published.name + ".failing")
    try:
        paths.remove(tmp)
        if published.exists():
            shutil.copyfile(published, tmp)
        else:
            new_file(tmp)
        con = duckdb.connect(str(tmp), config=NEW_FILE)
        try:
            migrate(con)
            con.execute(
                """
                INSERT INTO ops.refreshes (refresh_id, started_at, finished_at, status, mode,
                    rows_landed, rows_changed, rows_rejected, months_reread, error)
                VALUES (?, now(), now(), ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (refresh_id) DO UPDATE SET finished_at = excluded.finished_at,
                    status = excluded.status, rows_landed = excluded.rows_landed,
                    rows_changed = excluded.rows_changed, rows_rejected = excluded.rows_rejected,
                    months_reread = excluded.months_reread, error = excluded.error
                """,
                [
                    refresh_id,
                    "interrupted" if is_interrupt(exc) else "failed",
                    mode,
                    stats.rows_landed,
                    stats.rows_changed,
                    stats.rows_rejected,
                    orjson.dumps(stats.months_reread).decode(),
                    f"{type(exc).__name__}: {exc}"[:2000],
                ],
            )
            con.execute("CHECKPOINT")
        finally:
            con.close()
        paths.publish_file(tmp, published)
    except Exception as e:  # the refresh's error matters more: one line, traceback with --debug
        why = str(e).partition("\n")[0] or type(e).__name__  # a full disk, a read-only folder
        log.warning("could not record the failed refresh %s (%s)", refresh_id, why,
                    exc_info=log.isEnabledFor(logging.DEBUG))  # fmt: skip
        paths.remove(tmp)


def _connect_working_copy(
    work: Path, published: Path
) -> tuple[duckdb.DuckDBPyConnection, Callable[[bool, bool], None] | None]:
    """A connection to a refresh's working copy, set for a refresh, and what detaches it: a
    small warehouse's copy is attached to the thread's DuckDB instance (instances.py), a big
    one or a first sync's gets an instance of its own (None)."""
    size = published.stat().st_size if published.exists() else None
    if size is not None and size <= instances.SHARED_MAX_BYTES:
        return instances.attach(work)
    con = duckdb.connect(str(work), config=NEW_FILE)  # a copy keeps its own block size
    for sql in instances.WORKING_SETTINGS:
        con.execute(sql)
    return con, None


# A warehouse up to this size is written anew, compact, at the end of each refresh (below)
COMPACT_MAX_BYTES = 16 * 1024 * 1024


def _compact_path(work: Path) -> Path:
    return work.with_name(work.name + ".compact")


def _finish_file(wh: Session, work: Path) -> Path:
    """The file to publish: a small warehouse copied compact into a new file, else the working
    copy checkpointed. Closes the working copy.

    DuckDB writes a refresh's changed tables to new blocks and keeps the old ones free in the
    file (reused later, never given back): a 3-year household's 1.5 MB grew to 2.7-3 MB at
    steady state. `COPY FROM DATABASE` into a new file writes each table once (every table,
    view, comment and constraint: tests/warehouse/test_compact.py), straight from the working
    copy's state, so the working copy is closed without its own checkpoint. Measured on a
    household: ~70 ms against ~35 ms for the checkpoint it replaces (docs/scale.md).
    """
    wal = work.with_name(work.name + ".wal")
    size = sum(p.stat().st_size for p in (work, wal) if p.exists())
    block, source = wh.con.execute(
        "SELECT block_size, database_name FROM pragma_database_size() "
        "WHERE database_name = current_database()"
    ).fetchall()[0]
    if size > COMPACT_MAX_BYTES or block != BLOCK_SIZE:
        # a big warehouse's refresh rewrites a small share of it; an old file keeps its blocks
        wh.con.execute("CHECKPOINT")
        wh.close()
        return work
    target = _compact_path(work)
    paths.remove(target)
    instances.copy_compact(wh.con, source, target)
    # the working copy's state is in the compact file: its own checkpoint would be wasted
    wh.close(checkpoint=False)
    paths.remove(work)
    return target
