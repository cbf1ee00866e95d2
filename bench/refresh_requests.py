"""Requests per refresh, by kind of refresh and by plan, against re-reading everything
(docs/refresh.md, docs/benchmarks.md "Cost-based plan (issue 26)").

For each history (3 and 10 years at household density, or `--transactions N` rows), one sandbox
on loopback and one warehouse per plan (`cost`, the default since issue 26, and `fingerprints`,
every year proven, the plan before it), refreshed in lockstep so they see the same service:

- a first sync, a refresh at once (nothing changed), a refresh a day for a week (the sandbox
  clock advances a day before each: bank feeds add rows, rolling verification reads its share);
- five old edits, one in each of five old years (expense amounts: what a bank's correction
  does), then a refresh; five mixed old edits (an expense amount, an expense deleted, an income
  amount, an expense re-categorised, an expense renamed), then a refresh; three edits no
  aggregate sees (an income renamed, a date moved within its month, an Expense assigned);
- the re-read-everything baseline of each step: ceil(rows / 200) + 12, what a first sync of that
  many rows spends (the first sync row measures it).

Each warehouse is compared with the service, row by row, after every refresh ("exact").

    uv run python bench/refresh_requests.py                       # 3 and 10 years, household
    uv run python bench/refresh_requests.py --years 10 --transactions 200000
    uv run python bench/refresh_requests.py --plans fingerprints  # also runs on older commits
    uv run python bench/refresh_requests.py --allowance           # under 300/min, 10,000/h
    uv run python bench/refresh_requests.py --years 3 --dialect   # per sandbox dialect
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx

from centsync.extract import ApiClient
from centsync.pipelines.refresh.run import RefreshOptions, RefreshSummary, run_refresh
from centsync.sandbox.server import free_port, spawn_serve

HOT_MONTHS = 2


def options(plan: str) -> RefreshOptions:
    """The default options with `plan` (a commit before issue 26 has only the fingerprints)."""
    if "plan" in RefreshOptions.__dataclass_fields__:
        return RefreshOptions(plan=plan)  # type: ignore[call-arg]
    return RefreshOptions()


def exact(wh: Path, state: dict[str, Any]) -> bool:
    """Whether the warehouse holds exactly the service's transactions (id, amount, date,
    category, concept, Expense)."""
    con = duckdb.connect(str(wh), read_only=True)
    try:
        local = set(
            con.execute(
                "SELECT id::VARCHAR, amount, strftime(booked_at, '%Y-%m-%d'), "
                "category_id::VARCHAR, concept, expense_goal_id::VARCHAR FROM core.transactions"
            ).fetchall()
        )
    finally:
        con.close()
    server = {
        (
            t["id"],
            t["amount"],
            t["booked_at"],
            t["category_id"],
            t["concept"],
            t["expense_goal_id"],
        )
        for t in state["transactions"]
    }
    return local == server


def old_rows(state: dict[str, Any], kind: str, n: int) -> list[dict[str, Any]]:
    """`n` rows of type `kind` in `n` different old years (months before the hot window,
    the oldest year first; years are reused when the history has fewer)."""
    hot = sorted({t["booked_at"][:7] for t in state["transactions"]})[-HOT_MONTHS]
    by_year: dict[str, list[dict[str, Any]]] = {}
    for t in state["transactions"]:
        if t["type"] == kind and t["booked_at"][:7] < hot:
            by_year.setdefault(t["booked_at"][:4], []).append(t)
    years = sorted(by_year)
    step = max(1, len(years) // n)
    picked = [years[(i * step) % len(years)] for i in range(n)]
    return [
        by_year[y][(7 * i + len(by_year[y]) // 2) % len(by_year[y])] for i, y in enumerate(picked)
    ]


def edit_amounts(admin: httpx.Client, state: dict[str, Any]) -> None:
    """Five old expense amounts corrected, one in each of five old years."""
    for t in old_rows(state, "expense", 5):
        patch(admin, t, {"amount": t["amount"] - 137})


def edit_mixed(admin: httpx.Client, state: dict[str, Any]) -> None:
    """Five old edits of different kinds, in different years."""
    expenses = old_rows(state, "expense", 5)
    income = old_rows(state, "income", 5)
    categories = [c["id"] for c in state["categories"]]
    patch(admin, expenses[0], {"amount": expenses[0]["amount"] - 211})
    admin.delete(f"/_sandbox/transactions/{expenses[1]['id']}").raise_for_status()
    patch(admin, income[2], {"amount": income[2]["amount"] + 500})
    other = next(c for c in categories if c != expenses[3]["category_id"])
    patch(admin, expenses[3], {"category_id": other})
    patch(admin, expenses[4], {"concept": "Renamed by the user"})


def edit_invisible(admin: httpx.Client, state: dict[str, Any]) -> None:
    """Three old edits no aggregate of the API sees: an income renamed, a transfer's date moved
    within its month, an expense assigned to an Expense."""
    income = old_rows(state, "income", 3)
    transfers = [t for t in old_rows(state, "transfer", 3) if int(t["booked_at"][8:]) <= 20]
    expenses = old_rows(state, "expense", 3)
    patch(admin, income[0], {"concept": "Salary, renamed"})
    if transfers:
        t = transfers[0]
        patch(admin, t, {"booked_at": f"{t['booked_at'][:8]}{int(t['booked_at'][8:]) + 5:02d}"})
    goal = state["expenses"][0]["id"]
    patch(admin, expenses[1], {"expense_goal_id": goal})


def patch(admin: httpx.Client, t: dict[str, Any], body: dict[str, Any]) -> None:
    admin.patch(f"/_sandbox/transactions/{t['id']}", json=body).raise_for_status()


def located(s: RefreshSummary) -> int:
    """Requests spent beyond the year fingerprints to place and re-read differing months."""
    return sum(math.ceil(r["rows"] / 200) + 1 for r in s.months_reread if "differs" in r["reason"])


def one(years: int, n: int | None, plans: list[str]) -> None:
    tmp = Path(tempfile.mkdtemp())
    keys_file = tmp / "keys.json"
    serve = ["--port", str(free_port()), "--no-rate-limit", "--years", str(years)]
    if n:
        serve += ["--transactions", str(n)]
    proc = spawn_serve(keys_file, *serve)
    try:
        keys = json.loads(keys_file.read_text())
        admin = httpx.Client(
            base_url=keys["base_url"],
            headers={"Authorization": f"Bearer {keys['admin_token']}"},
            timeout=120,
        )
        rows: list[tuple[str, int, dict[str, tuple[RefreshSummary, bool, float]]]] = []
        with ApiClient(keys["base_url"], keys["read_only"]) as client:

            def step(label: str) -> None:
                got = {}
                for plan in plans:
                    started = time.monotonic()
                    s = run_refresh(client, str(tmp / f"{plan}.duckdb"), options(plan))
                    seconds = time.monotonic() - started
                    got[plan] = (s, False, seconds)
                state = admin.get("/_sandbox/state").json()
                for plan in plans:
                    s, _, seconds = got[plan]
                    got[plan] = (s, exact(tmp / f"{plan}.duckdb", state), seconds)
                rows.append((label, len(state["transactions"]), got))
                print_row(rows[-1], plans)  # as it comes: a long history prints as it goes

            step("first sync")
            step("at once, no change")
            for day in range(1, 8):
                admin.post("/_sandbox/clock/advance", json={"days": 1}).raise_for_status()
                step(f"day {day}")
            edit_amounts(admin, admin.get("/_sandbox/state").json())
            step("5 old amount edits")
            edit_mixed(admin, admin.get("/_sandbox/state").json())
            step("5 mixed old edits")
            edit_invisible(admin, admin.get("/_sandbox/state").json())
            step("3 invisible edits")
        print_table(years, rows, plans)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


def print_row(
    row: tuple[str, int, dict[str, tuple[RefreshSummary, bool, float]]], plans: list[str]
) -> None:
    """One refresh's line of the table (the header printed first)."""
    label, count, got = row
    line = f"{label:<20} {count:>9,} {math.ceil(count / 200) + 12:>11}"
    for plan in plans:
        s, ok, seconds = got[plan]
        line += (
            f" | {s.requests_total:>12} {located(s):>7} {'yes' if ok else 'NO':>5} {seconds:>6.1f}"
        )
    print(line, flush=True)


