"""The ledger: month replacement (core and raw together, one transaction per load), the
streaming stage a window lands in, and batches of months."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import duckdb
import polars as pl

from centsync.transform.calendar import MonthLike, month_key, month_start
from centsync.warehouse import history
from centsync.warehouse import validation as v
from centsync.warehouse.common import (
    _TX_COMPARED,
    _TX_SELECT,
    LoadResult,
    _date_ranges,
    _month_filter,
    write_metas,
)
from centsync.warehouse.errors import MonthBoundsError
from centsync.warehouse.session import Session


@dataclass(frozen=True)
class _Replace:
    """One replace's inputs: the months, the view of validated rows, their count, the rejects."""

    months: list[dt.date]
    src: str
    landed: int
    rejected: pl.DataFrame
    reason: str
    # ops.meta keys set in the replace's transaction (a first sync's resume point)
    meta: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def in_months(self) -> str:
        """core.transactions' rows of the months.

        Literal month lists and date ranges (not subqueries) let DuckDB skip row groups by
        their min/max, so a one-month replace on a big ledger does not scan it all.
        """
        return _month_filter("month", self.months)

    @property
    def in_raw_months(self) -> str:
        """raw.transactions' rows of the months (raw has booked_at, not month)."""
        return _date_ranges("booked_at", self.months)


# A replace of up to this many rows that is diffed (its months hold rows) types them once
# into a temp table (`_new_tx`), read by the diff and the history's two statements; a bigger
# one keeps a view over the frame (no second copy of a window in memory), and so does a
# replace of new months (a first sync: nothing reads it twice). Each read of the view casts
# every row again: ~2 ms a read for a household's 1,700 rows (issue 46)
TYPED_ONCE_ROWS = 20_000

# The columns _old_tx and _moved_tx hold: what a diff compares, and the month a row sat in.
_OLD_COLS = "id, " + ", ".join(_TX_COMPARED) + ", month"


def _stage_everything(con: duckdb.DuckDBPyConnection, job: _Replace) -> None:
    """Whole ledger: compared in place (a temp copy would hold it all in memory), nothing moves."""
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE _old_tx AS SELECT {_OLD_COLS} FROM core.transactions LIMIT 0"
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE _moved_tx AS SELECT {_OLD_COLS} FROM _old_tx LIMIT 0"
    )


def _stage_months(con: duckdb.DuckDBPyConnection, job: _Replace) -> None:
    """The months' old rows; no row is looked for elsewhere (the optimistic plan)."""
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE _moved_tx AS SELECT {_OLD_COLS} FROM core.transactions LIMIT 0"
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE _old_tx AS SELECT {_OLD_COLS} FROM core.transactions "
        f"WHERE {job.in_months}"
    )


def _stage_months_with_moves(con: duckdb.DuckDBPyConnection, job: _Replace) -> None:
    """The months' old rows plus the frame's rows that sit in another month locally (one scan)."""
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE _moved_tx AS SELECT {_OLD_COLS} FROM core.transactions o "
        f"WHERE NOT ({job.in_months}) AND o.id IN (SELECT id FROM _new_tx)"
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE _old_tx AS SELECT {_OLD_COLS} FROM core.transactions "
        f"WHERE {job.in_months} UNION ALL SELECT * FROM _moved_tx"
    )


@dataclass(frozen=True)
class ReplacePlan:
    """How a replace finds the old rows it diffs the new ones against."""

    name: str
    old: str  # the table the new rows are compared with
    stage: Callable[[duckdb.DuckDBPyConnection, _Replace], None]  # fills _old_tx and _moved_tx
    whole: bool = False  # the whole ledger (else the job's months)


REPLACE_EVERYTHING = ReplacePlan(
    "replace everything", "core.transactions", _stage_everything, whole=True
)
REPLACE_MONTHS = ReplacePlan("replace months", "_old_tx", _stage_months)
REPLACE_MONTHS_WITH_MOVES = ReplacePlan(
    "replace months with moves", "_old_tx", _stage_months_with_moves
)
# Optimistic: rows rarely move between months, and finding moved rows scans every id. If one
# did move, the id check refuses the insert (`_check_new_ids`) and we redo with the scan.
MONTH_PLANS = (REPLACE_MONTHS, REPLACE_MONTHS_WITH_MOVES)


