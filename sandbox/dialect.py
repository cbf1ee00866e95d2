"""The dialect mechanism: one response-shaping layer over the /v1 handlers.

The handlers compute the contract's answer (docs/api-contract.md); a `Dialect` then reshapes the
body, status and headers of each surface the API document leaves "not shown", so the sandbox can
answer like another plausible service over the same state and the same numbers. What the API
document fixes (the list envelope, the Transaction and Account fields, the bare accounts array,
`GET /v1/me`, the error envelope, 403 `insufficient_scope`, 429 `provider_quota_exhausted`) is
never touched. The one thing a post-hoc reshaping cannot do, the list's sort direction, is a
flag the list handler reads (`Dialect.ascending`). The registry of dialects is `dialects.py`.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from centsync.sandbox.http import Request, Response
from centsync.sandbox.service import Service

# The surfaces the API document leaves "not shown" (a dialect may reshape each)...
SHAPED = (
    "transactions_summary",
    "transaction",
    "create",
    "update",
    "assign",
    "accounts_summary",
    "connections",
    "net_worth",
    "spending",
    "settings",
    "sync_status",
    "sync",
)
# ...and the documented ones, answered as documented in every dialect (the list's rows may gain
# fields: the document allows additional fields, and `notes`, `created_at` are not fixed).
DOCUMENTED = ("me", "transactions", "accounts")
# Error codes the API document fixes: never renamed.
FIXED_CODES = frozenset({"insufficient_scope", "provider_quota_exhausted"})
# How a 429 `rate_limited` says when to come back
WAITS = ("retry_after", "reset_epoch", "reset_seconds", "none")
# How the per-key allowance is reported on every /v1 answer
LIMIT_HEADERS = ("contract", "none", "github", "delta", "ietf")

_STATIC = {
    ("GET", "/v1/me"): "me",
    ("GET", "/v1/transactions"): "transactions",
    ("POST", "/v1/transactions"): "create",
    ("GET", "/v1/transactions/summary"): "transactions_summary",
    ("GET", "/v1/accounts"): "accounts",
    ("GET", "/v1/accounts/summary"): "accounts_summary",
    ("GET", "/v1/connections"): "connections",
    ("GET", "/v1/analytics/net-worth"): "net_worth",
    ("GET", "/v1/analytics/spending"): "spending",
    ("GET", "/v1/settings"): "settings",
    ("GET", "/v1/sync/status"): "sync_status",
    ("POST", "/v1/sync"): "sync",
}
_ONE = re.compile(r"^/v1/transactions/[^/]+$")
_ASSIGN = re.compile(r"^/v1/transactions/[^/]+/expense$")


def surface_of(method: str, path: str) -> str | None:
    """The surface a /v1 request addresses (None: no such route)."""
    found = _STATIC.get((method, path))
    if found is not None:
        return found
    if method == "POST" and _ASSIGN.match(path):
        return "assign"
    if _ONE.match(path) and path != "/v1/transactions/summary":
        return {"GET": "transaction", "PATCH": "update"}.get(method)
    return None


@dataclass(frozen=True)
class Ctx:
    """What a shape may read besides the contract's answer: the same state, the wall clock."""

    service: Service
    wall: float

    def notes(self, tx_id: str) -> str | None:
        t = self.service.transaction(tx_id)
        return t.notes if t is not None else None


Shape = Callable[[Any, Ctx], Any]
TxShape = Callable[[dict[str, Any], Ctx, bool], dict[str, Any]]  # record, ctx, in the list


