"""The drain: send each pending row of the outbox with its key, its outcome recorded before the
next send.

Crash safety: a row is on disk before its request leaves, and its attempt is noted before the
send; a send whose outcome is unknown is resent with the same key and body, which the service
replays. The service keeps keys 24 hours of its own clock (contract section 4): a row whose
outcome is unknown and whose first send may be older than that on the service's clock (the
`Date` header of its answers, else net worth's `as_of`; recorded with each send) is looked up
on the service (account, day, amount) before it is resent; a row that may be there under
another concept is parked for a person.

What a failed send means is one table, `OUTCOMES`: the error's class (first match wins) gives
the row's next state, the reason recorded, the summary's counter and whether the drain stops.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from centsync.extract import (
    ApiClient,
    ApiError,
    IdempotencyConflict,
    IdempotencyKeyReused,
    InsufficientScope,
    KeyExpired,
    RateLimited,
    TransportFailure,
    Unauthenticated,
    WriteUnconfirmed,
)
from centsync.pipelines.results import WritebackResult
from centsync.pipelines.writeback.summary import WritebackOptions
from centsync.warehouse.outbox import Outbox

KEY_TTL = dt.timedelta(hours=24)  # contract section 4: the service keeps keys this long
# judged early by this much: a resend that lands just after expiry would create a second row
KEY_MARGIN = dt.timedelta(minutes=30)

Row = dict[str, Any]


class WriteScopeMissing(Exception):
    """The key cannot write (no data.write scope): nothing was sent, every row stays pending."""

    outcome = InsufficientScope.outcome  # the key
    headline: ClassVar[str] = "the API key cannot write"
    what_to_do: ClassVar[str] = (
        "set CENTSYNC_API_KEY to a read and write key (data.write scope) and run "
        "`centsync writeback`; every outbox row stays pending."
    )


class DrainStopped(Exception):
    """The service could not be reached or refused the key: the rest stays pending."""


class Stop(enum.Enum):
    """What a failed send does to the drain."""

    NO = "go on with the next row"
    WRITE_SCOPE = "stop: raise WriteScopeMissing (the key cannot write)"
    RERAISE = "stop: raise the error itself (the key was refused)"
    DRAIN = "stop: raise DrainStopped (the service is unreachable or failing)"


@dataclass(frozen=True)
class Outcome:
    """What a failed send means for its row and for the drain."""

    # The row's next state; None: the outcome is unknown, the row stays pending and is resent
    # with the same key (Outbox.note_unknown, which leaves last_response_at behind last_sent_at).
    state: str | None
    event: str  # ops.outbox_events.event (an unknown outcome is noted as outcome_unknown)
    reason: Callable[[Any, Row, Outbox], str]  # (error, row, outbox) -> the reason recorded
    counter: str | None = None  # the WritebackResult field it counts in
    stop: Stop = Stop.NO
    keep_response: bool = False  # record the error's body as the row's response


def _short(e: BaseException) -> str:
    return str(e).splitlines()[0][:300]


def _reused(e: ApiError, row: Row, outbox: Outbox) -> str:
    return (
        f"idempotency_key_reused: the service holds an earlier request under this key "
        f"with a different body (it does not return that body). This body: {row['body']}. "
        f"{_earlier_bodies(outbox, row)}Give the row a new event_id to send it as a new "
        "request, or leave it if the earlier one is right."
    )


def _earlier_bodies(outbox: Outbox, row: Row) -> str:
    others = outbox.others_under_key(row["idempotency_key"], row["id"])
    if not others:
        return ""
    listed = "; ".join(f"#{r['id']} ({r['state']}): {r['body']}" for r in others)
    return f"Earlier bodies in the outbox under this key: {listed}. "


_UNREACHABLE = Outcome(
    None, "outcome_unknown", lambda e, row, box: _short(e), counter="unknown", stop=Stop.DRAIN
)


@dataclass(frozen=True)
class Rule:
    """A line of the outcome table: the error classes it matches (and a condition), its outcome."""

    kinds: tuple[type[Exception], ...]
    outcome: Outcome
    when: Callable[[Any], bool] = lambda e: True


# In order: the first rule that matches the error decides (the order of the former except ladder).
OUTCOMES: tuple[Rule, ...] = (
    Rule(
        (InsufficientScope,),
        Outcome(
            "pending",
            "refused",
            lambda e, row, box: f"{e.error_code}: needs a key with the data.write scope",
            stop=Stop.WRITE_SCOPE,
        ),
    ),
    Rule(
        (Unauthenticated, KeyExpired),
        Outcome(
            "pending",
            "refused",
            lambda e, row, box: f"{e.error_code}: the key was refused",
            stop=Stop.RERAISE,
        ),
    ),
    Rule(
        (IdempotencyKeyReused,),
        Outcome("needs_attention", "key_reused", _reused, counter="needs_attention"),
    ),
    Rule(
        (IdempotencyConflict,),
        Outcome(
            None,
            "outcome_unknown",
            lambda e, row, box: f"{e.error_code}: still being processed",
            counter="unknown",
        ),
    ),
    Rule(
        (WriteUnconfirmed,),
        Outcome(
            None,
            "outcome_unknown",
            lambda e, row, box: f"{_short(e)} (resent under the same key: never written twice)",
            counter="unknown",
        ),
    ),
    Rule((TransportFailure, RateLimited), _UNREACHABLE),
    Rule((ApiError,), _UNREACHABLE, when=lambda e: e.status >= 500),
    Rule(
        (ApiError,),
        Outcome(
            "rejected",
            "rejected_by_service",
            lambda e, row, box: f"{e.error_code}: {e.message}",
            counter="rejected_by_service",
            keep_response=True,
        ),
    ),
)

SCOPE_REFUSED = (
    "the service refused to write with this key (insufficient_scope): set "
    "CENTSYNC_API_KEY to a read and write key (data.write scope) and run "
    "`centsync writeback`; every row stays pending."
)


def outcome_of(error: Exception) -> Outcome | None:
    """The outcome table's answer for an error (None: not a send's failure, let it through)."""
    for rule in OUTCOMES:
        if isinstance(error, rule.kinds) and rule.when(error):
            return rule.outcome
    return None


def _error_body(e: ApiError) -> str:
    return orjson.dumps({"error": {"code": e.error_code, "message": e.message}}).decode()


def _unknown(row: Row) -> bool:
    sent, answered = row["last_sent_at"], row["last_response_at"]
    return sent is not None and (answered is None or answered < sent)


def candidates(client: ApiClient, row: Row, claimed: set[str]) -> list[dict[str, Any]]:
    """The service's transactions this create could have made: same account, day and amount.

    Not by concept: a row renamed in the app since it was posted is still the same row.
    """
    out, page = [], 1
    while True:
        frame, meta = client.transactions_page(
            page,
            limit=200,
            from_=row["booked_at"],
            to=row["booked_at"],
            account_id=str(row["account_id"]),
            raw=False,
        )
        for t in frame.iter_rows(named=True):
            if t["amount"] == row["amount"] and str(t["id"]) not in claimed:
                out.append({"id": str(t["id"]), "concept": t["concept"]})
        if frame.height < 200 or page * 200 >= int(meta.get("total") or 0):
            return out
        page += 1


class ServiceClock:
    """The service's time: its latest answer's `Date` header (the drain's own `GET /v1/me`, then
    each send's answer), carried on by the local clock; net worth's `as_of` (one request) only
    when the service sends no `Date`. The service keeps idempotency keys 24 hours of ITS time,
    whatever the local clock says."""

    def __init__(self, client: ApiClient, local_now: Callable[[], dt.datetime]) -> None:
        self._client, self.local_now = client, local_now
        self._offset: dt.timedelta | None = None
        self.requests = 0

    def now(self) -> dt.datetime:
        offset = self._client.service_offset()
        if offset is None:
            if self._offset is None:
                self.requests += 1
                as_of = self._client.net_worth().as_of
                local = self.local_now()
                self._offset = (as_of - local) if as_of is not None else dt.timedelta(0)
            offset = self._offset
        return (self.local_now() + offset).astimezone(dt.UTC)


def _read_only(pending: int, scopes: list[str]) -> WriteScopeMissing:
    return WriteScopeMissing(
        f"{pending} write-back request(s) wait in the outbox, but this API key is "
        f"read-only (scopes: {', '.join(scopes) or 'none'}). Writing needs a key with the "
        "data.write scope: set CENTSYNC_API_KEY to a read and write key and run "
        "`centsync writeback`. Nothing was sent; every row stays pending."
    )


def drain(
    client: ApiClient, outbox: Outbox, options: WritebackOptions, summary: WritebackResult
) -> None:
    """Send every pending row, in order, each outcome recorded before the next send."""
    pending = outbox.in_state("pending")
    if not pending:
        return
    me = client.me()
    if not me.can_write:
        raise _read_only(len(pending), list(me.scopes))
    claimed = outbox.server_ids()
    clock = ServiceClock(client, options.now)
    try:
        for row in pending:
            now = options.now()
            if _past_key_window(client, outbox, row, claimed, clock, summary):
                continue
            _send(client, outbox, row, claimed, now, options, summary, clock.now())
    finally:
        summary.requests += clock.requests


def _past_key_window(
    client: ApiClient,
    outbox: Outbox,
    row: Row,
    claimed: set[str],
    clock: ServiceClock,
    summary: WritebackResult,
) -> bool:
    """A create whose outcome is unknown and whose key the service may have forgotten: True
    when it must not be sent (found on the service, or parked for a person to decide).

    The key's age is judged on the service's clock (its time at the first send, recorded then,
    against its time now); on the local one too, whichever is older, since either may be wrong.
    The row is sent again only when the service provably holds no transaction on its account,
    day and amount: such a row with the same concept is this one (`sent`, found by lookup);
    without one, those found are listed for a person (`needs_attention`), never guessed at.
    """
    if not (row["operation"] == "create" and _unknown(row) and row["first_sent_at"]):
        return False
    service_now = clock.now()
    first_on_service = outbox.first_sent_on_service(row["id"])
    ages = [service_now - row["first_sent_at"], clock.local_now() - row["first_sent_at"]]
    if first_on_service is not None:
        ages.append(service_now - first_on_service)
    if max(ages) <= KEY_TTL - KEY_MARGIN:
        return False
    found = candidates(client, row, claimed)
    summary.requests += 1
    if not found:
        return False
    now = clock.local_now()
    same = [c for c in found if c["concept"] == row["concept"]]
    if same:
        claimed.add(same[0]["id"])
        outbox.record(
            row["id"],
            now,
            state="sent",
            event="found_by_lookup",
            server_id=same[0]["id"],
            reason="its key had expired (24 h on the service's clock) with the outcome unknown; "
            "found on the service (same account, day, amount and concept), so not sent again",
            found_by_lookup=True,
        )
        summary.found_by_lookup += 1
        return True
    listed = "; ".join(f"{c['id']} {c['concept']!r}" for c in found[:10])
    outbox.record(
        row["id"],
        now,
        state="needs_attention",
        event="lookup_ambiguous",
        reason=f"its key had expired (24 h on the service's clock) with the outcome unknown, and "
        f"the service holds {len(found)} transaction(s) on its account, day and amount that may "
        f"be it (renamed since?): {listed}. Not sent again: if none of them is this row, "
        "post it by hand or add it to the inbox under a new event id",
    )
    summary.needs_attention += 1
    return True


def _send(
    client: ApiClient,
    outbox: Outbox,
    row: Row,
    claimed: set[str],
    now: dt.datetime,
    options: WritebackOptions,
    summary: WritebackResult,
    service_now: dt.datetime | None = None,
) -> None:
    """Send one row (its attempt noted first, at `now`, with the service's time) and record
    what came back."""
    body = orjson.loads(row["body"])
    outbox.mark_attempt(row["id"], now, service_now)
    try:
        summary.requests += 1
        t = client.write(
            row["method"],
            row["path"],
            body,
            idempotency_key=row["idempotency_key"],
            claimed=claimed,
        )
    except (ApiError, TransportFailure, WriteUnconfirmed) as e:
        outcome = outcome_of(e)
        if outcome is None:
            raise
        _record_failure(outbox, row, e, outcome, options.now(), summary)
        if outcome.stop is Stop.WRITE_SCOPE:
            raise WriteScopeMissing(SCOPE_REFUSED) from None
        if outcome.stop is Stop.RERAISE:
            raise
        if outcome.stop is Stop.DRAIN:
            raise DrainStopped(str(e)) from e
        return
    outbox.record(
        row["id"],
        options.now(),
        state="sent",
        event="replayed" if t.replayed else "sent",
        reason=f"its transaction was {t.found}" if "read back" in t.found else None,
        status=t.status or (201 if row["operation"] == "create" else 200),
        response=t.answer or t.raw,
        server_id=t.id,
        replayed=t.replayed,
    )
    claimed.add(t.id)
    summary.sent += 1
    summary.replayed += int(t.replayed)


def _record_failure(
    outbox: Outbox,
    row: Row,
    error: ApiError | TransportFailure | WriteUnconfirmed,
    outcome: Outcome,
    now: dt.datetime,
    summary: WritebackResult,
) -> None:
    """Write a failed send's outcome to its row and count it."""
    reason = outcome.reason(error, row, outbox)
    if outcome.state is None:
        outbox.note_unknown(row["id"], now, reason)
    else:
        assert isinstance(error, ApiError)  # only an answer from the service has a state
        outbox.record(
            row["id"],
            now,
            state=outcome.state,
            event=outcome.event,
            reason=reason,
            status=error.status,
            response=_error_body(error) if outcome.keep_response else None,
        )
    if outcome.counter is not None:
        setattr(summary, outcome.counter, getattr(summary, outcome.counter) + 1)
    if outcome.state in ("rejected", "needs_attention"):
        summary.refused.append(
            {
                "source": row["source"],
                "source_name": row["source_name"],
                "line": row["source_line"],
                "operation": row["operation"],
                "request": f"{row['method']} {row['path']}",
                "state": outcome.state,
                "reason": reason,
                "row": row["row_text"],
            }
        )
