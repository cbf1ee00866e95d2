"""The plain recipe of issue 17, the floor centsync is measured against: httpx async with four
page requests in flight, each page parsed with `pl.read_json`, one DuckDB insert. No drift
checks, no retries, no validation, no reconciliation.

    BENCH_BASE_URL=... BENCH_API_KEY=... python bench/compare_plain.py WAREHOUSE.duckdb

Prints one JSON line: rows, requests, and seconds per step (fetch, frame, insert).
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
import time

import duckdb
import httpx
import orjson
import polars as pl

LIMIT = 200
CONCURRENCY = 4
ROW = pl.Struct(
    {
        "id": pl.String,
        "account_id": pl.String,
        "concept": pl.String,
        "amount": pl.Int64,
        "booked_at": pl.String,
        "type": pl.String,
        "category_id": pl.String,
        "expense_goal_id": pl.String,
        "created_at": pl.String,
        "updated_at": pl.String,
    }
)
PAGE = {"data": pl.List(ROW), "total": pl.Int64, "page": pl.Int64, "pages": pl.Int64}


async def fetch(base_url: str, key: str) -> tuple[list[bytes], int]:
    async with httpx.AsyncClient(
        base_url=base_url,
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
        limits=httpx.Limits(max_connections=CONCURRENCY),
    ) as client:

        async def page(n: int) -> bytes:
            r = await client.get("/v1/transactions", params={"limit": LIMIT, "page": n})
            r.raise_for_status()
            return r.content

        first = await page(1)
        pages = orjson.loads(first)["pages"]
        bodies: list[bytes] = [first] + [b""] * max(pages - 1, 0)
        queue = iter(range(2, pages + 1))

        async def worker() -> None:
            for n in queue:
                bodies[n - 1] = await page(n)

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return bodies, max(pages, 1)


def main() -> None:
    warehouse = sys.argv[1]
    t0 = time.perf_counter()
    bodies, requests = asyncio.run(fetch(os.environ["BENCH_BASE_URL"], os.environ["BENCH_API_KEY"]))
    t1 = time.perf_counter()
    frames = [pl.read_json(io.BytesIO(b), schema=PAGE).select("data") for b in bodies]
    bodies.clear()
    df = (
        pl.concat(frames)
        .explode("data")
        .drop_nulls("data")
        .unnest("data")
        .with_columns(pl.col("booked_at").str.to_date())
    )
    frames.clear()
    t2 = time.perf_counter()
    con = duckdb.connect(warehouse)
    con.execute("CREATE OR REPLACE TABLE transactions AS SELECT * FROM df")
    con.close()
    t3 = time.perf_counter()
    print(
        orjson.dumps(
            {
                "rows": df.height,
                "requests": requests,
                "fetch_s": round(t1 - t0, 3),
                "frame_s": round(t2 - t1, 3),
                "insert_s": round(t3 - t2, 3),
                "inside_s": round(t3 - t0, 3),
            }
        ).decode()
    )


if __name__ == "__main__":
    main()
