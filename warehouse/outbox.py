"""The write-back outbox: every request to the service, written down before it is sent.

The outbox is its own small DuckDB file beside the warehouse (`centsync.outbox.duckdb` next to
`centsync.duckdb`), written in place in short transactions. It cannot live in the warehouse
file: a refresh publishes a new copy of that file by an atomic rename, so a state written there
while a refresh runs would be lost, and a request must be on disk before it is sent.
Each refresh copies the outbox into the warehouse's `ops.outbox` (read only there), so analysts
see it next to the data; the file itself is the truth.

    ops.outbox            one row per request: exact body, idempotency key, state, outcome
    ops.outbox_events     append-only: every state change of every row, with its detail
    ops.outbox_requests   rows analysts insert (the inbox's columns); the write-back reads them

Nothing is ever deleted from `ops.outbox` or `ops.outbox_events`. States:

    pending          written, not yet accepted (a send may be in flight: see last_sent_at)
    sent             the service accepted it (its id and response are recorded)
    confirmed        seen again in a refresh
    rejected         the validator's or the service's reason is recorded; nothing was created
    needs_attention  a person must decide (the same event with a different body)

Knows SQL, never HTTP.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from centsync.warehouse.common import transaction
from centsync.warehouse.errors import DamagedError, WarehouseError
from centsync.warehouse.frames import frame as query_frame
from centsync.warehouse.frames import register
from centsync.warehouse.paths import exclusive_lock, is_damage, never_completed, remove

log = logging.getLogger(__name__)

STATES = ("pending", "sent", "confirmed", "rejected", "needs_attention")
OPEN_TIMEOUT = 20.0  # seconds to wait for another process's connection to the outbox to close
# seconds a write-back or a refresh waits for the other to finish (drains take seconds; a
# refresh of a household, seconds too; a first sync of a large ledger may take longer)
DRAIN_WAIT = 120.0

SCHEMA = """
CREATE SCHEMA IF NOT EXISTS ops;
CREATE SEQUENCE IF NOT EXISTS ops.outbox_id;
CREATE SEQUENCE IF NOT EXISTS ops.outbox_request_no;
CREATE TABLE IF NOT EXISTS ops.outbox (
    id               BIGINT PRIMARY KEY DEFAULT nextval('ops.outbox_id'),
    idempotency_key  VARCHAR NOT NULL,
    body_sha256      VARCHAR NOT NULL,
    operation        VARCHAR NOT NULL,
    method           VARCHAR NOT NULL,
    path             VARCHAR NOT NULL,
    body             VARCHAR NOT NULL,
    state            VARCHAR NOT NULL,
    reason           VARCHAR,
    source           VARCHAR NOT NULL,
    source_name      VARCHAR NOT NULL,
    source_line      BIGINT,
    event_ref        VARCHAR NOT NULL,
    row_text         VARCHAR,
    account_id       UUID,
    booked_at        DATE,
    amount           BIGINT,
    concept          VARCHAR,
    transaction_id   UUID,
    server_id        UUID,
    response_status  INTEGER,
    response_body    VARCHAR,
    replayed         BOOLEAN,
    found_by_lookup  BOOLEAN NOT NULL DEFAULT false,
    attempts         INTEGER NOT NULL DEFAULT 0,
    created_at       TIMESTAMPTZ NOT NULL,
    first_sent_at    TIMESTAMPTZ,
    last_sent_at     TIMESTAMPTZ,
    last_response_at TIMESTAMPTZ,
    confirmed_at     TIMESTAMPTZ,
    confirmed_by     VARCHAR,
    updated_at       TIMESTAMPTZ NOT NULL,
    UNIQUE (idempotency_key, body_sha256)
);
CREATE TABLE IF NOT EXISTS ops.outbox_events (
    outbox_id BIGINT NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL,
    state     VARCHAR NOT NULL,
    event     VARCHAR NOT NULL,
    detail    VARCHAR
);
CREATE TABLE IF NOT EXISTS ops.outbox_requests (
    request_no      BIGINT PRIMARY KEY DEFAULT nextval('ops.outbox_request_no'),
    event_id        VARCHAR,
    operation       VARCHAR DEFAULT 'create',
    transaction_id  VARCHAR,
    account         VARCHAR,
    booked_at       VARCHAR,
    amount          VARCHAR,
    concept         VARCHAR,
    category        VARCHAR,
    notes           VARCHAR,
    expense_goal_id VARCHAR,
    type            VARCHAR,
    inserted_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
"""

# What a planned request brings to `enqueue` (the pipelines layer maps its plans onto these).
PLAN_FIELDS = (
    "idempotency_key",
    "body_sha256",
    "operation",
    "method",
    "path",
    "body",
    "state",
    "reason",
    "source",
    "source_name",
    "source_line",
    "event_ref",
    "row_text",
    "account_id",
    "booked_at",
    "amount",
    "concept",
    "transaction_id",
)


class OutboxBusyError(WarehouseError):
    """Another process holds the outbox file open (or is draining it)."""

    headline = "the write-back outbox is in use"
    what_to_do = (
        "close other connections to the outbox file (or wait for the other write-back), "
        "then run again."
    )


class OutboxDamagedError(DamagedError):
    """The outbox file cannot be read (truncated, bad header, bad checksums)."""

    headline = "the write-back outbox is damaged"
    what_to_do = "restore the outbox file from a backup (the message says what else you can do)."


def outbox_path(warehouse: Path) -> Path:
    """The outbox beside a warehouse: `centsync.duckdb` -> `centsync.outbox.duckdb`."""
    return warehouse.with_name(f"{warehouse.stem}.outbox{warehouse.suffix or '.duckdb'}")


class Outbox:
    """The outbox file: opened for each short transaction, so analysts can open it in between."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def exists(self) -> bool:
        return self.path.exists()

    @contextlib.contextmanager
    def connect(self, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for one unit of work (waits up to OPEN_TIMEOUT for another holder)."""
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + OPEN_TIMEOUT
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=read_only)
                break
            except duckdb.Error as e:
                if is_damage(e):
                    self._unusable(e)  # removes a file that never held a row, else raises
                    continue
                if "lock" not in str(e).lower():
                    raise
                if time.monotonic() > deadline:
                    raise OutboxBusyError(
                        f"the outbox {self.path} is open in another process ({e}); close that "
                        "connection (a DuckDB shell or notebook holding it) and run again"
                    ) from e
                time.sleep(0.1)
        try:
            if not read_only:
                con.execute(SCHEMA)
            yield con
        finally:
            con.close()

    def _unusable(self, exc: BaseException) -> None:
        """An outbox file DuckDB cannot read: one too short to hold a row (a create that ran out
        of disk) is removed, nothing lost; anything else is damaged, kept, and named."""
        if never_completed(self.path):
            log.warning(
                "removing %s: an outbox file that was never completed (%d bytes; the disk was "
                "probably full when it was created); it held no request",
                self.path,
                self.path.stat().st_size,
            )
            remove(self.path)
            return
        raise OutboxDamagedError(
            f"the outbox {self.path} is damaged ({str(exc).splitlines()[0][:300]}). It holds "
            "every request ever sent: restore it from a backup. Only if there is none, move it "
            "aside and run again: the inbox's files are planned again, each under its old "
            "idempotency key (the service replays those it has seen within its 24-hour window; "
            "check older ones in the app before you run `centsync writeback`)"
        ) from exc

    def draining(
        self, wait: float | None = None, *, by: str = "write-back"
    ) -> contextlib.AbstractContextManager[None]:
        """One drain at a time, and no drain while a refresh reads the service (a kernel lock,
        released even when the holder is killed): a refresh's reads must not see the
        project's own posts land mid-window, or it takes them for a changing service.
        Waits up to `wait` seconds (DRAIN_WAIT) for the other holder."""
        wait = DRAIN_WAIT if wait is None else wait
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return exclusive_lock(
            self.path.with_name(self.path.name + ".lock"),
            lambda: OutboxBusyError(
                f"the {by} waited {wait:g} s for another write-back or refresh of {self.path} "
                "to finish (one at a time: a refresh must not read the service while the "
                "write-back posts to it); nothing was sent, run again when it is done"
            ),
            wait,
        )

    @contextlib.contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One short connection holding one transaction (committed, or rolled back on error)."""
        with self.connect() as con, transaction(con):
            yield con

    # -- writing ------------------------------------------------------------------------------

    def enqueue(self, plans: Sequence[Mapping[str, Any]], now: dt.datetime) -> list[str]:
        """Write planned requests in one transaction; return each one's outcome.

        new          a new row (pending, or rejected with the validator's reason)
        duplicate    the same key and body are already in the outbox: nothing new
        revived      the event was rejected before and is valid now: a new pending row
        conflict     the same event with a different body: a needs_attention row, never sent
        """
        with self.writing() as con:
            return [self._enqueue_one(con, p, now) for p in plans]

    def _enqueue_one(
        self, con: duckdb.DuckDBPyConnection, p: Mapping[str, Any], now: dt.datetime
    ) -> str:
        prior = con.execute(
            "SELECT id, body_sha256, state, body FROM ops.outbox WHERE idempotency_key = ? "
            "ORDER BY id",
            [p["idempotency_key"]],
        ).fetchall()
        if any(sha == p["body_sha256"] for _, sha, _, _ in prior):
            return "duplicate"
        row = dict(p)
        outcome = "new"
        live = [(i, body) for i, _, state, body in prior if state != "rejected"]
        if live and row["state"] == "pending":
            other_id, other_body = live[-1]
            row["state"] = "needs_attention"
            row["reason"] = (
                f"event {row['event_ref']} was queued before as outbox #{other_id} with a different "
                f"body, under the same idempotency key; the service would refuse it "
                f"(idempotency_key_reused). Earlier body: {other_body}; this body: {row['body']}. "
                "Give the corrected row a new event_id to send it as a new request."
            )
            outcome = "conflict"
        elif prior and row["state"] == "pending":
            outcome = "revived"
        elif prior:
            return "duplicate"  # rejected again, for the same or another reason: nothing new
        cols = ", ".join(PLAN_FIELDS)
        new_id = con.execute(
            f"INSERT INTO ops.outbox ({cols}, created_at, updated_at) "
            f"VALUES ({', '.join('?' * len(PLAN_FIELDS))}, ?, ?) RETURNING id",
            [row.get(c) for c in PLAN_FIELDS] + [now, now],
        ).fetchall()[0][0]
        self._event(con, new_id, now, row["state"], "queued", row.get("reason"))
        return outcome

    @staticmethod
    def _event(
        con: duckdb.DuckDBPyConnection,
        outbox_id: int,
        now: dt.datetime,
        state: str,
        event: str,
        detail: str | None = None,
    ) -> None:
        con.execute(
            "INSERT INTO ops.outbox_events VALUES (?, ?, ?, ?, ?)",
            [outbox_id, now, state, event, detail],
        )

    def mark_attempt(
        self, outbox_id: int, now: dt.datetime, service_now: dt.datetime | None = None
    ) -> None:
        """Durably note that a send is about to start (before the request leaves); with the
        service's time then, which is the clock its idempotency keys expire on."""
        detail = None if service_now is None else f"service_time={service_now.isoformat()}"
        with self.writing() as con:
            con.execute(
                "UPDATE ops.outbox SET attempts = attempts + 1, "
                "first_sent_at = coalesce(first_sent_at, ?), last_sent_at = ?, updated_at = ? "
                "WHERE id = ?",
                [now, now, now, outbox_id],
            )
            self._event(con, outbox_id, now, "pending", "sending", detail)

    def first_sent_on_service(self, outbox_id: int) -> dt.datetime | None:
        """The service's time at a row's first send, when it was recorded (`mark_attempt`)."""
        with self.connect(read_only=True) as con:
            found = con.execute(
                "SELECT min(replace(detail, 'service_time=', '')) FROM ops.outbox_events "
                "WHERE outbox_id = ? AND event = 'sending' AND detail LIKE 'service_time=%'",
                [outbox_id],
            ).fetchone()
        return dt.datetime.fromisoformat(found[0]) if found and found[0] else None

    def record(
        self,
        outbox_id: int,
        now: dt.datetime,
        *,
        state: str,
        event: str,
        reason: str | None = None,
        status: int | None = None,
        response: str | None = None,
        server_id: str | None = None,
        replayed: bool | None = None,
        found_by_lookup: bool = False,
    ) -> None:
        """Record an outcome (a response, or a lookup's finding) in one transaction."""
        if state not in STATES:
            raise ValueError(f"unknown outbox state {state!r}")
        with self.writing() as con:
            con.execute(
                "UPDATE ops.outbox SET state = ?, reason = ?, response_status = ?, "
                "response_body = ?, server_id = coalesce(?, server_id), replayed = ?, "
                "found_by_lookup = found_by_lookup OR ?, last_response_at = ?, updated_at = ? "
                "WHERE id = ?",
                [
                    state,
                    reason,
                    status,
                    response,
                    server_id,
                    replayed,
                    found_by_lookup,
                    now,
                    now,
                    outbox_id,
                ],
            )
            self._event(con, outbox_id, now, state, event, reason)

    def note_unknown(self, outbox_id: int, now: dt.datetime, detail: str) -> None:
        """A send whose outcome is unknown (connection lost, 5xx): stays pending, resent later."""
        with self.writing() as con:
            con.execute(
                "UPDATE ops.outbox SET reason = ?, updated_at = ? WHERE id = ?",
                [f"outcome unknown, will be resent with the same key: {detail}", now, outbox_id],
            )
            self._event(con, outbox_id, now, "pending", "outcome_unknown", detail)

    def confirm(self, ids: Sequence[int], refresh_id: str, now: dt.datetime) -> None:
        """Rows seen again in a refresh's read of the ledger."""
        if not ids:
            return
        with self.writing() as con:
            for i in ids:
                con.execute(
                    "UPDATE ops.outbox SET state = 'confirmed', confirmed_at = ?, confirmed_by = ?, "
                    "updated_at = ? WHERE id = ? AND state = 'sent'",
                    [now, refresh_id, now, i],
                )
                self._event(con, i, now, "confirmed", "seen_in_refresh", refresh_id)

    # -- reading ------------------------------------------------------------------------------

    def rows(self, where: str = "true", params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows matching a condition of this module's own (every row by default), by id."""
        if not self.exists():
            return []
        with self.connect() as con:
            cur = con.execute(f"SELECT * FROM ops.outbox WHERE {where} ORDER BY id", list(params))
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def in_state(self, state: str) -> list[dict[str, Any]]:
        """The rows in one state, oldest first."""
        return self.rows("state = ?", [state])

    def accepted(self) -> list[dict[str, Any]]:
        """Sent rows the service gave an id (what a refresh can confirm), oldest first."""
        return self.rows("state = 'sent' AND server_id IS NOT NULL")

    def server_ids(self) -> set[str]:
        """The service's ids the outbox's rows already hold (a lookup never claims one twice)."""
        return {str(r["server_id"]) for r in self.rows("server_id IS NOT NULL")}

    def others_under_key(self, idempotency_key: str, outbox_id: int) -> list[dict[str, Any]]:
        """The other rows written under an idempotency key (earlier bodies of one event)."""
        return self.rows("idempotency_key = ? AND id <> ?", [idempotency_key, outbox_id])

    def live(self) -> list[dict[str, Any]]:
        """Rows queued, sent or confirmed (neither rejected nor waiting on a person), by id."""
        return self.rows("state IN ('pending', 'sent', 'confirmed') AND body <> ''")

    def keys_and_bodies(self) -> set[tuple[str, str]]:
        """(idempotency key, body hash) of every row: what a dry run would find already queued."""
        return {(r["idempotency_key"], r["body_sha256"]) for r in self.rows()}

    def counts(self) -> dict[str, int]:
        """Rows per state (every state listed, 0 where none). A rejection superseded by a later
        row of the same event (rejected, then fixed and posted) no longer counts."""
        found: dict[str, int] = {}
        if self.exists():
            with self.connect() as con:
                found = dict(
                    con.execute(
                        "SELECT state, count(*) FROM ops.outbox o WHERE NOT (state = 'rejected' "
                        "AND EXISTS (SELECT 1 FROM ops.outbox n WHERE n.idempotency_key = "
                        "o.idempotency_key AND n.id > o.id AND n.state <> 'rejected')) "
                        "GROUP BY 1"
                    ).fetchall()
                )
        return {s: int(found.get(s, 0)) for s in STATES}

    def unresolved(self) -> list[dict[str, Any]]:
        """The rows rejected (by the checks or the service) or needing attention that nothing
        later superseded, oldest first: not a later row of the same event that was not
        rejected (as `counts` has it), nor a later drop of an inbox file of the same name (the
        rows fixed and dropped again: that drop's own rejections are listed instead)."""
        return self.rows(
            "state IN ('rejected', 'needs_attention') AND NOT EXISTS (SELECT 1 FROM ops.outbox n "
            "WHERE n.id > ops.outbox.id AND ((n.idempotency_key = ops.outbox.idempotency_key "
            "AND n.state <> 'rejected') OR (ops.outbox.source = 'inbox' AND n.source = 'inbox' "
            "AND n.source_name = ops.outbox.source_name "
            "AND n.created_at > ops.outbox.created_at)))"
        )

    def request_records(self) -> list[dict[str, Any]]:
        """Rows analysts inserted into ops.outbox_requests, in insertion order."""
        if not self.exists():
            return []
        with self.connect() as con:
            cur = con.execute("SELECT * FROM ops.outbox_requests ORDER BY request_no")
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def frame(self) -> pl.DataFrame:
        """Every row of the outbox, oldest first."""
        with self.connect() as con:
            return query_frame(con, "SELECT * FROM ops.outbox ORDER BY id")


def mirror(con: duckdb.DuckDBPyConnection, outbox: pl.DataFrame | None) -> int:
    """Copy the outbox into a warehouse's ops.outbox (its read-only view for analysts)."""
    with transaction(con):
        con.execute("DELETE FROM ops.outbox")
        if outbox is not None and outbox.height:
            register(con, "_outbox_rows", outbox)
            try:
                con.execute("INSERT INTO ops.outbox BY NAME SELECT * FROM _outbox_rows")
            finally:
                con.unregister("_outbox_rows")
    return 0 if outbox is None else outbox.height
