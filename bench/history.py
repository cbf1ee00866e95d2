"""What keeping every version costs (issue 45): a year of daily refreshes, the sandbox's clock
moved a day before each (its admin API, `POST /_sandbox/clock/advance`: the bank syncs that
fall due bring new rows and settle, change or cancel pending ones, as `centsync sandbox
advance` does), for a household and for a 200,000-row ledger.

Prints, per ledger: the versions written, the bytes they take (history.transaction_versions
copied alone into a fresh DuckDB file, and as the zstd Parquet `centsync export` writes), the
time the history's writes added to the refreshes (warehouse/history.py `record` and `attribute`,
timed around each call), the refreshes' own time, and one as-of ledger, one `changes` and one
marts-as-of at the end. In process (httpx.ASGITransport), reconciliation on, as a daily refresh.

    uv run python bench/history.py                          # household, 365 days
    uv run python bench/history.py --transactions 200000 --days 365
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import duckdb
import httpx

with warnings.catch_warnings():  # starlette's notice about httpx, not ours
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from centsync.extract import ApiClient
from centsync.pipelines import history as use_case
from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
from centsync.sandbox import Sandbox, SandboxConfig
from centsync.warehouse import history

BASE = "http://sandbox.test"
START = dt.datetime(2025, 11, 15, 12, tzinfo=dt.UTC)


class Timed:
    """Seconds spent inside history's writes, summed over the refreshes."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t
                self.calls += 1

        return timed


def _size(con: duckdb.DuckDBPyConnection, tmp: Path) -> tuple[int, int]:
    """Bytes of history.transaction_versions alone: in a fresh DuckDB file, and as Parquet."""
    empty, alone = tmp / "empty.duckdb", tmp / "alone.duckdb"
    duckdb.connect(str(empty)).close()
    con.execute(f"ATTACH '{alone}' AS alone")
    con.execute("CREATE TABLE alone.v AS FROM history.transaction_versions")
    con.execute("DETACH alone")
    parquet = tmp / "versions.parquet"
    con.execute(
        f"COPY history.transaction_versions TO '{parquet}' (FORMAT parquet, COMPRESSION zstd)"
    )
    return alone.stat().st_size - empty.stat().st_size, parquet.stat().st_size


def one(transactions: int | None, days: int) -> dict[str, Any]:
    config = SandboxConfig(
        seed=7, years=2, transactions=transactions, start=START, rate_limit=False
    )
    sb = Sandbox(config)
    tmp = Path(tempfile.mkdtemp(prefix="history-bench-"))
    wh = tmp / "centsync.duckdb"
    timed = Timed()
    history.record = timed.wrap(history.record)  # type: ignore[method-assign]
    history.attribute = timed.wrap(history.attribute)  # type: ignore[method-assign]

    key = {"value": sb.keys["read_only"]}

    def refresh() -> float:
        t = time.perf_counter()
        transport = httpx.ASGITransport(app=sb.app)
        with ApiClient(BASE, key["value"], transport=transport) as client:
            run_refresh(client, wh, RefreshOptions(source="sandbox"))
        return time.perf_counter() - t

    first = refresh()
    timed.seconds, timed.calls = 0.0, 0
    headers = {"Authorization": f"Bearer {sb.keys['admin_token']}"}
    daily = []
    with TestClient(sb.app, base_url=BASE) as admin:
        for day in range(days):
            r = admin.post("/_sandbox/clock/advance", json={"days": 1}, headers=headers)
            r.raise_for_status()
            if day % 30 == 29:  # a key lives a year: a new one each month, as a person would
                body = {"scopes": ["data.read"], "expires_in_days": 365}
                got = admin.post("/_sandbox/keys", json=body, headers=headers)
                key["value"] = got.raise_for_status().json()["key"]
            daily.append(refresh())
    con = duckdb.connect(str(wh), read_only=True)
    rows = con.execute("SELECT count(*) FROM core.transactions").fetchall()[0][0]
    kinds = dict(
        con.execute("SELECT kind, count(*) FROM history.transaction_versions GROUP BY 1").fetchall()
    )
    con.close()
    con = duckdb.connect(str(wh))
    in_duckdb, in_parquet = _size(con, tmp)
    con.close()
    con = duckdb.connect(str(wh), read_only=True)
    t = time.perf_counter()
    as_of = con.execute(
        "SELECT count(*) FROM history.ledger_as_of(?)", [START + dt.timedelta(days=days // 2)]
    ).fetchall()[0][0]
    as_of_s = time.perf_counter() - t
    t = time.perf_counter()
    changed = use_case.changes(con, "1")
    changes_s = time.perf_counter() - t
    t = time.perf_counter()
    use_case.marts_as_of(con, refresh=1 + days // 2)
    marts_s = time.perf_counter() - t
    con.close()
    return {
        "rows": rows,
        "days": days,
        "first_sync_s": first,
        "daily_median_s": statistics.median(daily),
        "daily_total_s": sum(daily),
        "history_s": timed.seconds,
        "history_per_refresh_ms": 1000 * timed.seconds / max(days, 1),
        "versions": sum(kinds.values()),
        "kinds": kinds,
        "bytes_duckdb": in_duckdb,
        "bytes_parquet": in_parquet,
        "file_bytes": wh.stat().st_size,
        "as_of_rows": as_of,
        "as_of_s": as_of_s,
        "changes": len(changed.changes),
        "changes_s": changes_s,
        "marts_as_of_s": marts_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--transactions", type=int, default=None, help="ledger size (default: the household)"
    )
    parser.add_argument("--days", type=int, default=365)
    args = parser.parse_args()
    got = one(args.transactions, args.days)
    for k, v in got.items():
        print(f"{k:24} {v:.3f}" if isinstance(v, float) else f"{k:24} {v}")


if __name__ == "__main__":
    main()
