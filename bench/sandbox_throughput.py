"""Sandbox throughput over loopback: pages/s of limit=200, unfiltered and month-filtered.

Starts `centsync sandbox serve` as its own process (one core) and drives it from this one
with a small keep-alive HTTP/1.1 load generator on raw asyncio sockets (a generic HTTP
client would measure itself, not the server). Prints pages/s, rows/s and summary latency.

    uv run python bench/sandbox_throughput.py [--transactions 1000000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from centsync.sandbox.server import spawn_serve


async def _worker(
    host: str, port: int, key: str, paths: list[str], deadline: float, out: list[int]
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    rng = random.Random(len(out))
    n = 0
    try:
        while time.perf_counter() < deadline:
            path = rng.choice(paths)
            writer.write(
                f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n\r\n".encode()
            )
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            if status != 200:
                raise RuntimeError(f"{path} answered {status}")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            n += 1
    finally:
        writer.close()
        out.append(n)


async def _drive(base_url: str, key: str, paths: list[str], seconds: float, conns: int) -> float:
    u = urlsplit(base_url)
    out: list[int] = []
    start = time.perf_counter()
    deadline = start + seconds
    await asyncio.gather(
        *(
            _worker(u.hostname or "127.0.0.1", u.port or 80, key, paths, deadline, out)
            for _ in range(conns)
        )
    )
    return sum(out) / (time.perf_counter() - start)


def _get(base_url: str, key: str, path: str) -> tuple[float, dict]:
    import httpx

    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}) as c:
        c.get(path)  # warm
        times = []
        for _ in range(20):
            t = time.perf_counter()
            r = c.get(path)
            times.append((time.perf_counter() - t) * 1000)
        return statistics.median(times), r.json()


def _unfiltered_paths(total: int) -> list[str]:
    """Random pages across the whole ledger (deep offsets included)."""
    pages = -(-total // 200)
    return [
        f"/v1/transactions?limit=200&page={p}"
        for p in random.Random(1).sample(range(1, pages + 1), min(pages, 2000))
    ]


def _monthly_paths(months: list[dict]) -> list[str]:
    """Every page of every month, month-filtered, shuffled."""
    monthly = []
    for m in months:
        y, mo = map(int, m["key"].split("-"))
        last = (
            31 if mo in (1, 3, 5, 7, 8, 10, 12) else 30 if mo != 2 else (29 if y % 4 == 0 else 28)
        )
        frm, to = f"{y:04d}-{mo:02d}-01", f"{y:04d}-{mo:02d}-{last:02d}"
        mpages = max(1, -(-m["count"] // 200))
        monthly += [
            f"/v1/transactions?limit=200&from={frm}&to={to}&page={p}" for p in range(1, mpages + 1)
        ]
    random.Random(2).shuffle(monthly)
    return monthly


def _measure(base: str, key: str, args: argparse.Namespace, startup: float) -> None:
    """Drive the running sandbox and print its page rates and aggregate latencies."""
    total = _get(base, key, "/v1/transactions?limit=1")[1]["total"]
    unfiltered = _unfiltered_paths(total)
    # Month-filtered: random pages of random months.
    months = _get(base, key, "/v1/analytics/spending?group_by=month&from=2000-01-01&to=2100-12-31")[
        1
    ]["data"]
    monthly = _monthly_paths(months)
    # Warm the row cache the way any reader would, then measure.
    asyncio.run(_drive(base, key, unfiltered, 1.0, args.connections))
    u_rate = asyncio.run(_drive(base, key, unfiltered, args.seconds, args.connections))
    m_rate = asyncio.run(_drive(base, key, monthly, args.seconds, args.connections))
    s_ms, _ = _get(base, key, "/v1/transactions/summary")
    year = f"from={months[-12]['key']}-01&to={months[-1]['key']}-28"
    y_ms, _ = _get(base, key, f"/v1/transactions/summary?{year}")
    sp_ms, _ = _get(base, key, f"/v1/analytics/spending?group_by=category&{year}")
    print(
        f"sandbox throughput: {total:,} transactions, {args.years} years, startup {startup:.1f} s"
    )
    print(
        f"  unfiltered pages (limit=200):     {u_rate:8,.0f} pages/s  ({u_rate * 200:,.0f} rows/s)"
    )
    print(
        f"  month-filtered pages (limit=200): {m_rate:8,.0f} pages/s  ({m_rate * 200:,.0f} rows/s)"
    )
    print(f"  summary, whole ledger:            {s_ms:8.2f} ms (median of 20)")
    print(f"  summary, one year:                {y_ms:8.2f} ms")
    print(f"  spending by category, one year:   {sp_ms:8.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transactions", type=int, default=1_000_000)
    ap.add_argument("--years", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--port", type=int, default=8799)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp())
    keys_file = tmp / "keys.json"
    t0 = time.perf_counter()
    proc = spawn_serve(
        keys_file,
        "--port",
        str(args.port),
        "--no-rate-limit",
        "--transactions",
        str(args.transactions),
        "--years",
        str(args.years),
    )
    try:
        startup = time.perf_counter() - t0
        keys = json.loads(keys_file.read_text())
        _measure(keys["base_url"], keys["read_only"], args, startup)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        os.environ.pop("_", None)


if __name__ == "__main__":
    main()
