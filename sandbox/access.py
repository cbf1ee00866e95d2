"""Access to the service: API keys, per-key rate limits, and idempotent replays."""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import string
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from centsync.sandbox.errors import ServiceError
from centsync.sandbox.household import (
    DAY_MS,
    HOUR_MS,
)
from centsync.sandbox.ledger import iso_ms

IDEMPOTENCY_TTL_MS = 24 * HOUR_MS
_KEY_ALPHABET = string.ascii_letters + string.digits


@dataclass
class Key:
    id: str
    owner: str
    name: str
    digest: bytes
    scopes: list[str]
    expires_ms: int
    minute_limit: int
    hour_limit: int
    revoked: bool = False
    minute_window: int = -1
    minute_count: int = 0
    hour_window: int = -1
    hour_count: int = 0


@dataclass
class IdemEntry:
    fingerprint: bytes
    created_ms: int
    done: bool = False
    status: int = 0
    body: bytes = b""


def _new_key_value() -> str:
    return "pfd_live_" + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(40))


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def canonical(body: Any) -> bytes:
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


class Access:
    """Keys (stored as SHA-256 digests), fixed-window limits and the idempotency store."""

    if TYPE_CHECKING:  # what Service holds
        keys: list[Key]
        idempotency: dict[tuple[str, str], IdemEntry]
        config: Any
        faults: Any
        now_ms: int
        owner: str
        advanced_s: float  # seconds the simulated clock was moved on (rate windows follow)

    def create_key(
        self,
        scopes: list[str],
        name: str = "key",
        expires_ms: int | None = None,
        minute_limit: int | None = None,
        hour_limit: int | None = None,
    ) -> str:
        value = _new_key_value()
        self.keys.append(
            Key(
                id=str(uuid.uuid4()),
                owner=self.owner,
                name=name,
                digest=_digest(value),
                scopes=scopes,
                expires_ms=expires_ms if expires_ms is not None else self.now_ms + 365 * DAY_MS,
                minute_limit=minute_limit or self.config.minute_limit,
                hour_limit=hour_limit or self.config.hour_limit,
            )
        )
        return value

    def authenticate(self, header: str | None) -> Key:
        if not header or not header.startswith("Bearer "):
            raise ServiceError(401, "unauthenticated", "Send `Authorization: Bearer <API key>`.")
        digest = _digest(header[7:].strip())
        found = None
        for k in self.keys:  # constant-time comparison against every stored hash
            if hmac.compare_digest(k.digest, digest):
                found = k
        if found is None or found.revoked:
            raise ServiceError(401, "unauthenticated", "Unknown or revoked API key.")
        if self.now_ms >= found.expires_ms:
            raise ServiceError(
                401,
                "key_expired",
                f"This API key expired at {iso_ms(found.expires_ms)}; create a new one.",
            )
        return found

    def limits(self, key: Key) -> tuple[int, int]:
        if not self.config.rate_limit:
            return 1_000_000_000, 1_000_000_000
        return key.minute_limit, key.hour_limit

    def count_request(self, key: Key) -> None:
        """Count one request in the key's fixed wall-clock windows; 429 once a window is spent.
        The windows are the machine's clock moved on by the simulated clock's advances (an
        hour advanced opens the next hourly window)."""
        now = time.time() + self.advanced_s
        minute, hour = int(now // 60), int(now // 3600)
        if key.minute_window != minute:
            key.minute_window, key.minute_count = minute, 0
        if key.hour_window != hour:
            key.hour_window, key.hour_count = hour, 0
        key.minute_count += 1
        key.hour_count += 1
        if self.faults.rate_limit_burst > 0:
            self.faults.rate_limit_burst -= 1
            raise ServiceError(
                429,
                "rate_limited",
                "Rate limit exceeded (injected burst).",
                headers={"Retry-After": "1"},
            )
        mlim, hlim = self.limits(key)
        if key.hour_count > hlim:
            wait = math.ceil((hour + 1) * 3600 - now)
            raise ServiceError(
                429,
                "rate_limited",
                f"Hourly allowance of {hlim} requests used up.",
                headers={"Retry-After": str(max(1, wait))},
            )
        if key.minute_count > mlim:
            wait = math.ceil((minute + 1) * 60 - now)
            raise ServiceError(
                429,
                "rate_limited",
                f"Per-minute allowance of {mlim} requests used up.",
                headers={"Retry-After": str(max(1, wait))},
            )

    def remaining(self, key: Key) -> tuple[int, int, int, int]:
        now = time.time() + self.advanced_s
        mlim, hlim = self.limits(key)
        mc = key.minute_count if key.minute_window == int(now // 60) else 0
        hc = key.hour_count if key.hour_window == int(now // 3600) else 0
        return mlim, max(0, mlim - mc), hlim, max(0, hlim - hc)

    # ---- idempotency -----------------------------------------------------------------------
    def idem_begin(self, key: Key, idem: str, fingerprint: bytes) -> IdemEntry | None:
        """None: go ahead (an in-progress entry is recorded). An entry: replay it."""
        self._idem_expire()
        ent = self.idempotency.get((key.owner, idem))
        if ent is None:
            self.idempotency[(key.owner, idem)] = IdemEntry(fingerprint, self.now_ms)
            return None
        if ent.fingerprint != fingerprint:
            raise ServiceError(
                422,
                "idempotency_key_reused",
                "This Idempotency-Key was used with a different request; use a new key for a new request.",
            )
        if not ent.done:
            raise ServiceError(
                409,
                "idempotency_conflict",
                "A request with this Idempotency-Key is still being processed; retry shortly.",
                headers={"Retry-After": "1"},
            )
        return ent

    def idem_end(self, key: Key, idem: str, status: int, body: bytes) -> None:
        ent = self.idempotency.get((key.owner, idem))
        if ent is None:
            return
        if 200 <= status < 300:
            ent.done, ent.status, ent.body = True, status, body
        else:  # only successes are kept: the key may be used again with a corrected body
            del self.idempotency[(key.owner, idem)]

    def _idem_expire(self) -> None:
        cutoff = self.now_ms - IDEMPOTENCY_TTL_MS
        stale = [k for k, e in self.idempotency.items() if e.done and e.created_ms < cutoff]
        for k in stale:
            del self.idempotency[k]
