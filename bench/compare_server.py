"""The sandbox as `bench/compare.py` serves it: over real loopback HTTP (uvicorn, as
`centsync sandbox serve --no-rate-limit` does), with a counting middleware in front and the
server's own ledger written to a Parquet file for the exactness checks.

    python bench/compare_server.py --keys-out KEYS --truth TRUTH.parquet [--transactions N] [--years Y]

`GET /_bench/requests` (admin token) answers `{"total": n, "by_path": {...}}`: every `/v1`
request the server received since it started, errors included. The driver reads it before and
after each run. The keys file appears (as the CLI's does) only once the server accepts
connections, after the Parquet file is complete.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from centsync.sandbox import Sandbox, SandboxConfig
from centsync.sandbox.server import serve

TRUTH_SCHEMA = {
    "id": pl.String,
    "account_id": pl.String,
    "concept": pl.String,
    "amount": pl.Int64,
    "booked_at": pl.String,
    "type": pl.String,
    "category_id": pl.String,
    "expense_goal_id": pl.String,
}


class Counting:
    """ASGI middleware: counts `/v1` requests by path; serves `/_bench/requests`."""

    def __init__(self, app: Any, admin_token: str) -> None:
        self.app = app
        self.by_path: Counter[str] = Counter()
        self.auth = f"Bearer {admin_token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if path == "/_bench/requests":
                if dict(scope["headers"]).get(b"authorization") != self.auth:
                    await _answer(send, 401, {"error": {"code": "unauthenticated"}})
                    return
                body = {"total": sum(self.by_path.values()), "by_path": dict(self.by_path)}
                await _answer(send, 200, body)
                return
            if path.startswith("/v1"):
                self.by_path[path if not path.startswith("/v1/transactions/") else _tx(path)] += 1
        await self.app(scope, receive, send)


def _tx(path: str) -> str:
    tail = path[len("/v1/transactions/") :]
    return path if tail == "summary" else "/v1/transactions/{id}"


async def _answer(send: Any, status: int, body: dict[str, Any]) -> None:
    data = orjson.dumps(body)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def write_truth(sb: Sandbox, path: Path) -> int:
    rows = sb.service.ledger.rows
    cols: dict[str, list[Any]] = {name: [] for name in TRUTH_SCHEMA}
    for t in rows:
        rec = t.record(notes=False, extra=False)
        for name, values in cols.items():
            values.append(rec[name])
    df = pl.DataFrame(cols, schema=TRUTH_SCHEMA)
    tmp = path.with_name(path.name + ".tmp")
    df.write_parquet(tmp)
    tmp.replace(path)
    return df.height


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys-out", type=Path, required=True)
    ap.add_argument("--truth", type=Path, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--transactions", type=int, default=None)
    ap.add_argument("--years", type=int, default=3)
    args = ap.parse_args()
    t = time.perf_counter()
    sb = Sandbox(
        SandboxConfig(
            seed=args.seed, years=args.years, transactions=args.transactions, rate_limit=False
        )
    )
    n = write_truth(sb, args.truth)
    print(f"sandbox: {n:,} rows ready in {time.perf_counter() - t:.1f} s", flush=True)
    sb.app = Counting(sb.app, sb.keys["admin_token"])  # type: ignore[assignment]
    serve(sb, "127.0.0.1", args.port, args.keys_out)


if __name__ == "__main__":
    main()