def _typed_once(con: duckdb.DuckDBPyConnection, job: _Replace) -> str:
    """`_new_tx` as a temp table for a small replace that is diffed (TYPED_ONCE_ROWS), else
    the view it is; what it is now (for its DROP)."""
    if job.landed > TYPED_ONCE_ROWS:
        return "VIEW"
    con.execute(
        f"DROP VIEW _new_tx; CREATE TEMP TABLE _new_tx AS SELECT {_TX_SELECT}, raw FROM {job.src}"
    )
    return "TABLE"


@dataclass(frozen=True)
class _Changes:
    """What a replace found changed (_changed_tx holds the ids)."""

    inserted: int  # new to core
    updated: int  # in core, a compared column differs
    deleted: int  # in core, gone from the service
    moved: int  # sat in another month locally
    in_core: int  # changed rows core holds: deleted from it
    written: int  # new or changed rows: inserted into core and raw
    changed: int  # every id in _changed_tx: deleted from raw


def _stage_changes(con: duckdb.DuckDBPyConnection, old: str, raw_filter: str) -> _Changes:
    """Fill _changed_tx with the ids a replace must rewrite, and count them.

    One FULL JOIN of _new_tx against `old` and raw.transactions' rows under `raw_filter` (the
    months'): a row is rewritten when it is new to core, gone from the service, or differs in a
    compared column or in its payload as sent (a field core does not keep: compared by their
    128-bit MD5, so the join holds no payload text; with the texts, a 170,000-row window's
    join ran out of DuckDB's 160 MB on a full re-read of 200,000 rows). A raw row without
    its core row (or the reverse: a damaged warehouse) is rewritten too, so a replace still
    leaves the months exactly as the service sent them. An unchanged row is not touched: it
    keeps the refresh_id of the refresh that last wrote it.
    """
    differs = " OR ".join(f"n.{c} IS DISTINCT FROM o.{c}" for c in _TX_COMPARED)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _changed_tx AS
        SELECT coalesce(n.id, o.id) AS id,
               coalesce(n._new AND o._core IS NULL, false) AS added,
               n._new IS NULL AS gone,
               coalesce(o._core, false) AS in_core,
               coalesce(n._new AND o._core AND ({differs}), false) AS updated
        FROM (SELECT * EXCLUDE (raw), md5_number(raw) AS _raw, true AS _new FROM _new_tx) n
        FULL JOIN (
            SELECT coalesce(o.id, r.id) AS id, o.* EXCLUDE (id), r._raw
            FROM (SELECT *, true AS _core FROM {old}) o
            FULL JOIN (
                SELECT id, md5_number(raw::VARCHAR) AS _raw FROM raw.transactions
                WHERE {raw_filter}
            ) r ON r.id = o.id
        ) o ON o.id = n.id
        WHERE o._core IS NULL OR n._new IS NULL OR ({differs}) OR n._raw IS DISTINCT FROM o._raw
        """
    )
    row = con.execute(
        "SELECT count(*) FILTER (WHERE added), count(*) FILTER (WHERE updated), "
        "count(*) FILTER (WHERE gone AND in_core), (SELECT count(*) FROM _moved_tx), "
        "count(*) FILTER (WHERE in_core), count(*) FILTER (WHERE NOT gone), count(*) "
        "FROM _changed_tx"
    ).fetchall()[0]
    return _Changes(*(int(x) for x in row))


class Ledger(Session):
    """Loaders of core.transactions and raw.transactions, month by month."""

    if TYPE_CHECKING:  # defined by Fingerprints (fingerprints.py)

        def months_present(self) -> list[str]: ...

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
        return self._replace_transactions(month_list, split, reason=reason)

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
            sorted(set(months) | set(present)), split, reason=reason, plans=(REPLACE_EVERYTHING,)
        )

    def _replace_transactions(
        self,
        months: list[dt.date],
        split: v.Split,
        *,
        reason: str,
        plans: tuple[ReplacePlan, ...] = MONTH_PLANS,
        meta: Mapping[str, str | None] | None = None,
    ) -> LoadResult:
        """Replace the months with the split's valid rows, trying `plans` in order.

        A plan after the first runs only when the id check refused the previous one's insert
        (a row moved between months, which only the last plan looks for).
        """
        with self._registered(split.valid) as src:
            job = _Replace(months, src, split.valid.height, split.rejected, reason, meta or {})
            for plan in plans[:-1]:
                try:
                    return self._apply(job, plan)
                except duckdb.ConstraintException:
                    continue
            return self._apply(job, plans[-1])

    def stage_transactions(self) -> TransactionStage:
        """A stage for a window read as a stream: validated batches wait as Polars frames until
        the read is accepted, then replace their months in one transaction."""
        return TransactionStage(self)

    def _apply(self, job: _Replace, plan: ReplacePlan) -> LoadResult:
        """Run one replace plan in one transaction: diff, then delete and insert only the rows
        that changed, and the month bookkeeping."""
        rid = self._rid()
        result = LoadResult("transactions", landed=job.landed, rejected=job.rejected.height)
        timezone = self.get_meta("timezone")
        typed = "VIEW"
        with self.transaction() as con:
            con.execute(
                f"CREATE OR REPLACE TEMP VIEW _new_tx AS SELECT {_TX_SELECT}, raw FROM {job.src}"
            )
            plan.stage(con, job)
            put = job.src
            raw_filter = "true" if plan.whole else job.in_raw_months
            if con.execute(f"SELECT count(*) FROM {plan.old}").fetchall()[0][0] == 0:
                # new months: every row is new, nothing to diff (a raw row left without its
                # core row is taken out with the months' raw rows)
                result.inserted = job.landed
                con.execute(f"DELETE FROM raw.transactions WHERE {raw_filter}")
            else:
                typed = _typed_once(con, job)
                changes = _stage_changes(con, plan.old, raw_filter)
                # every version replaced is kept (SCD2), before core is rewritten
                noted = self.service_now is not None and self.clock_noted == self.service_now
                history.record(
                    con, rid, self.service_now, changed=changes.changed, clock_noted=noted
                )
                result.inserted, result.updated = changes.inserted, changes.updated
                result.deleted = changes.deleted
                if changes.moved:
                    months = con.execute(
                        "SELECT DISTINCT month FROM _moved_tx ORDER BY 1"
                    ).fetchall()
                    result.moved_from = [month_key(r[0]) for r in months]
                if changes.in_core:
                    con.execute(
                        "DELETE FROM core.transactions "
                        "WHERE id IN (SELECT id FROM _changed_tx WHERE in_core)"
                    )
                if changes.changed:
                    con.execute(
                        "DELETE FROM raw.transactions WHERE id IN (SELECT id FROM _changed_tx)"
                    )
                put = "_put_tx" if changes.written else ""
                if put:
                    con.execute(
                        f"CREATE OR REPLACE TEMP VIEW _put_tx AS SELECT * FROM {job.src} "
                        "WHERE id::UUID IN (SELECT id FROM _changed_tx WHERE NOT gone)"
                    )
            con.execute("DROP TABLE _old_tx; DROP TABLE _moved_tx")
            if put:
                self._insert_core_transactions(put, rid)
                con.execute(
                    f"INSERT INTO raw.transactions SELECT id::UUID, booked_at, ?, raw::JSON FROM {put}",
                    [rid],
                )
            self._land_rejected("transactions", job.rejected)
            # Month bookkeeping commits with the rows, so a stopped refresh knows what it read.
            self._record_month_reads(con, job, rid, timezone)
            write_metas(con, job.meta)
            con.execute(
                "DROP VIEW IF EXISTS _put_tx; DROP TABLE IF EXISTS _changed_tx; "
                f"DROP {typed} IF EXISTS _new_tx"
            )
        self.stats.add(result)
        self.stats.months_reread.extend(
            {"month": month_key(m), "reason": job.reason} for m in job.months
        )
        return result

    def _record_month_reads(
        self, con: duckdb.DuckDBPyConnection, job: _Replace, rid: str, timezone: str | None
    ) -> None:
        """Upsert ops.month_state and append ops.month_reads for every replaced month."""
        counts = pl.DataFrame(
            con.execute(
                f"SELECT date_trunc('month', booked_at)::DATE AS month, count(*) AS rows "
                f"FROM {job.src} GROUP BY 1"
            ).fetchall(),
            schema={"month": pl.Date, "rows": pl.Int64},
            orient="row",
        )
        per_month = (
            pl.DataFrame({"month": pl.Series(job.months, dtype=pl.Date)})
            .join(counts, on="month", how="left")
            .with_columns(pl.col("rows").fill_null(0).cast(pl.Int64))
        )
        with self._registered(per_month) as pm:
            # every column of a month's row is rewritten: DELETE then INSERT (an upsert costs
            # DuckDB ~1.5 ms more)
            con.execute(f"DELETE FROM ops.month_state WHERE month IN (SELECT month FROM {pm})")
            con.execute(
                f"""
                INSERT INTO ops.month_state (month, read_refresh, read_at, read_reason,
                    read_rows, read_timezone, verified_at)
                SELECT month, ?, now(), ?, rows, ?, coalesce(?::TIMESTAMPTZ, now()) FROM {pm}
                """,
                [rid, job.reason, timezone, self.service_now],
            )
            con.execute(
                f"INSERT INTO ops.month_reads SELECT ?, month, ?, rows, now() FROM {pm}",
                [rid, job.reason],
            )

    def batched(self, *, rows: int = 100_000) -> MonthBatch:
        """A writer that packs month replaces into transactions of at least `rows` rows.

        Each replace_months call has a fixed cost (validation, a transaction, a commit): on
        a ledger of small months, packing them is 2-3x faster. Use as a context manager;
        pending months are written on a clean exit (or by `flush`).
        """
        return MonthBatch(self, rows=rows)

    def _insert_core_transactions(self, src: str, refresh_id: str) -> None:
        """Insert validated rows into core.transactions (a seam the atomicity tests break),
        once their ids are proven new (`_check_new_ids`)."""
        _check_new_ids(self.con, src)
        self.con.execute(
            f"INSERT INTO core.transactions SELECT {_TX_SELECT}, ? FROM {src}", [refresh_id]
        )


def _check_new_ids(con: duckdb.DuckDBPyConnection, src: str) -> None:
    """Refuse rows whose ids are not distinct or already in core.transactions, as its primary
    key did (DuckDB's ConstraintException, so a replace plan that refused is redone by the
    next). The table has no key since migration 015: its index cost about 1.3 CPU-s of a
    1,000,000-row first sync; this check (one distinct count, one semi-join scanning the
    ledger's ids) about 0.3 (bench/ledger_insert.py). The rows are validated: their ids are
    canonical lower-case text, so distinct as text is distinct as UUIDs (half the cost)."""
    twice, present = con.execute(
        f"SELECT (SELECT count(*) - count(DISTINCT id) FROM {src}), "
        f"(SELECT count(*) FROM core.transactions WHERE id IN (SELECT id::UUID FROM {src}))"
    ).fetchall()[0]
    if twice or present:
        raise duckdb.ConstraintException(
            f"Duplicate key: {twice} id(s) twice among the rows and {present} already in "
            "core.transactions; nothing was inserted"
        )


class TransactionStage:
    """Validated rows of a window read as a stream, held as Polars frames until commit.

    ``add`` each batch as it arrives, ``reset`` when the read is voided (the window changed
    under the reader), ``commit(months)`` once it is accepted: the months are then replaced in
    one transaction, exactly as ``replace_months`` would with the whole frame. Nothing reaches
    ``core`` before ``commit``; a failure leaves the months as they were.

    The batches stay in Python (about 85 MB for a 170,000-row window) and land straight from
    Arrow: a DuckDB temp table in between copied every row once more (1.4-1.6 s of a
    1,000,000-row first refresh) and held as much in DuckDB's buffer pool.
    """

    def __init__(self, warehouse: Ledger) -> None:
        self.warehouse = warehouse
        self._frames: list[pl.DataFrame] = []
        self._rejected: list[pl.DataFrame] = []
        self._template: pl.DataFrame | None = None

    def add(self, frame: pl.DataFrame) -> None:
        """Validate a batch and keep its valid rows (rejected ones wait for the commit).

        The raw payloads' JSON is proven at the commit, by the insert's own cast to JSON.
        """
        split = v.split_valid("transactions", frame)
        if self._template is None:
            self._template = split.valid.head(0)
        if split.rejected.height:
            self._rejected.append(split.rejected)
        if split.valid.height == 0:
            return
        self._frames.append(split.valid)

    @property
    def rows(self) -> int:
        """Valid rows staged."""
        return sum(f.height for f in self._frames)

    def reset(self) -> None:
        """Drop everything staged (the pass it came from was voided)."""
        self._frames.clear()
        self._rejected.clear()

    def _staged_months(self) -> list[dt.date]:
        """The months staged rows are dated in, oldest first."""
        return sorted(
            {
                m
                for f in self._frames
                for m in f.get_column("booked_at").dt.truncate("1mo").unique().to_list()
            }
        )

    def month_rows(self, months: Sequence[dt.date]) -> list[int]:
        """Valid rows staged in each of these months (their first days), in their order."""
        if not self._frames:
            return [0] * len(months)
        counts = dict(
            pl.concat([f.select("booked_at") for f in self._frames])
            .group_by(pl.col("booked_at").dt.truncate("1mo"))
            .len()
            .iter_rows()
        )
        return [int(counts.get(m, 0)) for m in months]

    def booked_range(self) -> tuple[dt.date, dt.date] | None:
        """Oldest and newest booked_at staged (None when nothing is)."""
        if not self.rows:
            return None
        dates = [f.get_column("booked_at") for f in self._frames]
        return min(d.min() for d in dates), max(d.max() for d in dates)  # type: ignore[type-var,return-value]

    def commit(
        self,
        months: Iterable[MonthLike],
        *,
        reason: str = "re-read",
        meta: Mapping[str, str | None] | None = None,
    ) -> LoadResult:
        """Replace these months with the staged rows, in one transaction (as replace_months);
        `meta`: ops.meta keys set in that transaction (a first sync's resume point, so a stop
        between the two cannot leave the rows committed and the point before them)."""
        wh = self.warehouse
        month_list = sorted({month_start(m) for m in months})
        if not month_list:
            raise ValueError("commit needs at least one month")
        rejected = (
            pl.concat(self._rejected, how="diagonal_relaxed")
            if self._rejected
            else pl.DataFrame(schema={"record": pl.Utf8, "reason": pl.Utf8})
        )
        if not self._frames:
            if self._template is None:
                raise ValueError("nothing was added to the stage, not even an empty batch")
            valid = self._template
        else:
            outside = [m for m in self._staged_months() if m not in month_list]
            if outside:
                raise MonthBoundsError(
                    f"rows dated in {sorted(month_key(m) for m in outside)} were staged for "
                    f"{[month_key(d) for d in month_list]}; nothing was changed"
                )
            # no rechunk: the batches go to DuckDB as one Arrow table of many chunks, uncopied
            valid = pl.concat(self._frames, how="vertical_relaxed", rechunk=False)
        split = v.Split(valid, rejected)
        try:
            result = wh._replace_transactions(month_list, split, reason=reason, meta=meta)
        except duckdb.ConversionException:
            # Optimistic, as the moved rows: the insert into raw casts every payload to JSON,
            # so a separate json_valid pass per batch (0.4-0.6 s at 1,000,000 rows) is paid
            # only when a payload is malformed; then those rows are rejected and it is redone.
            checked = wh._reject_bad_json(split)
            if checked.rejected.height == split.rejected.height:
                raise
            result = wh._replace_transactions(month_list, checked, reason=reason, meta=meta)
        self.reset()
        return result

    def commit_complete(self, *, reason: str) -> LoadResult | None:
        """A stopped read: keep the months it read completely, drop the one it was in.

        Pages come newest first, so every staged month newer than the oldest one staged was
        read whole; the oldest may be partial. None when no month was complete. The next
        refresh's fingerprints prove (or re-read) what this kept.
        """
        if not self.rows:
            return None
        months = self._staged_months()
        if len(months) < 2:
            return None
        partial = months[0]
        kept = [f.filter(pl.col("booked_at").dt.truncate("1mo") != partial) for f in self._frames]
        self._frames = [f for f in kept if f.height]
        return self.commit(months[1:], reason=reason)

    def close(self) -> None:
        self._frames.clear()
        self._rejected.clear()

    def __enter__(self) -> TransactionStage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MonthBatch:
    """Collects whole months' frames and writes them with replace_months in packed batches."""

    def __init__(self, warehouse: Ledger, *, rows: int = 100_000):
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
