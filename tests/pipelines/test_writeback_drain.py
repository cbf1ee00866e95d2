"""The drain's outcome table, row by row: what each failed send leaves in the outbox, what it
counts and whether the drain stops (the behaviour of the former except ladder, pinned)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from centsync.extract import (
    ApiError,
    IdempotencyConflict,
    IdempotencyKeyReused,
    InsufficientScope,
    InternalError,
    InvalidRequest,
    KeyExpired,
    ProviderQuotaExhausted,
    RateLimited,
    TransportFailure,
    Unauthenticated,
    WriteUnconfirmed,
)
from centsync.pipelines.results import WritebackResult
from centsync.pipelines.writeback.drain import DrainStopped, WriteScopeMissing, drain
from centsync.pipelines.writeback.summary import WritebackOptions
from centsync.warehouse.outbox import PLAN_FIELDS, Outbox

T0 = dt.datetime(2026, 11, 24, 12, tzinfo=dt.UTC)


def api(kind: type[ApiError], status: int, code: str = "some_code") -> ApiError:
    return kind(
        status=status,
        code=code,
        message="what the service said",
        method="POST",
        path="/v1/transactions",
    )


@dataclass
class Me:
    scopes: tuple[str, ...] = ("data.read", "data.write")

    @property
    def can_write(self) -> bool:
        return "data.write" in self.scopes


@dataclass
class NetWorth:
    as_of: dt.datetime


@dataclass
class FailingClient:
    """A client whose every write fails with one error."""

    error: Exception
    writes: list[str] = field(default_factory=list)
    reads: int = 0

    def me(self) -> Me:
        return Me()

    def service_offset(self) -> None:
        return None  # a service that sends no Date header: net worth's as_of dates it

    def net_worth(self) -> NetWorth:
        self.reads += 1  # the service's clock, read once a drain
        return NetWorth(T0)

    def write(
        self, method: str, path: str, body: Any, *, idempotency_key: str, claimed: Any = ()
    ) -> Any:
        self.writes.append(idempotency_key)
        raise self.error


def outbox_with_two_rows(tmp_path: Path) -> Outbox:
    box = Outbox(tmp_path / "centsync.outbox.duckdb")
    rows = []
    for n in (1, 2):
        row: dict[str, Any] = dict.fromkeys(PLAN_FIELDS)
        row.update(
            idempotency_key=f"key-{n}",
            body_sha256=f"sha-{n}",
            operation="create",
            method="POST",
            path="/v1/transactions",
            body='{"amount":-100}',
            state="pending",
            source="inbox",
            source_name="f.csv",
            source_line=n + 1,
            event_ref=f"event:{n}",
        )
        rows.append(row)
    assert box.enqueue(rows, T0) == ["new", "new"]
    return box


# error, the first row's state, its reason's start, the counter, what the drain raises
CASES: list[tuple[Exception, str, str, str | None, type[Exception] | None]] = [
    (api(InsufficientScope, 403, "insufficient_scope"), "pending", "insufficient_scope: needs a key", None, WriteScopeMissing),
    (api(Unauthenticated, 401, "unauthenticated"), "pending", "unauthenticated: the key was refused", None, Unauthenticated),
    (api(KeyExpired, 401, "key_expired"), "pending", "key_expired: the key was refused", None, KeyExpired),
    (api(IdempotencyKeyReused, 422, "idempotency_key_reused"), "needs_attention", "idempotency_key_reused: the service holds", "needs_attention", None),
    (api(IdempotencyConflict, 409, "idempotency_conflict"), "pending", "outcome unknown, will be resent with the same key: idempotency_conflict", "unknown", None),
    (api(RateLimited, 429, "rate_limited"), "pending", "outcome unknown", "unknown", DrainStopped),
    (TransportFailure("POST", "/v1/transactions", ConnectionResetError()), "pending", "outcome unknown", "unknown", DrainStopped),
    (api(InternalError, 500, "internal_error"), "pending", "outcome unknown", "unknown", DrainStopped),
    (api(InvalidRequest, 502, "invalid_request"), "pending", "outcome unknown", "unknown", DrainStopped),
    (api(InvalidRequest, 400, "invalid_request"), "rejected", "invalid_request: what the service said", "rejected_by_service", None),
    (api(ProviderQuotaExhausted, 429, "provider_quota_exhausted"), "rejected", "provider_quota_exhausted: what", "rejected_by_service", None),
    (WriteUnconfirmed("POST", "/v1/transactions", 202, "accepted, not found"), "pending", "outcome unknown", "unknown", None),
]  # fmt: skip


@pytest.mark.parametrize(("error", "state", "reason", "counter", "raised"), CASES)
def test_each_failed_send_has_one_outcome(
    tmp_path: Path,
    error: Exception,
    state: str,
    reason: str,
    counter: str | None,
    raised: type[Exception] | None,
) -> None:
    box = outbox_with_two_rows(tmp_path)
    client = FailingClient(error)
    summary = WritebackResult()
    options = WritebackOptions(now=lambda: T0)
    if raised is None:
        drain(client, box, options, summary)
    else:
        with pytest.raises(raised) as caught:
            drain(client, box, options, summary)
        if raised is WriteScopeMissing:
            assert caught.value.__cause__ is None and caught.value.__suppress_context__
        elif raised is DrainStopped:
            assert caught.value.__cause__ is error
        else:
            assert caught.value is error
    first, second = box.rows()
    assert first["state"] == state and first["reason"].startswith(reason), first["reason"]
    assert first["attempts"] == 1
    # a stop leaves the next row untouched; otherwise it was sent (and failed the same way)
    assert client.writes == (["key-1"] if raised else ["key-1", "key-2"])
    assert second["attempts"] == (0 if raised else 1)
    unknown = state == "pending" and reason.startswith("outcome unknown")
    # an unknown outcome is noted, not recorded: its response stays behind its send
    assert (first["last_response_at"] is None) == unknown
    if state == "pending" and not unknown:  # refused: recorded with its status, still pending
        assert first["response_status"] == getattr(error, "status", None)
    if state == "rejected":
        assert first["response_body"] == (
            '{"error":{"code":"' + error.error_code + '","message":"what the service said"}}'
        )
    counted = {
        c: getattr(summary, c) for c in ("needs_attention", "unknown", "rejected_by_service")
    }
    expected = 1 if raised else 2
    assert counted == {c: (expected if c == counter else 0) for c in counted}
    assert summary.requests == len(client.writes) + client.reads and client.reads == 1


def test_a_read_only_key_sends_nothing(tmp_path: Path) -> None:
    box = outbox_with_two_rows(tmp_path)

    class ReadOnly(FailingClient):
        def me(self) -> Me:
            return Me(("data.read",))

    client = ReadOnly(RuntimeError("never called"))
    with pytest.raises(
        WriteScopeMissing, match=r"2 write-back request\(s\) .*\(scopes: data\.read\)"
    ):
        drain(client, box, WritebackOptions(now=lambda: T0), WritebackResult())
    assert client.writes == [] and [r["attempts"] for r in box.rows()] == [0, 0]