def print_table(
    years: int,
    rows: list[tuple[str, int, dict[str, tuple[RefreshSummary, bool, float]]]],
    plans: list[str],
) -> None:
    """The whole table again, once every refresh is done."""
    print(f"\n{years} years of history, {rows[-1][1]:,} transactions at the end")
    head = f"{'refresh':<20} {'rows':>9} {'re-read all':>11}"
    for plan in plans:
        head += f" | {plan:>12} {'located':>7} {'exact':>5} {'s':>6}"
    print(head)
    for row in rows:
        print_row(row, plans)


def allowance(years: int, n: int | None, minute: int, hour: int) -> None:
    """A first sync and a no-change refresh under the service's rate limit (the default
    allowance: 300 a minute, 10,000 an hour), against the floor: the time the allowance needs
    for that many requests."""
    tmp = Path(tempfile.mkdtemp())
    keys_file = tmp / "keys.json"
    serve = ["--port", str(free_port()), "--years", str(years)]
    serve += ["--minute-limit", str(minute), "--hour-limit", str(hour)]
    if n:
        serve += ["--transactions", str(n)]
    proc = spawn_serve(keys_file, *serve)
    try:
        keys = json.loads(keys_file.read_text())
        print(f"\n{years} years, {n or 'household'} rows, allowance {minute}/min and {hour}/h")
        print(f"{'refresh':<20} {'requests':>8} {'seconds':>8} {'floor s':>8}")
        with ApiClient(keys["base_url"], keys["read_only"]) as client:
            for label in ("first sync", "no change"):
                started = time.monotonic()
                s = run_refresh(client, str(tmp / "cost.duckdb"), options("cost"))
                seconds = time.monotonic() - started
                # requests / allowance (the floor): the minute's, and the hour's once a
                # refresh needs more than one hour's; the service's windows are fixed wall-clock
                # minutes, so up to a minute's allowance can go at once (below the floor)
                n = s.requests_total
                floor = n / minute * 60 + (math.ceil(n / hour) - 1) * 3600
                print(
                    f"{label:<20} {s.requests_total:>8} {seconds:>8.1f} {floor:>8.1f}", flush=True
                )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


