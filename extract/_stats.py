"""Request accounting: what a run spent, per endpoint."""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import asdict, dataclass, field

import polars as pl

from centsync.transform.contract import UUID_PATTERN

# the contract's uuid, found anywhere in a path (the pattern without its anchors)
_UUID = re.compile(UUID_PATTERN.removeprefix("^").removesuffix("$"))


@functools.lru_cache(maxsize=4096)
def endpoint_name(method: str, path: str) -> str:
    """``GET /v1/transactions/{id}`` for ``GET /v1/transactions/<uuid>``: one row per endpoint."""
    return f"{method.upper()} {_UUID.sub('{id}', path.split('?', 1)[0])}"


@dataclass
class EndpointStats:
    """Counters for one endpoint."""

    requests: int = 0  # every attempt sent, retries included
    retries: int = 0  # attempts after the first of a logical call
    rate_limited: int = 0  # 429 answers (either code)
    errors: int = 0  # error answers and transport failures
    transport_errors: int = 0
    rereads: int = 0  # drift-safe window re-reads (list endpoint only)
    bytes: int = 0  # response body bytes received
    pacing_wait_s: float = 0.0  # time spent waiting for the rate-limit buckets


@dataclass
class RequestStats:
    """Per-endpoint accounting, safe to update from concurrent tasks."""

    endpoints: dict[str, EndpointStats] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, endpoint: str, **counts: float) -> None:
        with self._lock:
            stats = self.endpoints.get(endpoint)
            if stats is None:
                stats = self.endpoints[endpoint] = EndpointStats()
            for name, value in counts.items():
                setattr(stats, name, getattr(stats, name) + value)

    def total(self) -> EndpointStats:
        """The sum over every endpoint."""
        out = EndpointStats()
        with self._lock:
            for stats in self.endpoints.values():
                for name, value in asdict(stats).items():
                    setattr(out, name, getattr(out, name) + value)
        return out

    def snapshot(self) -> dict[str, dict[str, float]]:
        """A plain copy (for JSON reports and run metadata)."""
        with self._lock:
            return {name: asdict(stats) for name, stats in sorted(self.endpoints.items())}

    def as_frame(self) -> pl.DataFrame:
        """One row per endpoint: endpoint, requests, retries, rate_limited, errors, ... ."""
        rows = [{"endpoint": name, **counts} for name, counts in self.snapshot().items()]
        schema = {"endpoint": pl.Utf8} | {
            name: (pl.Float64 if name == "pacing_wait_s" else pl.Int64)
            for name in asdict(EndpointStats())
        }
        return pl.DataFrame(rows, schema=schema)

    def reset(self) -> None:
        with self._lock:
            self.endpoints.clear()