@dataclass(frozen=True)
class Dialect:
    """One way of speaking the API: per not-shown surface, a shape, a status, error codes, headers.

    Every field left at its default is the contract's answer: `Dialect("contract", ...)` changes
    nothing (and the app skips the layer for it, so the contract stays byte for byte).
    """

    name: str
    description: str  # one line
    imitates: str = ""
    ascending: bool = False  # the list oldest first (the contract's order reversed)
    tx: TxShape | None = None  # a transaction record's extra fields (list rows and single answers)
    shapes: Mapping[str, Shape] = field(default_factory=dict)  # surface -> body shape
    statuses: Mapping[str, int] = field(default_factory=dict)  # surface -> success status
    codes: Mapping[str, str] = field(default_factory=dict)  # contract error code -> this one's
    limit_headers: str = "contract"
    wait: str = "retry_after"

    def __post_init__(self) -> None:
        unknown = set(self.shapes) - set(SHAPED)
        fixed = set(self.codes) & FIXED_CODES
        if unknown or fixed or self.wait not in WAITS or self.limit_headers not in LIMIT_HEADERS:
            raise ValueError(
                f"dialect {self.name}: unknown surfaces {sorted(unknown)}, fixed codes "
                f"{sorted(fixed)}, wait {self.wait!r}, limit headers {self.limit_headers!r}"
            )

    @property
    def is_contract(self) -> bool:
        return (
            not self.ascending
            and self.tx is None
            and not self.shapes
            and not self.statuses
            and not self.codes
            and self.limit_headers == "contract"
            and self.wait == "retry_after"
        )

    def respond(
        self, req: Request, resp: Response, extra: list[tuple[bytes, bytes]]
    ) -> tuple[Response, list[tuple[bytes, bytes]]]:
        """The contract's answer to a /v1 request, as this dialect says it."""
        ctx = Ctx(req.service, time.time())
        surface = surface_of(req.method, req.path)
        wait: int | None = None
        if resp.status >= 400:
            resp, wait = self._error(resp)
        elif surface is not None and resp.body:
            resp = self._success(surface, resp, ctx)
        return resp, self._limit_headers(extra, wait, ctx.wall)

    def _success(self, surface: str, resp: Response, ctx: Ctx) -> Response:
        body = orjson.loads(resp.body)
        if surface == "transactions":
            if self.tx is None:
                return resp
            body["data"] = [self.tx(row, ctx, True) for row in body["data"]]
            return Response(resp.status, orjson.dumps(body), resp.headers)
        if surface in DOCUMENTED:
            return resp
        if self.tx is not None and surface in ("transaction", "create", "update", "assign"):
            body = self.tx(body, ctx, False)
        shape = self.shapes.get(surface)
        if shape is not None:
            body = shape(body, ctx)
        status = self.statuses.get(surface, resp.status)
        out = b"" if status == 204 else orjson.dumps(body)
        return Response(status, out, resp.headers)

    def _error(self, resp: Response) -> tuple[Response, int | None]:
        """The error renamed; a 429 `rate_limited` says when to come back this dialect's way."""
        body = orjson.loads(resp.body)
        code = body["error"]["code"]
        headers = resp.headers
        wait = None
        if code == "rate_limited":
            wait = next((int(v) for k, v in headers if k == b"retry-after"), 1)
            if self.wait != "retry_after":
                headers = [(k, v) for k, v in headers if k != b"retry-after"]
        if code in self.codes:
            body["error"]["code"] = self.codes[code]
        return Response(resp.status, orjson.dumps(body), headers), wait

    def _limit_headers(
        self, extra: list[tuple[bytes, bytes]], wait: int | None, wall: float
    ) -> list[tuple[bytes, bytes]]:
        """The per-key allowance reported this dialect's way (from the contract's four headers)."""
        found = {k: int(v) for k, v in extra if k.startswith(b"x-ratelimit-")}
        rest = [(k, v) for k, v in extra if not k.startswith(b"x-ratelimit-")]
        style = self.limit_headers
        if style == "contract" or not found:
            return [*extra, *self._reset(wait, wall)]
        if style == "none":
            return [*rest, *self._reset(wait, wall)]
        hour = found[b"x-ratelimit-remaining-hour"] == 0
        limit = found[b"x-ratelimit-limit-hour" if hour else b"x-ratelimit-limit-minute"]
        left = (
            0
            if wait is not None
            else found[b"x-ratelimit-remaining-hour" if hour else b"x-ratelimit-remaining-minute"]
        )
        window = 3600 if hour else 60
        ends = (math.floor(wall / window) + 1) * window if wait is None else wall + wait
        delta = max(0, math.ceil(ends - wall))
        if style == "github":
            pairs = [
                ("x-ratelimit-limit", limit),
                ("x-ratelimit-remaining", left),
                ("x-ratelimit-used", limit - left),
                ("x-ratelimit-reset", math.ceil(ends)),
                ("x-ratelimit-resource", "core"),
            ]
        elif style == "delta":
            pairs = [
                ("x-ratelimit-limit", limit),
                ("x-ratelimit-remaining", left),
                ("x-ratelimit-reset", delta),
            ]
        else:  # ietf: the RateLimit header fields draft
            pairs = [
                ("ratelimit-limit", limit),
                ("ratelimit-remaining", left),
                ("ratelimit-reset", delta),
                ("ratelimit-policy", f"{limit};w={window}"),
            ]
        return [*rest, *((k.encode(), str(v).encode()) for k, v in pairs)]

    def _reset(self, wait: int | None, wall: float) -> list[tuple[bytes, bytes]]:
        """`X-RateLimit-Reset` on a 429 for a dialect whose headers do not carry it already."""
        if wait is None or not self.wait.startswith("reset"):
            return []
        value = math.ceil(wall + wait) if self.wait == "reset_epoch" else wait
        return [(b"x-ratelimit-reset", str(value).encode())]


# ---- small tools the dialects' shapes are written with -----------------------------------------
def renamed(obj: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """`obj` with keys renamed (order and every other key kept: unknown fields survive)."""
    return {names.get(k, k): v for k, v in obj.items()}


def without(obj: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in keys}


def epoch(iso: object) -> int | None:
    """Whole seconds since the epoch of an ISO 8601 UTC instant (None stays None)."""
    if not isinstance(iso, str):
        return None
    return int(datetime.fromisoformat(iso).timestamp())


def month_day(key: object, group_by: str) -> object:
    """A spending month key as a date, `2025-03` -> `2025-03-01` (other keys as they are)."""
    return f"{key}-01" if group_by == "month" and isinstance(key, str) else key