def dialects(years: int, n: int | None, names: list[str]) -> None:
    """A first sync and a no-change refresh against each sandbox dialect (docs/api-contract.md,
    "Dialects"), against the contract's: requests, wall time, and whether the warehouse is
    exact. A dialect the client cannot read yet is reported as a failure, not a crash."""
    print(f"\n{years} years, {n or 'household'} rows, per sandbox dialect (plan cost)")
    print(f"{'dialect':<10} {'refresh':<12} {'requests':>8} {'seconds':>8} {'exact':>5}")
    for name in names:
        tmp = Path(tempfile.mkdtemp())
        keys_file = tmp / "keys.json"
        serve = ["--port", str(free_port()), "--no-rate-limit", "--years", str(years)]
        serve += ["--dialect", name] + (["--transactions", str(n)] if n else [])
        proc = spawn_serve(keys_file, *serve)
        try:
            keys = json.loads(keys_file.read_text())
            admin = httpx.Client(
                base_url=keys["base_url"],
                headers={"Authorization": f"Bearer {keys['admin_token']}"},
                timeout=120,
            )
            with ApiClient(keys["base_url"], keys["read_only"]) as client:
                for label in ("first sync", "no change"):
                    started = time.monotonic()
                    try:
                        s = run_refresh(client, str(tmp / "cost.duckdb"), options("cost"))
                    except Exception as e:  # the client may not read this dialect yet
                        seconds = time.monotonic() - started
                        why = f"{type(e).__name__}: {e}".splitlines()[0][:110]
                        print(f"{name:<10} {label:<12} {'FAILED':>8} {seconds:>8.1f}   {why}")
                        break
                    seconds = time.monotonic() - started
                    ok = exact(tmp / "cost.duckdb", admin.get("/_sandbox/state").json())
                    print(
                        f"{name:<10} {label:<12} {s.requests_total:>8} {seconds:>8.1f} "
                        f"{'yes' if ok else 'NO':>5}",
                        flush=True,
                    )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--years", type=int, nargs="+", default=[3, 10])
    ap.add_argument(
        "--transactions", type=int, default=None, help="ledger size (default: household density)"
    )
    ap.add_argument("--plans", nargs="+", default=["cost", "fingerprints"])
    ap.add_argument(
        "--allowance",
        action="store_true",
        help="time a first sync and a no-change refresh under the rate limit (300/min, 10,000/h)",
    )
    ap.add_argument(
        "--dialect",
        nargs="*",
        metavar="NAME",
        help="a first sync and a no-change refresh per sandbox dialect (none named: every one)",
    )
    args = ap.parse_args()
    for years in args.years:
        if args.dialect is not None:
            from centsync.sandbox.dialects import DIALECTS

            dialects(years, args.transactions, args.dialect or list(DIALECTS))
        elif args.allowance:
            allowance(years, args.transactions, 300, 10_000)
        else:
            one(years, args.transactions, args.plans)


if __name__ == "__main__":
    main()
