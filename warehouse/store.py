"""The Warehouse handle: loaders (one DuckDB transaction each) and read helpers for the refresh."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import duckdb
import orjson
import polars as pl

from centsync.warehouse import paths
from centsync.warehouse import validation as v
from centsync.warehouse.errors import MonthBoundsError, WarehouseError
from centsync.warehouse.migrate import current_version, migrate

log = logging.getLogger(__name__)

MonthLike = str | dt.date
Mode = Literal["full", "incremental"]
Period = Literal["month", "year"]

# Columns of core.transactions compared to decide whether a re-read row changed.
_TX_COMPARED = (
    "account_id",
    "concept",
    "amount",
    "booked_at",
    "type",
    "category_id",
    "expense_goal_id",
    "created_at",
    "updated_at",
)
_TX_SELECT = """
    id::UUID AS id, account_id::UUID AS account_id, concept, amount, booked_at,
    date_trunc('month', booked_at)::DATE AS month, type, category_id::UUID AS category_id,
    expense_goal_id::UUID AS expense_goal_id, created_at, updated_at
"""


def month_start(month: MonthLike) -> dt.date:
    """The first day of a month given as 'YYYY-MM', a date, or a datetime."""
    if isinstance(month, dt.date):
        return month.replace(day=1)
    try:
        return dt.datetime.strptime(month, "%Y-%m").date()
    except ValueError as exc:
        raise ValueError(f"month must be 'YYYY-MM', got {month!r}") from exc


def month_key(day: dt.date) -> str:
    """'YYYY-MM' of a date: the form months take in this API (and the server's month keys)."""
    return f"{day.year:04d}-{day.month:02d}"


def new_refresh_id() -> str:
    """A sortable, unique refresh id: UTC time then a random suffix."""
    now = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{now}-{uuid.uuid4().hex[:8]}"


def category_hash(rows: Iterable[tuple[str | None, int, int]]) -> str:
    """A stable digest of per-category spending: (category_id or None, amount cents, count) rows.

    Used on both sides: local rows from `local_category_spending`, server rows from the spending
    endpoint grouped by category. Order-independent; an uncategorised key is None.
    """
    parts = sorted(
        f"{(cid or '-').lower()}:{int(amount)}:{int(count)}" for cid, amount, count in rows
    )
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


@dataclass
class LoadResult:
    """What one load did: rows landed and rejected, and how the current state changed."""

    entity: str
    landed: int = 0
    rejected: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    moved_from: list[str] = field(default_factory=list)  # other months rows moved out of

    @property
    def changed(self) -> int:
        """Rows added, altered or removed in the current state."""
        return self.inserted + self.updated + self.deleted


@dataclass
class SettingsResult:
    """The outcome of a settings snapshot: the timezone before and after."""

    previous_timezone: str | None
    timezone: str | None
    rejected: int = 0

    @property
    def timezone_changed(self) -> bool:
        """True when a known earlier timezone differs from the new one (every month is stale)."""
        return (
            self.previous_timezone is not None
            and self.timezone is not None
            and self.previous_timezone != self.timezone
        )


@dataclass
class RefreshStats:
    """Counters a refresh accumulates as it loads; written to ops.refreshes at the end."""

    rows_landed: int = 0
    rows_changed: int = 0
    rows_rejected: int = 0
    months_reread: list[dict[str, Any]] = field(default_factory=list)

    def add(self, result: LoadResult) -> None:
        """Count one load."""
        self.rows_landed += result.landed
        self.rows_changed += result.changed
        self.rows_rejected += result.rejected


class Warehouse:
    """A read-write handle on one DuckDB warehouse file (usually a refresh's working copy)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, *, read_only: bool = False):
        self.con = con
        self.path = path
        self.read_only = read_only
        self.refresh_id: str | None = None
        self.stats = RefreshStats()
        self._published_path: Path | None = None
        self._counter = 0

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, path: str | os.PathLike[str] | None = None, *, read_only: bool = False
    ) -> Warehouse:
        """Open a warehouse file directly (migrating it unless read-only).

        Writing the published file directly blocks analysts' read-only connections: refreshes
        should use `Warehouse.refreshing` instead.
        """
        target = paths.resolve(path)
        if read_only:
            return cls(paths.connect_readonly(target), target, read_only=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(str(target))
        migrate(con)
        return cls(con, target)

    @classmethod
    @contextlib.contextmanager
    def refreshing(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        mode: Mode = "incremental",
        refresh_id: str | None = None,
        record: bool = True,
    ) -> Iterator[Warehouse]:
        """Run a refresh on a private working copy; publish it atomically on success.

        On an exception the working copy is discarded and the published warehouse is left as it
        was (plus a 'failed' row in ops.refreshes). Only one refresh runs at a time (a lock file);
        copies left by a killed refresh are removed first. `record=False` is the same write
        session without an ops.refreshes row (see `Warehouse.publishing`).
        """
        published = paths.resolve(path)
        published.parent.mkdir(parents=True, exist_ok=True)
        rid = refresh_id or new_refresh_id()
        with paths.refresh_lock(published):
            for stale in paths.stale_copies(published) + paths.stale_temporaries(published):
                log.warning("removing %s left by an interrupted refresh", stale.name)
                stale.unlink(missing_ok=True)
            work = paths.working_path(published, rid)
            if published.exists():
                shutil.copyfile(published, work)
            wh: Warehouse | None = None
            try:
                con = duckdb.connect(str(work))
                # Automatic checkpoints every 16 MB of WAL rewrite the primary-key index again and
                # again (a third of a month-by-month first sync); never checkpointing keeps every
                # row in memory until the end (+700 MB at 1M rows). 64 MB measured best of both.
                con.execute("SET checkpoint_threshold = '64MB'")
                wh = cls(con, work)
                wh._published_path = published
                migrate(con)
                if record:
                    wh.start_refresh(mode=mode, refresh_id=rid)
                else:
                    wh.refresh_id = rid
                yield wh
                if record and wh.refresh_status() == "running":
                    wh.finish_refresh()
                wh.con.execute("CHECKPOINT")
                wh.close()
                paths.publish_file(work, published)
            except BaseException as exc:
                stats = wh.stats if wh is not None else RefreshStats()
                if wh is not None:
                    wh.close()
                paths.remove(work)
                if record:
                    _record_failure(published, rid, mode, stats, exc)
                raise

    @classmethod
    def publishing(
        cls, path: str | os.PathLike[str] | None = None
    ) -> contextlib.AbstractContextManager[Warehouse]:
        """A write session that is not a refresh (reconciliation results, marts, the outbox).

        Same guarantees as `refreshing`: a private copy, published atomically on success,
        discarded on an exception, one writer at a time; no ops.refreshes row.
        """
        return cls.refreshing(path, record=False)

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

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with contextlib.suppress(duckdb.Error):
            self.con.close()

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One DuckDB transaction: commit on success, roll back on any exception."""
        self.con.begin()
        try:
            yield self.con
            self.con.commit()
        except BaseException:
            self.con.rollback()
            raise

    @contextlib.contextmanager
    def _registered(self, frame: pl.DataFrame) -> Iterator[str]:
        """Expose a frame to SQL as an Arrow view (zero copy), for INSERT ... SELECT."""
        self._counter += 1
        name = f"_incoming_{self._counter}"
        # Newest compat level keeps Polars' string views: no copy of every string on the way in.
        self.con.register(name, frame.to_arrow(compat_level=pl.CompatLevel.newest()))
        try:
            yield name
        finally:
            # Inside a failed transaction DuckDB refuses even this; the original error matters.
            with contextlib.suppress(duckdb.TransactionException):
                self.con.unregister(name)

    def _rid(self) -> str:
        if self.refresh_id is None:
            raise WarehouseError("no refresh started: call start_refresh() (refreshing() does)")
        return self.refresh_id

    def _split(self, entity: str, frame: pl.DataFrame) -> v.Split:
        """Validate a frame, also rejecting rows whose raw payload is not valid JSON."""
        split = v.split_valid(entity, frame)
        if split.valid.height == 0:
            return split
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
        """Store rejected rows with their reasons (inside the caller's transaction)."""
        if rejected.height == 0:
            return
        with self._registered(rejected) as name:
            self.con.execute(
                f"""
                INSERT INTO raw.rejected_rows
                SELECT ?, ?, CASE WHEN json_valid(record) THEN record::JSON ELSE to_json(record) END,
                       reason, now()
                FROM {name}
                """,
                [self._rid(), entity],
            )

    def _one(self, sql: str, params: Sequence[Any] | None = None) -> tuple[Any, ...] | None:
        """The first row of a query, reading the result to its end (DuckDB 2 refuses new work
        on a connection while an execute() result is unfinished)."""
        rows = self.con.execute(sql, params or []).fetchall()
        return rows[0] if rows else None

    def _df(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        self.con.complete()  # finish any caller's half-read execute() result first
        result = pl.from_arrow(
            self.con.sql(sql, params=list(params) if params else None).to_arrow_table()
        )
        assert isinstance(result, pl.DataFrame)
        return result

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """Run SQL and return the result as a Polars frame."""
        return self._df(sql, params)

    # -- ops: refreshes, meta, month state -----------------------------------------------------

    def start_refresh(self, *, mode: Mode = "incremental", refresh_id: str | None = None) -> str:
        """Record a refresh as running; earlier refreshes still 'running' become 'interrupted'."""
        if mode not in ("full", "incremental"):
            raise ValueError(f"mode must be full or incremental, got {mode!r}")
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
        return rid

    def finish_refresh(
        self,
        status: Literal["succeeded", "failed"] = "succeeded",
        *,
        requests: Mapping[str, int] | None = None,
        months_checked: int | None = None,
        error: str | None = None,
        mode: Mode | None = None,
    ) -> None:
        """Close the refresh's ops.refreshes row with its counters and requests per endpoint.

        `mode` corrects the recorded mode (an incremental refresh that became full because the
        timezone changed).
        """
        req = dict(requests) if requests is not None else None
        with self.transaction() as con:
            con.execute(
                """
                UPDATE ops.refreshes SET
                    finished_at = now(), status = ?, rows_landed = ?, rows_changed = ?,
                    rows_rejected = ?, requests = ?, requests_total = ?, months_checked = ?,
                    months_reread = ?, error = ?, mode = coalesce(?, mode)
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
        with self.transaction() as con:
            con.execute(
                "INSERT OR REPLACE INTO ops.meta (key, value, updated_at) VALUES (?, ?, now())",
                [key, value],
            )

    def get_meta(self, key: str) -> str | None:
        """Read one ops.meta key (None when unset)."""
        row = self._one("SELECT value FROM ops.meta WHERE key = ?", [key])
        return None if row is None or row[0] is None else str(row[0])

    def record_month_fingerprints(
        self, fingerprints: pl.DataFrame | Sequence[Mapping[str, Any]]
    ) -> int:
        """Remember the server's per-month fingerprints (count, sums per type, category hash).

        Columns: month ('YYYY-MM' or date), count, income, expense, transfer, and optionally net
        and category_hash. Upserts ops.month_state; returns the number of months recorded.
        """
        frame = (
            fingerprints
            if isinstance(fingerprints, pl.DataFrame)
            else pl.DataFrame(list(fingerprints))
        )
        if frame.height == 0:
            return 0
        months = [month_start(m) for m in frame.get_column("month").to_list()]
        cols: dict[str, Any] = {
            "month": pl.Series(months, dtype=pl.Date),
            "count": frame.get_column("count").cast(pl.Int64),
        }
        for name in ("income", "expense", "transfer"):
            cols[name] = frame.get_column(name).cast(pl.Int64)
        cols["net"] = (
            frame.get_column("net").cast(pl.Int64)
            if "net" in frame.columns
            else cols["income"] + cols["expense"] + cols["transfer"]
        )
        cols["category_hash"] = (
            frame.get_column("category_hash").cast(pl.String)
            if "category_hash" in frame.columns
            else pl.Series([None] * frame.height, dtype=pl.String)
        )
        with self._registered(pl.DataFrame(cols)) as name, self.transaction() as con:
            con.execute(
                f"""
                INSERT INTO ops.month_state (month, server_count, server_income, server_expense,
                    server_transfer, server_net, server_category_hash, checked_refresh, checked_at)
                SELECT month, count, income, expense, transfer, net, category_hash, ?, now() FROM {name}
                ON CONFLICT (month) DO UPDATE SET
                    server_count = excluded.server_count, server_income = excluded.server_income,
                    server_expense = excluded.server_expense, server_transfer = excluded.server_transfer,
                    server_net = excluded.server_net, server_category_hash = excluded.server_category_hash,
                    checked_refresh = excluded.checked_refresh, checked_at = excluded.checked_at
                """,
                [self._rid()],
            )
        return frame.height

    # -- transactions ---------------------------------------------------------------------------

    def replace_months(
        self, months: Iterable[MonthLike], frame: pl.DataFrame, *, reason: str = "re-read"
    ) -> LoadResult:
        """Replace every transaction of these months with the frame's rows, in one transaction.

        The frame must hold the months' complete current rows; a row dated outside the months is
        an error and nothing changes. A row whose id sits in another month locally (its
        booked_at moved) is moved: `LoadResult.moved_from` names those months.
        """
        month_list = sorted({month_start(m) for m in months})
        if not month_list:
            raise ValueError("replace_months needs at least one month")
        split = self._split("transactions", frame)
        outside = (
            split.valid.select(pl.col("booked_at").dt.truncate("1mo").unique())
            .filter(~pl.col("booked_at").is_in(month_list))
            .get_column("booked_at")
            .to_list()
        )
        if outside:
            raise MonthBoundsError(
                f"rows dated in {sorted(month_key(d) for d in outside)} were handed to replace_months "
                f"for {[month_key(d) for d in month_list]}; nothing was changed"
            )
        return self._replace_transactions(month_list, split, reason=reason, everything=False)

    def replace_all_transactions(
        self, frame: pl.DataFrame, *, reason: str = "full refresh"
    ) -> LoadResult:
        """Replace the whole ledger with the frame (a full re-read), in one transaction."""
        split = self._split("transactions", frame)
        months = (
            split.valid.select(pl.col("booked_at").dt.truncate("1mo").unique().sort())
            .get_column("booked_at")
            .to_list()
        )
        present = [month_start(m) for m in self.months_present()]
        return self._replace_transactions(
            sorted(set(months) | set(present)), split, reason=reason, everything=True
        )

    def _replace_transactions(
        self, months: list[dt.date], split: v.Split, *, reason: str, everything: bool
    ) -> LoadResult:
        with self._registered(split.valid) as src:
            return self._replace_from(
                months,
                src,
                split.valid.height,
                split.rejected,
                reason=reason,
                everything=everything,
            )

    def _replace_from(
        self,
        months: list[dt.date],
        src: str,
        landed: int,
        rejected: pl.DataFrame,
        *,
        reason: str,
        everything: bool,
    ) -> LoadResult:
        """Replace the months with the validated rows of ``src`` (a view or table), atomically."""
        args = (months, src, landed, rejected)
        if everything:
            return self._replace_once(*args, reason=reason, everything=True, moves=False)
        try:
            # Optimistic: rows rarely move between months, and finding moved rows scans every
            # id. If one did move, the primary key refuses the insert and we redo with the scan.
            return self._replace_once(*args, reason=reason, everything=False, moves=False)
        except duckdb.ConstraintException:
            return self._replace_once(*args, reason=reason, everything=False, moves=True)

    def stage_transactions(self) -> TransactionStage:
        """A stage for a window read as a stream: validated batches wait in a DuckDB temp
        table (which spills to disk under the memory limit) until the read is accepted, then
        replace their months in one transaction. Python holds one batch at a time."""
        return TransactionStage(self)

    def _replace_once(
        self,
        months: list[dt.date],
        src: str,
        landed: int,
        rejected: pl.DataFrame,
        *,
        reason: str,
        everything: bool,
        moves: bool,
    ) -> LoadResult:
        rid = self._rid()
        result = LoadResult("transactions", landed=landed, rejected=rejected.height)
        timezone = self.get_meta("timezone")
        # Literal month lists and date ranges (not subqueries) let DuckDB skip row groups by
        # their min/max, so a one-month replace on a big ledger does not scan it all.
        in_months = _month_filter("month", months)
        in_raw_months = _date_ranges("booked_at", months)
        with self.transaction() as con:
            con.execute(f"CREATE OR REPLACE TEMP VIEW _new_tx AS SELECT {_TX_SELECT} FROM {src}")
            differs = " OR ".join(f"n.{c} IS DISTINCT FROM o.{c}" for c in _TX_COMPARED)
            cols = "id, " + ", ".join(_TX_COMPARED) + ", month"
            old = "_old_tx"
            if everything:
                old = "core.transactions"  # compared in place: a temp copy would hold it all in memory
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE _old_tx AS SELECT {cols} FROM core.transactions LIMIT 0"
                )
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE _moved_tx AS SELECT {cols} FROM _old_tx LIMIT 0"
                )
            elif not moves:
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE _moved_tx AS SELECT {cols} FROM core.transactions LIMIT 0"
                )
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE _old_tx AS SELECT {cols} FROM core.transactions WHERE {in_months}"
                )
            else:
                # Rows of this frame that sit in another month locally (booked_at moved): one scan.
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE _moved_tx AS SELECT {cols} FROM core.transactions o "
                    f"WHERE NOT ({in_months}) AND o.id IN (SELECT id FROM _new_tx)"
                )
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE _old_tx AS SELECT {cols} FROM core.transactions "
                    f"WHERE {in_months} UNION ALL SELECT * FROM _moved_tx"
                )
            if con.execute(f"SELECT count(*) FROM {old}").fetchall()[0][0] == 0:
                row: tuple[Any, ...] = (landed, 0, 0, 0)  # new months: nothing to diff
            else:
                row = con.execute(
                    f"""
                SELECT (SELECT count(*) FROM _new_tx n ANTI JOIN {old} o ON o.id = n.id),
                       (SELECT count(*) FROM _new_tx n JOIN {old} o ON o.id = n.id WHERE {differs}),
                       (SELECT count(*) FROM {old} o ANTI JOIN _new_tx n ON o.id = n.id),
                       (SELECT count(*) FROM _moved_tx)
                """
                ).fetchall()[0]
            result.inserted, result.updated, result.deleted = int(row[0]), int(row[1]), int(row[2])
            if row[3]:
                moved = con.execute("SELECT DISTINCT month FROM _moved_tx ORDER BY 1").fetchall()
                result.moved_from = [month_key(r[0]) for r in moved]
            if everything:
                con.execute("DELETE FROM core.transactions")
                con.execute("DELETE FROM raw.transactions")
            else:
                con.execute(f"DELETE FROM core.transactions WHERE {in_months}")
                con.execute(f"DELETE FROM raw.transactions WHERE {in_raw_months}")
                if row[3]:
                    con.execute(
                        "DELETE FROM core.transactions WHERE id IN (SELECT id FROM _moved_tx)"
                    )
                    con.execute(
                        "DELETE FROM raw.transactions WHERE id IN (SELECT id FROM _moved_tx)"
                    )
            con.execute("DROP TABLE _old_tx")
            con.execute("DROP TABLE _moved_tx")
            self._insert_core_transactions(src, rid)
            con.execute(
                f"INSERT INTO raw.transactions SELECT id::UUID, booked_at, ?, raw::JSON FROM {src}",
                [rid],
            )
            self._land_rejected("transactions", rejected)
            # Month bookkeeping commits with the rows, so a stopped refresh knows what it read.
            counts = pl.DataFrame(
                con.execute(
                    f"SELECT date_trunc('month', booked_at)::DATE AS month, count(*) AS rows "
                    f"FROM {src} GROUP BY 1"
                ).fetchall(),
                schema={"month": pl.Date, "rows": pl.Int64},
                orient="row",
            )
            per_month = (
                pl.DataFrame({"month": pl.Series(months, dtype=pl.Date)})
                .join(counts, on="month", how="left")
                .with_columns(pl.col("rows").fill_null(0).cast(pl.Int64))
            )
            with self._registered(per_month) as pm:
                con.execute(
                    f"""
                    INSERT INTO ops.month_state (month, read_refresh, read_at, read_reason, read_rows, read_timezone)
                    SELECT month, ?, now(), ?, rows, ? FROM {pm}
                    ON CONFLICT (month) DO UPDATE SET read_refresh = excluded.read_refresh,
                        read_at = excluded.read_at, read_reason = excluded.read_reason,
                        read_rows = excluded.read_rows, read_timezone = excluded.read_timezone
                    """,
                    [rid, reason, timezone],
                )
                con.execute(
                    f"INSERT INTO ops.month_reads SELECT ?, month, ?, rows, now() FROM {pm}",
                    [rid, reason],
                )
            con.execute("DROP VIEW IF EXISTS _new_tx")
        self.stats.add(result)
        self.stats.months_reread.extend({"month": month_key(m), "reason": reason} for m in months)
        return result

    def batched(self, *, rows: int = 100_000) -> MonthBatch:
        """A writer that packs month replaces into transactions of at least `rows` rows.

        Each replace_months call has a fixed cost (validation, a transaction, a commit): on
        a ledger of small months, packing them is 2-3x faster. Use as a context manager;
        pending months are written on a clean exit (or by `flush`).
        """
        return MonthBatch(self, rows=rows)

    def _insert_core_transactions(self, src: str, refresh_id: str) -> None:
        """Insert validated rows into core.transactions (a seam the atomicity tests break)."""
        self.con.execute(
            f"INSERT INTO core.transactions SELECT {_TX_SELECT}, ? FROM {src}", [refresh_id]
        )

    # -- snapshots ------------------------------------------------------------------------------

    def _snapshot(
        self,
        entity: str,
        frame: pl.DataFrame,
        *,
        key: str,
        core_cols: str,
        compared: Sequence[str],
        history_cols: str,
        extra: Iterable[str] = (),
    ) -> LoadResult:
        """Replace core.<entity> and raw.<entity> with the frame; append history.<entity>."""
        rid = self._rid()
        split = self._split(entity, frame)
        result = LoadResult(entity, landed=split.valid.height, rejected=split.rejected_count)
        with self._registered(split.valid) as src, self.transaction() as con:
            con.execute(f"CREATE OR REPLACE TEMP VIEW _new_snap AS SELECT {core_cols} FROM {src}")
            differs = " OR ".join(f"n.{c} IS DISTINCT FROM o.{c}" for c in compared)
            row = con.execute(
                f"""
                SELECT count(*) FILTER (WHERE o.{key} IS NULL),
                       count(*) FILTER (WHERE o.{key} IS NOT NULL AND ({differs})),
                       (SELECT count(*) FROM core.{entity} oo ANTI JOIN _new_snap nn ON oo.{key} = nn.{key})
                FROM _new_snap n LEFT JOIN core.{entity} o ON o.{key} = n.{key}
                """
            ).fetchall()[0]
            assert row is not None
            result.inserted, result.updated, result.deleted = int(row[0]), int(row[1]), int(row[2])
            con.execute(f"DELETE FROM core.{entity}")
            con.execute(f"INSERT INTO core.{entity} SELECT *, ? FROM _new_snap", [rid])
            con.execute(f"DELETE FROM raw.{entity}")
            con.execute(
                f"INSERT INTO raw.{entity} SELECT {key}::UUID, ?, raw::JSON FROM {src}", [rid]
            )
            # Re-snapshotting within one refresh replaces that refresh's history rows: one per refresh.
            con.execute(f"DELETE FROM history.{entity} WHERE refresh_id = ?", [rid])
            con.execute(
                f"INSERT INTO history.{entity} SELECT refresh_id, now(), {history_cols} FROM core.{entity}"
            )
            for sql in extra:
                con.execute(sql, [rid])
            self._land_rejected(entity, split.rejected)
            con.execute("DROP VIEW IF EXISTS _new_snap")
        self.stats.add(result)
        return result

    def snapshot_accounts(self, frame: pl.DataFrame) -> LoadResult:
        """Land the accounts list: current table, raw, history, and this refresh's net worth."""
        return self._snapshot(
            "accounts",
            frame,
            key="id",
            core_cols="id::UUID AS id, name, type, subtype, currency, balance, "
            "connection_id::UUID AS connection_id, institution, updated_at",
            compared=(
                "name",
                "type",
                "subtype",
                "currency",
                "balance",
                "connection_id",
                "institution",
                "updated_at",
            ),
            history_cols="id, name, type, subtype, currency, balance, connection_id, institution, updated_at",
            extra=[
                "DELETE FROM history.net_worth WHERE refresh_id = $1",
                """
                INSERT INTO history.net_worth
                SELECT $1, now(), any_value(currency),
                       coalesce(sum(balance) FILTER (WHERE balance > 0), 0)::BIGINT,
                       coalesce(-sum(balance) FILTER (WHERE balance < 0), 0)::BIGINT,
                       coalesce(sum(balance), 0)::BIGINT, count(*)
                FROM core.accounts
                """,
            ],
        )

    def snapshot_connections(self, frame: pl.DataFrame) -> LoadResult:
        """Land the connections list: current table, raw and history."""
        return self._snapshot(
            "connections",
            frame,
            key="id",
            core_cols="id::UUID AS id, provider, institution, status, last_synced_at, "
            "account_ids::UUID[] AS account_ids",
            compared=("provider", "institution", "status", "last_synced_at", "account_ids"),
            history_cols="id, provider, institution, status, last_synced_at, account_ids",
        )

    def snapshot_sync_status(self, frame: pl.DataFrame) -> LoadResult:
        """Land the sync status list: current table, raw and history."""
        return self._snapshot(
            "sync_status",
            frame,
            key="connection_id",
            core_cols="connection_id::UUID AS connection_id, provider, status, last_synced_at, next_sync_at",
            compared=("provider", "status", "last_synced_at", "next_sync_at"),
            history_cols="connection_id, provider, status, last_synced_at, next_sync_at",
        )

    def snapshot_settings(self, settings: Mapping[str, Any] | pl.DataFrame) -> SettingsResult:
        """Land the settings (one row) and remember the timezone; says whether it changed."""
        rid = self._rid()
        if isinstance(settings, pl.DataFrame):
            frame = settings
        else:
            frame = pl.DataFrame(
                {
                    **{
                        k: [None if settings.get(k) is None else str(settings.get(k))]
                        for k in ("timezone", "currency", "locale", "week_start")
                    },
                    "raw": [orjson.dumps(dict(settings)).decode()],
                },
                schema={
                    "timezone": pl.String,
                    "currency": pl.String,
                    "locale": pl.String,
                    "week_start": pl.String,
                    "raw": pl.String,
                },
            )
        previous = self.get_meta("timezone")
        split = self._split("settings", frame.head(1))
        if frame.height > 1:
            split = v.Split(
                split.valid,
                pl.concat(
                    [
                        split.rejected,
                        frame.slice(1).select(
                            pl.col("raw").alias("record")
                            if "raw" in frame.columns
                            else pl.lit("{}").alias("record"),
                            pl.lit("settings: more than one row").alias("reason"),
                        ),
                    ]
                ),
            )
        with self.transaction() as con:
            self._land_rejected("settings", split.rejected)
            if split.valid.height:
                with self._registered(split.valid) as src:
                    con.execute("DELETE FROM core.settings")
                    con.execute(
                        f"INSERT INTO core.settings SELECT timezone, currency, locale, week_start, ? FROM {src}",
                        [rid],
                    )
                    con.execute("DELETE FROM raw.settings")
                    con.execute(f"INSERT INTO raw.settings SELECT ?, raw::JSON FROM {src}", [rid])
                    con.execute("DELETE FROM history.settings WHERE refresh_id = ?", [rid])
                    con.execute(
                        f"INSERT INTO history.settings SELECT ?, now(), timezone, currency, locale, week_start FROM {src}",
                        [rid],
                    )
                    con.execute(
                        f"INSERT OR REPLACE INTO ops.meta SELECT 'timezone', timezone, now() FROM {src}"
                    )
        timezone = split.valid.get_column("timezone")[0] if split.valid.height else None
        self.stats.rows_landed += split.valid.height
        self.stats.rows_rejected += split.rejected_count
        return SettingsResult(previous, timezone, rejected=split.rejected_count)

    # -- server aggregates ------------------------------------------------------------------------

    def load_transactions_summaries(self, rows: Sequence[Mapping[str, Any]]) -> LoadResult:
        """Land `GET /v1/transactions/summary` answers, each merged with the request's scope.

        Each row: scope ('all'|'year'|'month'|'window'), from, to (dates or None), optional params
        (the other filters sent), and the body's count, income, expense, transfer, net.
        """
        records = []
        for r in rows:
            rec = dict(r)
            params = rec.get("params")
            rec["params"] = (
                None
                if params is None
                else (params if isinstance(params, str) else orjson.dumps(params).decode())
            )
            for k in ("from", "to"):
                rec[k] = None if rec.get(k) is None else str(rec[k])
            rec["raw"] = orjson.dumps(rec).decode()
            records.append(rec)
        frame = _frame(
            records,
            [
                "scope",
                "from",
                "to",
                "params",
                "count",
                "income",
                "expense",
                "transfer",
                "net",
                "raw",
            ],
        )
        split = self._split("server.transactions_summary", frame)
        result = LoadResult(
            "server.transactions_summary", landed=split.valid.height, rejected=split.rejected_count
        )
        with self._registered(split.valid) as src, self.transaction() as con:
            con.execute(
                f"""
                INSERT INTO server.transactions_summary
                SELECT ?, now(), scope, "from", "to", params::JSON, count, income, expense, transfer,
                       coalesce(net, income + expense + transfer)
                FROM {src}
                """,
                [self._rid()],
            )
            self._land_rejected("server.transactions_summary", split.rejected)
        self.stats.rows_rejected += result.rejected
        return result

    def load_spending(
        self, responses: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> LoadResult:
        """Land `GET /v1/analytics/spending` answers (any group_by); category labels feed core.categories."""
        bodies = [responses] if isinstance(responses, Mapping) else list(responses)
        totals: list[dict[str, Any]] = []
        lines: list[dict[str, Any]] = []
        for body in bodies:
            data = list(body.get("data") or [])
            head = {
                "group_by": body.get("group_by", "category"),
                "from": body.get("from"),
                "to": body.get("to"),
            }
            totals.append(
                {
                    **head,
                    "currency": body.get("currency"),
                    "total": body.get("total"),
                    "row_count": len(data),
                }
            )
            for item in data:
                line = {
                    **head,
                    "key": item.get("key"),
                    "label": item.get("label"),
                    "amount": item.get("amount"),
                    "count": item.get("count"),
                }
                lines.append({**line, "raw": orjson.dumps(item).decode()})
        for t in totals:
            t["raw"] = orjson.dumps(t).decode()
        t_split = self._split(
            "server.spending_totals",
            _frame(totals, ["group_by", "from", "to", "currency", "total", "row_count", "raw"]),
        )
        l_split = self._split(
            "server.spending",
            _frame(lines, ["group_by", "from", "to", "key", "label", "amount", "count", "raw"]),
        )
        rid = self._rid()
        result = LoadResult(
            "server.spending",
            landed=l_split.valid.height,
            rejected=l_split.rejected_count + t_split.rejected_count,
        )
        with self.transaction() as con:
            with self._registered(t_split.valid) as src:
                con.execute(
                    f'INSERT INTO server.spending_totals SELECT ?, now(), group_by, "from", "to", currency, '
                    f"total, row_count FROM {src}",
                    [rid],
                )
            with self._registered(l_split.valid) as src:
                con.execute(
                    f'INSERT INTO server.spending SELECT ?, group_by, "from", "to", key, label, amount, count FROM {src}',
                    [rid],
                )
                con.execute(
                    f"""
                    INSERT INTO core.categories
                    SELECT try_cast(key AS UUID) AS id, any_value(label), ?, ? FROM {src}
                    WHERE group_by = 'category' AND try_cast(key AS UUID) IS NOT NULL AND label IS NOT NULL
                    GROUP BY 1
                    ON CONFLICT (id) DO UPDATE SET name = excluded.name,
                        last_seen_refresh = excluded.last_seen_refresh
                    """,
                    [rid, rid],
                )
            self._land_rejected("server.spending_totals", t_split.rejected)
            self._land_rejected("server.spending", l_split.rejected)
        self.stats.rows_rejected += result.rejected
        return result

    def load_accounts_summary(self, body: Mapping[str, Any]) -> LoadResult:
        """Land `GET /v1/accounts/summary` (with its by_type breakdown)."""
        by_type = body.get("by_type") or {}
        rec = {k: body.get(k) for k in ("currency", "assets", "liabilities", "net_worth", "count")}
        rec["by_type"] = orjson.dumps(by_type).decode()
        rec["raw"] = orjson.dumps(dict(body)).decode()
        split = self._split(
            "server.accounts_summary",
            _frame(
                [rec], ["currency", "assets", "liabilities", "net_worth", "count", "by_type", "raw"]
            ),
        )
        rid = self._rid()
        types = pl.DataFrame(
            {"type": [str(k) for k in by_type], "balance": [int(x) for x in by_type.values()]},
            schema={"type": pl.String, "balance": pl.Int64},
        )
        with self.transaction() as con:
            self._land_rejected("server.accounts_summary", split.rejected)
            if split.valid.height:
                with self._registered(split.valid) as src, self._registered(types) as bt:
                    con.execute(
                        f"INSERT OR REPLACE INTO server.accounts_summary SELECT ?, now(), currency, assets, "
                        f"liabilities, net_worth, count, by_type::JSON FROM {src}",
                        [rid],
                    )
                    con.execute(
                        "DELETE FROM server.accounts_summary_by_type WHERE refresh_id = ?", [rid]
                    )
                    con.execute(
                        f"INSERT INTO server.accounts_summary_by_type SELECT ?, type, balance FROM {bt}",
                        [rid],
                    )
        self.stats.rows_rejected += split.rejected_count
        return LoadResult(
            "server.accounts_summary", landed=split.valid.height, rejected=split.rejected_count
        )

    def load_net_worth(self, body: Mapping[str, Any]) -> LoadResult:
        """Land `GET /v1/analytics/net-worth`."""
        rec = {k: body.get(k) for k in ("currency", "assets", "liabilities", "total", "as_of")}
        rec["raw"] = orjson.dumps(dict(body)).decode()
        split = self._split(
            "server.net_worth",
            _frame([rec], ["currency", "assets", "liabilities", "total", "as_of", "raw"]),
        )
        with self.transaction() as con:
            self._land_rejected("server.net_worth", split.rejected)
            if split.valid.height:
                with self._registered(split.valid) as src:
                    con.execute(
                        f"INSERT OR REPLACE INTO server.net_worth SELECT ?, now(), currency, assets, "
                        f"liabilities, total, as_of FROM {src}",
                        [self._rid()],
                    )
        self.stats.rows_rejected += split.rejected_count
        return LoadResult(
            "server.net_worth", landed=split.valid.height, rejected=split.rejected_count
        )

    # -- read helpers for the refresh algorithm ----------------------------------------------------

    def local_fingerprints(self, period: Period = "month") -> pl.DataFrame:
        """Per month ('YYYY-MM') or year: count and sums per type of core.transactions, in SQL.

        Columns: month|year, count, income, expense, transfer, net (the server summary's shape).
        """
        label = (
            "strftime(month, '%Y-%m') AS month"
            if period == "month"
            else "year(month)::INTEGER AS year"
        )
        return self._df(
            f"""
            SELECT {label}, count(*)::BIGINT AS count,
                   coalesce(sum(amount) FILTER (WHERE type = 'income'), 0)::BIGINT AS income,
                   coalesce(sum(amount) FILTER (WHERE type = 'expense'), 0)::BIGINT AS expense,
                   coalesce(sum(amount) FILTER (WHERE type = 'transfer'), 0)::BIGINT AS transfer,
                   coalesce(sum(amount), 0)::BIGINT AS net
            FROM core.transactions GROUP BY 1 ORDER BY 1
            """
        )

    def local_category_spending(self, period: Period = "month") -> pl.DataFrame:
        """Per month or year and category: sum and count of type='expense' rows (the spending endpoint's rules)."""
        label = (
            "strftime(month, '%Y-%m') AS month"
            if period == "month"
            else "year(month)::INTEGER AS year"
        )
        return self._df(
            f"""
            SELECT {label}, category_id::VARCHAR AS category_id,
                   sum(amount)::BIGINT AS amount, count(*)::BIGINT AS count
            FROM core.transactions WHERE type = 'expense'
            GROUP BY ALL ORDER BY 1, 2 NULLS FIRST
            """
        )

    def local_category_hashes(self, period: Period = "month") -> pl.DataFrame:
        """Per month or year: `category_hash` of the local per-category spending."""
        spending = self.local_category_spending(period)
        label = "month" if period == "month" else "year"
        out: dict[str, list[Any]] = {label: [], "category_hash": []}
        for (key,), group in spending.group_by(label, maintain_order=True):
            out[label].append(key)
            out["category_hash"].append(
                category_hash(group.select("category_id", "amount", "count").iter_rows())
            )
        dtype = pl.String if period == "month" else pl.Int32
        return pl.DataFrame(out, schema={label: dtype, "category_hash": pl.String})

    def months_present(self) -> list[str]:
        """Months ('YYYY-MM') with at least one local transaction."""
        rows = self.con.execute(
            "SELECT DISTINCT month FROM core.transactions ORDER BY 1"
        ).fetchall()
        return [month_key(r[0]) for r in rows]

    def last_timezone(self) -> str | None:
        """The settings timezone seen by the last settings snapshot (None before any)."""
        return self.get_meta("timezone")

    def month_state(self) -> pl.DataFrame:
        """ops.month_state with month as 'YYYY-MM'."""
        return self._df(
            "SELECT strftime(month, '%Y-%m') AS month, * EXCLUDE (month) FROM ops.month_state ORDER BY month"
        )

    def resumable_months(self) -> list[str]:
        """Months already re-read by unfinished refreshes since the last successful one.

        A refresh that was stopped (and published its progress) left these months complete: a
        resumed first sync can skip them when their server fingerprint still matches.
        """
        rows = self.con.execute(
            """
            SELECT DISTINCT strftime(r.month, '%Y-%m') FROM ops.month_reads r
            JOIN ops.refreshes f USING (refresh_id)
            WHERE f.status <> 'succeeded'
              AND f.started_at > coalesce(
                  (SELECT max(started_at) FROM ops.refreshes WHERE status = 'succeeded'),
                  '-infinity'::TIMESTAMPTZ)
            ORDER BY 1
            """
        ).fetchall()
        return [str(r[0]) for r in rows]

    def rejected_rows(self, refresh_id: str | None = None) -> pl.DataFrame:
        """Rejected rows (of one refresh, or all) with their reasons: the asset check's input."""
        if refresh_id is None:
            return self._df("SELECT * FROM raw.rejected_rows ORDER BY rejected_at")
        return self._df(
            "SELECT * FROM raw.rejected_rows WHERE refresh_id = ? ORDER BY rejected_at",
            [refresh_id],
        )

    def schema_version(self) -> int:
        """The migration version of this file."""
        return current_version(self.con)


class TransactionStage:
    """Validated rows of a window read as a stream, held in a DuckDB temp table until commit.

    ``add`` each batch as it arrives, ``reset`` when the read is voided (the window changed
    under the reader), ``commit(months)`` once it is accepted: the months are then replaced in
    one transaction, exactly as ``replace_months`` would with the whole frame. Nothing reaches
    ``core`` before ``commit``; a failure leaves the months as they were.
    """

    _counter = 0

    def __init__(self, warehouse: Warehouse) -> None:
        TransactionStage._counter += 1
        self.warehouse = warehouse
        self.table = f"_stage_tx_{TransactionStage._counter}"
        self.rows = 0
        self._created = False
        self._rejected: list[pl.DataFrame] = []
        self._template: pl.DataFrame | None = None

    def add(self, frame: pl.DataFrame) -> None:
        """Validate a batch and stage its valid rows (rejected ones wait for the commit)."""
        split = self.warehouse._split("transactions", frame)
        if self._template is None:
            self._template = split.valid.head(0)
        if split.rejected.height:
            self._rejected.append(split.rejected)
        if split.valid.height == 0:
            return
        con = self.warehouse.con
        with self.warehouse._registered(split.valid) as src:
            if self._created:
                con.execute(f"INSERT INTO {self.table} BY NAME SELECT * FROM {src}")
            else:
                con.execute(f"CREATE OR REPLACE TEMP TABLE {self.table} AS SELECT * FROM {src}")
                self._created = True
        self.rows += split.valid.height

    def reset(self) -> None:
        """Drop everything staged (the pass it came from was voided)."""
        if self._created:
            self.warehouse.con.execute(f"DELETE FROM {self.table}")
        self.rows = 0
        self._rejected.clear()

    def booked_range(self) -> tuple[dt.date, dt.date] | None:
        """Oldest and newest booked_at staged (None when nothing is)."""
        if not self.rows:
            return None
        lo, hi = self.warehouse.con.execute(
            f"SELECT min(booked_at), max(booked_at) FROM {self.table}"
        ).fetchall()[0]
        return lo, hi

    def commit(self, months: Iterable[MonthLike], *, reason: str = "re-read") -> LoadResult:
        """Replace these months with the staged rows, in one transaction (as replace_months)."""
        wh = self.warehouse
        month_list = sorted({month_start(m) for m in months})
        if not month_list:
            raise ValueError("commit needs at least one month")
        rejected = (
            pl.concat(self._rejected, how="diagonal_relaxed")
            if self._rejected
            else pl.DataFrame(schema={"record": pl.Utf8, "reason": pl.Utf8})
        )
        if not self._created:
            if self._template is None:
                raise ValueError("nothing was added to the stage, not even an empty batch")
            return wh._replace_transactions(
                month_list, v.Split(self._template, rejected), reason=reason, everything=False
            )
        in_months = _month_filter("date_trunc('month', booked_at)::DATE", month_list)
        outside = wh.con.execute(
            f"SELECT DISTINCT date_trunc('month', booked_at)::DATE FROM {self.table} "
            f"WHERE NOT ({in_months})"
        ).fetchall()
        if outside:
            raise MonthBoundsError(
                f"rows dated in {sorted(month_key(r[0]) for r in outside)} were staged for "
                f"{[month_key(d) for d in month_list]}; nothing was changed"
            )
        result = wh._replace_from(
            month_list, self.table, self.rows, rejected, reason=reason, everything=False
        )
        self.reset()
        return result

    def close(self) -> None:
        if self._created:
            with contextlib.suppress(duckdb.Error):
                self.warehouse.con.execute(f"DROP TABLE IF EXISTS {self.table}")
            self._created = False

    def __enter__(self) -> TransactionStage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MonthBatch:
    """Collects whole months' frames and writes them with replace_months in packed batches."""

    def __init__(self, warehouse: Warehouse, *, rows: int = 100_000):
        self.warehouse = warehouse
        self.rows = rows
        self.results: list[LoadResult] = []
        self._pending: dict[str, list[tuple[list[dt.date], pl.DataFrame]]] = {}
        self._months: set[dt.date] = set()
        self._count = 0

    def add(
        self, months: Iterable[MonthLike], frame: pl.DataFrame, *, reason: str = "re-read"
    ) -> None:
        """Queue complete months (same contract as replace_months); flush when the batch is full."""
        month_list = sorted({month_start(m) for m in months})
        if self._months.intersection(month_list):
            self.flush()  # a month read twice: the later read must win, so write the earlier first
        self._pending.setdefault(reason, []).append((month_list, frame))
        self._months.update(month_list)
        self._count += frame.height
        if self._count >= self.rows:
            self.flush()

    def flush(self) -> list[LoadResult]:
        """Write every queued month now (one transaction per reason); return those loads."""
        done: list[LoadResult] = []
        for reason, items in self._pending.items():
            months = [m for ms, _ in items for m in ms]
            frames = [f for _, f in items]
            frame = frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
            done.append(self.warehouse.replace_months(months, frame, reason=reason))
        self._pending.clear()
        self._months.clear()
        self._count = 0
        self.results.extend(done)
        return done

    def __enter__(self) -> MonthBatch:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.flush()


def _month_filter(column: str, months: Sequence[dt.date]) -> str:
    """`column IN (DATE '...', ...)` over first-of-month dates (built from dates, never text)."""
    literals = ", ".join(f"DATE '{m.isoformat()}'" for m in months)
    return f"{column} IN ({literals})"


def _date_ranges(column: str, months: Sequence[dt.date]) -> str:
    """A predicate matching dates within any of the months, with consecutive months merged."""
    ranges: list[tuple[dt.date, dt.date]] = []
    for m in sorted(months):
        end = (m + dt.timedelta(days=32)).replace(day=1)
        if ranges and ranges[-1][1] == m:
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((m, end))
    return (
        "("
        + " OR ".join(
            f"({column} >= DATE '{a.isoformat()}' AND {column} < DATE '{b.isoformat()}')"
            for a, b in ranges
        )
        + ")"
    )


def _frame(records: list[dict[str, Any]], columns: list[str]) -> pl.DataFrame:
    """A frame from small dict records, every value as text or int as sent (validation types it)."""
    data: dict[str, list[Any]] = {c: [r.get(c) for r in records] for c in columns}
    schema: dict[str, pl.DataType] = {}
    for c, values in data.items():
        present = [x for x in values if x is not None]
        if present and all(isinstance(x, int) and not isinstance(x, bool) for x in present):
            schema[c] = pl.Int64()
        else:
            schema[c] = pl.String()
            data[c] = [
                None if x is None else (x if isinstance(x, str) else _text(x)) for x in values
            ]
    return pl.DataFrame(data, schema=schema)


def _text(value: Any) -> str:
    # Non-text values in a text-or-int column (a float amount, a bool) stay visible as JSON text
    # so validation rejects them with the value in the reason.
    return orjson.dumps(value).decode()


def _record_failure(
    published: Path, refresh_id: str, mode: str, stats: RefreshStats, exc: BaseException
) -> None:
    """Best effort: add a 'failed' ops.refreshes row to the published warehouse (data untouched)."""
    tmp = published.with_name(published.name + ".failing")
    try:
        paths.remove(tmp)
        if published.exists():
            shutil.copyfile(published, tmp)
        con = duckdb.connect(str(tmp))
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
                    "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed",
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
    except Exception:  # the refresh's own error matters more than this record
        log.exception("could not record the failed refresh %s", refresh_id)
        paths.remove(tmp)
