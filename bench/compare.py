"""Issue 17's comparison: centsync's CLI, dlt's generic `rest_api` source and the plain recipe,
against the same sandbox over loopback, interleaved, with every load checked row by row.

    uv run --frozen python bench/compare.py                 # household no-change + 20,000 rows, 3 reps
    uv run --frozen python bench/compare.py --full --reps 3 # + the 1,000,000-row first refresh
    uv run --frozen python bench/compare.py --sizes 20000 100000 --no-household --tools centsync plain
    uv run --frozen python bench/compare.py --sizes --latency-ms 50   # a distant service's answers

Each scenario gets one sandbox in its own process (`bench/compare_server.py`: uvicorn on
127.0.0.1, rate limits off, a middleware counting `/v1` requests), built once and served to
every tool and repetition; it writes its ledger to Parquet, the truth every load is checked
against. Each run is one child process timed from start to exit:

- centsync: the real CLI, `centsync refresh --json`, with CENTSYNC_API_BASE_URL/KEY pointing
  at the sandbox and a fresh CENTSYNC_WAREHOUSE, DAGSTER_HOME and XDG_DATA_HOME per run, run
  from a user's install of the checkout (`uv sync --no-dev`, as `make setup`; cached under
  bench/results/; `--install dev` runs the test environment's instead);
- dlt: `bench/compare_dlt.py` (rest_api source, parquet loader into DuckDB) in a throwaway
  environment built with uv from `bench/requirements-dlt.txt` (cached under bench/results/,
  which git ignores);
- plain: `bench/compare_plain.py` (httpx async x4, `pl.read_json`, one DuckDB insert).

The no-change case copies a prepared state (the first refresh's warehouse, Dagster instance,
dlt pipeline folder) into a fresh folder for each run, so every run starts from the same state.

Per run: wall time, CPU time (wait4), peak RSS (the larger of the process's own high-water
mark from wait4 and the sum over its process tree sampled every 20 ms), requests the server
counted, and the exactness check (count, distinct ids, and both sides of an EXCEPT ALL over id,
account_id, concept, amount, booked_at, type, category_id, expense_goal_id). A load that differs
from the server is reported WRONG and never ranked. The table gives medians; ratios are to the
best exact median in the scenario. JSON of every run goes to bench/results/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from environments import BENCH, LAYERS, RESULTS, dlt_python, user_install

from centsync.sandbox.server import free_port

VENV_BIN = Path(sys.executable).parent
TOOLS = ("centsync", "dlt", "plain", "before")
FIELDS = (
    "id",
    "account_id",
    "concept",
    "amount",
    "booked_at",
    "type",
    "category_id",
    "expense_goal_id",
)


# ---- the server ----------------------------------------------------------------------------


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    base_url: str
    key: str
    admin: str
    truth: Path
    rows: int

    def requests(self) -> int:
        r = httpx.get(
            f"{self.base_url}/_bench/requests",
            headers={"Authorization": f"Bearer {self.admin}"},
            timeout=30,
        )
        r.raise_for_status()
        return int(r.json()["total"])

    def cpu(self) -> float:
        t = psutil.Process(self.proc.pid).cpu_times()
        return float(t.user + t.system)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def start_server(tmp: Path, transactions: int | None, years: int, latency_ms: int = 0) -> Server:
    keys = tmp / "keys.json"
    truth = tmp / "truth.parquet"
    cmd = [sys.executable, str(BENCH / "compare_server.py"), "--keys-out", str(keys)]
    cmd += ["--truth", str(truth), "--port", str(free_port()), "--years", str(years)]
    if transactions:
        cmd += ["--transactions", str(transactions)]
    log = (tmp / "server.log").open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 900
    while not keys.exists():
        if proc.poll() is not None:
            raise RuntimeError(
                f"the sandbox exited {proc.returncode}: {(tmp / 'server.log').read_text()[-2000:]}"
            )
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise RuntimeError("the sandbox did not serve within 900 s")
        time.sleep(0.1)
    k = json.loads(keys.read_text())
    total = httpx.get(
        f"{k['base_url']}/v1/transactions",
        params={"limit": 1},
        headers={"Authorization": f"Bearer {k['read_only']}"},
        timeout=30,
    ).json()["total"]
    if latency_ms:  # every /v1 answer delayed, as a distant service's are (the sandbox's fault)
        auth = {"Authorization": f"Bearer {k['admin_token']}"}
        faults = {"latency_ms": latency_ms}
        url = f"{k['base_url']}/_sandbox/faults"
        httpx.put(url, json=faults, headers=auth, timeout=30).raise_for_status()
    # (every check compares the truth file's count with what the API said too)
    return Server(proc, k["base_url"], k["read_only"], k["admin_token"], truth, int(total))


# ---- measuring one child process -----------------------------------------------------------


@dataclass
class Measured:
    wall: float
    cpu: float
    peak_mb: float
    tree_peak_mb: float
    own_peak_mb: float
    rc: int
    stdout: str
    stderr: str


def measure(cmd: list[str], env: dict[str, str], cwd: Path) -> Measured:
    out, err = cwd / "stdout.txt", cwd / "stderr.txt"
    with out.open("wb") as fo, err.open("wb") as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=fo, stderr=fe)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            try:
                root = psutil.Process(proc.pid)
            except psutil.NoSuchProcess:
                return
            while not done.is_set():
                total = 0
                try:
                    procs = [root, *root.children(recursive=True)]
                except psutil.NoSuchProcess:
                    return
                for p in procs:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        total += p.memory_info().rss
                peak[0] = max(peak[0], total)
                done.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    own = ru.ru_maxrss / 1024
    tree = peak[0] / 2**20
    return Measured(
        wall=wall,
        cpu=ru.ru_utime + ru.ru_stime,
        peak_mb=max(own, tree),
        tree_peak_mb=tree,
        own_peak_mb=own,
        rc=proc.returncode,
        stdout=out.read_text(errors="replace"),
        stderr=err.read_text(errors="replace"),
    )


# ---- the tools -----------------------------------------------------------------------------


@dataclass
class Tool:
    name: str
    cmd: list[str]
    table: str  # where its transactions land
    db: str  # file name of its warehouse inside the run folder
    extra_env: dict[str, str] = field(default_factory=dict)


def tools(names: list[str], dlt_py: Path | None, install: str = "user") -> dict[str, Tool]:
    out: dict[str, Tool] = {}
    for name in names:
        if name in ("centsync", "before"):
            # "before": another checkout's centsync (CENTSYNC_BEFORE, its root with a .venv),
            # interleaved with this one to measure a change before and after in one run
            root = Path(os.environ.get("CENTSYNC_BEFORE", "")) if name == "before" else None
            if install == "user":
                exe = user_install(root) / "centsync"
            else:
                exe = root / ".venv" / "bin" / "centsync" if root else VENV_BIN / "centsync"
            out[name] = Tool(
                name, [str(exe), "refresh", "--json"], "core.transactions", "centsync.duckdb"
            )
        elif name == "dlt":
            assert dlt_py is not None
            out[name] = Tool(
                name,
                [str(dlt_py), str(BENCH / "compare_dlt.py"), "dlt.duckdb", "dlt-pipelines"],
                "api.transactions",
                "dlt.duckdb",
                {"RUNTIME__DLTHUB_TELEMETRY": "false"},
            )
        elif name == "plain":
            out[name] = Tool(
                name,
                [sys.executable, str(BENCH / "compare_plain.py"), "plain.duckdb"],
                "main.transactions",
                "plain.duckdb",
            )
    return out


def env_for(tool: Tool, server: Server, run_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CENTSYNC_", "DAGSTER_", "BENCH_", "DLT_"))
    }
    env.update(
        CENTSYNC_API_BASE_URL=server.base_url,
        CENTSYNC_API_KEY=server.key,
        CENTSYNC_WAREHOUSE=str(run_dir / "centsync.duckdb"),
        DAGSTER_HOME=str(run_dir / "dagster"),
        XDG_DATA_HOME=str(run_dir / "xdg"),
        BENCH_BASE_URL=server.base_url,
        BENCH_API_KEY=server.key,
        DLT_DATA_DIR=str(run_dir / "dlt-data"),
        **tool.extra_env,
    )
    return env


# ---- exactness -----------------------------------------------------------------------------


def check(db: Path, table: str, truth: Path, api_total: int) -> tuple[bool, str, int]:
    """Compare what a tool loaded with the server's ledger, field by field, in a child process.

    Not in this one: a child inherits the parent's memory high-water mark through fork and
    exec (Linux keeps the larger of the two in `ru_maxrss`), so the driver must stay small for
    the tools' own peaks to be theirs.
    """
    p = subprocess.run(
        [sys.executable, __file__, "--check", str(db), table, str(truth), str(api_total)],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        return False, f"the check failed: {p.stderr.strip()[-300:]}", 0
    exact, why, n = json.loads(p.stdout)
    return bool(exact), str(why), int(n)


def _check(db: Path, table: str, truth: Path, api_total: int) -> tuple[bool, str, int]:
    import duckdb

    if not db.exists():
        return False, "no warehouse file", 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        schema, name = table.split(".")
        types = dict(
            con.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = ? AND table_name = ?",
                [schema, name],
            ).fetchall()
        )
        if not types:
            return False, f"no table {table}", 0
        if types.get("amount") not in ("BIGINT", "INTEGER", "HUGEINT", "DECIMAL(38,0)"):
            return False, f"amount stored as {types.get('amount')}", 0
        cols = []
        for f in FIELDS:
            if f not in types:
                cols.append(f"NULL::VARCHAR AS {f}")  # dlt drops a column that was always null
            elif f == "amount":
                cols.append("amount::BIGINT AS amount")
            elif f == "booked_at":
                cols.append("CAST(booked_at AS DATE) AS booked_at")
            else:
                cols.append(f"{f}::VARCHAR AS {f}")
        loaded = f"SELECT {', '.join(cols)} FROM {table}"
        truth_q = (
            "SELECT id, account_id, concept, amount, booked_at::DATE AS booked_at, type, "
            f"category_id, expense_goal_id FROM read_parquet('{truth}')"
        )
        n, distinct, extra, missing, want = con.execute(
            f"WITH t AS ({loaded}), s AS ({truth_q}) SELECT "
            "(SELECT count(*) FROM t), (SELECT count(DISTINCT id) FROM t), "
            "(SELECT count(*) FROM (FROM t EXCEPT ALL FROM s)), "
            "(SELECT count(*) FROM (FROM s EXCEPT ALL FROM t)), (SELECT count(*) FROM s)"
        ).fetchone()  # type: ignore[misc]
    finally:
        con.close()
    if want != api_total:
        return False, f"the truth file has {want:,} rows, the API said {api_total:,}", n
    if n == want and distinct == n and extra == 0 and missing == 0:
        return True, "exact", n
    return (
        False,
        f"loaded {n:,} of {want:,} rows ({n - distinct:,} duplicate ids, "
        f"{missing:,} server rows missing or different, {extra:,} not on the server)",
        n,
    )


# ---- one scenario --------------------------------------------------------------------------


@dataclass
class Run:
    scenario: str
    tool: str
    rep: int
    wall: float
    cpu: float
    peak_mb: float
    tree_peak_mb: float
    own_peak_mb: float
    requests: int
    server_cpu: float
    rc: int
    exact: bool
    check: str
    rows: int
    load1: float
    inside: dict[str, Any]


def inside_of(tool: str, stdout: str) -> dict[str, Any]:
    """The tool's own account of its run (centsync's --json, the scripts' JSON line)."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {}
    try:
        doc = json.loads(lines[-1])
    except json.JSONDecodeError:
        return {}
    if tool in ("centsync", "before"):
        return {
            "status": doc.get("status"),
            "mode": doc.get("mode"),
            "requests": (doc.get("requests") or {}).get("total"),
            "rows_total": (doc.get("rows") or {}).get("total"),
            **{k: v for k, v in (doc.get("durations") or {}).items()},
        }
    return dict(doc)


def run_one(
    scenario: str, tool: Tool, rep: int, server: Server, base: Path, template: Path | None
) -> Run:
    run_dir = Path(tempfile.mkdtemp(prefix=f"{tool.name}-", dir=base))
    if template is not None:
        shutil.copytree(template, run_dir, dirs_exist_ok=True)
    env = env_for(tool, server, run_dir)
    before, scpu = server.requests(), server.cpu()
    load1 = os.getloadavg()[0]
    m = measure(tool.cmd, env, run_dir)
    spent, scpu = server.requests() - before, server.cpu() - scpu
    exact, why, rows = check(run_dir / tool.db, tool.table, server.truth, server.rows)
    if m.rc != 0:
        exact, why = False, f"exit {m.rc}: {(m.stderr or m.stdout).strip()[-300:]}; {why}"
    run = Run(
        scenario,
        tool.name,
        rep,
        m.wall,
        m.cpu,
        m.peak_mb,
        m.tree_peak_mb,
        m.own_peak_mb,
        spent,
        scpu,
        m.rc,
        exact,
        why,
        rows,
        load1,
        inside_of(tool.name, m.stdout),
    )
    print(
        f"  {scenario:<22} {tool.name:<9} rep {rep}: {m.wall:7.2f} s wall, {m.cpu:6.2f} s CPU, "
        f"{m.peak_mb:6.0f} MB, {spent:6,} requests, {'exact' if exact else 'WRONG: ' + why}"
        f" (load {load1:.2f})",
        flush=True,
    )
    shutil.rmtree(run_dir, ignore_errors=True)
    return run


def prepared(tool: Tool, server: Server, folder: Path, env: dict[str, str] | None = None) -> Path:
    """`folder` holding the state a no-change run starts from (a copy each run): the tool's
    first load of the server, its output files removed. `env` adds to the tool's environment."""
    folder.mkdir()
    m = measure(tool.cmd, {**env_for(tool, server, folder), **(env or {})}, folder)
    if m.rc != 0:
        raise RuntimeError(f"preparing {tool.name} failed: {m.stderr[-1000:]}")
    for f in ("stdout.txt", "stderr.txt"):
        (folder / f).unlink()
    return folder


def scenario(
    name: str,
    transactions: int | None,
    years: int,
    no_change: bool,
    chosen: dict[str, Tool],
    reps: int,
    base: Path,
    latency_ms: int = 0,
) -> list[Run]:
    tmp = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base))
    t = time.perf_counter()
    server = start_server(tmp, transactions, years, latency_ms)
    print(
        f"\n{name}: sandbox of {server.rows:,} rows, {years} years, at {server.base_url} "
        f"(ready in {time.perf_counter() - t:.0f} s), answers delayed {latency_ms} ms; "
        f"load {_load()}",
        flush=True,
    )
    runs: list[Run] = []
    try:
        templates: dict[str, Path | None] = dict.fromkeys(chosen)
        if no_change:
            for tool in chosen.values():
                templates[tool.name] = prepared(tool, server, tmp / f"template-{tool.name}")
        order = list(chosen.values())
        for rep in range(1, reps + 1):
            for tool in order[rep - 1 :] + order[: rep - 1]:  # rotated: no tool always first
                runs.append(run_one(name, tool, rep, server, tmp, templates[tool.name]))
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{name}: done; load {_load()}", flush=True)
    return runs


def tree_state() -> str:
    """Which centsync is measured: the commit, and whether the layers have uncommitted edits."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=BENCH.parent, capture_output=True, text=True)
        return done.stdout

    try:
        head = git("rev-parse", "--short", "HEAD").strip()
        dirty = git("status", "--porcelain", "--", *LAYERS).splitlines()
    except OSError:
        return "unknown tree"
    return f"centsync at {head}" + (f" + uncommitted edits in {len(dirty)} files" if dirty else "")


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


# ---- the table -----------------------------------------------------------------------------


def table(runs: list[Run]) -> str:
    lines: list[str] = []
    for name in dict.fromkeys(r.scenario for r in runs):
        mine = [r for r in runs if r.scenario == name]
        rows = mine[0].rows or max(r.rows for r in mine)
        stats: dict[str, dict[str, Any]] = {}
        for tool in dict.fromkeys(r.tool for r in mine):
            rs = [r for r in mine if r.tool == tool]
            walls = [r.wall for r in rs]
            exact = all(r.exact for r in rs)
            inside = [r.inside.get("refresh_seconds") or r.inside.get("inside_s") for r in rs]
            inside = [x for x in inside if isinstance(x, int | float)]
            stats[tool] = {
                "exact": exact,
                "why": next((r.check for r in rs if not r.exact), "exact"),
                "wall": statistics.median(walls),
                "lo": min(walls),
                "hi": max(walls),
                "cpu": statistics.median(r.cpu for r in rs),
                "peak": statistics.median(r.peak_mb for r in rs),
                "peak_hi": max(r.peak_mb for r in rs),
                "requests": statistics.median(r.requests for r in rs),
                "inside": statistics.median(inside) if inside else None,
                "n": len(rs),
                "load": statistics.median(r.load1 for r in rs),
            }
        best = min((s["wall"] for s in stats.values() if s["exact"]), default=None)
        lines.append(f"\n### {name}: {rows:,} rows on the server")
        lines.append("")
        lines.append(
            "| tool | exact | wall (median, min-max) | rows/s | inside the run | CPU | peak RSS (median, max) | requests | x best | load1 |"
        )
        lines.append("| - | - | -: | -: | -: | -: | -: | -: | -: | -: |")
        for tool, s in stats.items():
            ratio = f"{s['wall'] / best:.2f}x" if s["exact"] and best else "not ranked"
            inside = f"{s['inside']:.2f} s" if s["inside"] is not None else ""
            lines.append(
                f"| {tool} | {'yes' if s['exact'] else 'WRONG: ' + s['why']} | "
                f"{s['wall']:.2f} s ({s['lo']:.2f}-{s['hi']:.2f}, n={s['n']}) | "
                f"{rows / s['wall']:,.0f} | {inside} | {s['cpu']:.1f} s | "
                f"{s['peak']:,.0f} MB ({s['peak_hi']:,.0f}) | {s['requests']:,.0f} | {ratio} | {s['load']:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="repetitions per tool (default 3)")
    ap.add_argument(
        "--sizes", type=int, nargs="*", default=[20_000], help="first-refresh ledger sizes"
    )
    ap.add_argument("--full", action="store_true", help="add the 1,000,000-row first refresh")
    ap.add_argument(
        "--no-household", action="store_true", help="skip the household no-change refresh"
    )
    ap.add_argument("--years", type=int, default=10, help="years of the sized ledgers")
    ap.add_argument("--latency-ms", type=int, default=0, help="delay every sandbox answer (ms)")
    ap.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    ap.add_argument("--dlt-venv", type=Path, default=RESULTS / "venv-dlt")
    ap.add_argument(
        "--install",
        choices=("user", "dev"),
        default="user",
        help="centsync as `make setup` installs it (default), or the `make setup-dev` .venv",
    )
    ap.add_argument("--out", type=Path, default=None, help="JSON of every run")
    ap.add_argument("--check", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.check:
        db, tbl, truth, total = args.check
        print(json.dumps(_check(Path(db), tbl, Path(truth), int(total))))
        return
    sizes = list(args.sizes) + ([1_000_000] if args.full and 1_000_000 not in args.sizes else [])

    RESULTS.mkdir(exist_ok=True)
    dlt_py = dlt_python(args.dlt_venv) if "dlt" in args.tools else None
    chosen = tools(args.tools, dlt_py, args.install)
    base = Path(tempfile.mkdtemp(prefix="centsync-compare-"))
    rss = psutil.Process().memory_info().rss / 2**20
    print(
        f"driver RSS {rss:.0f} MB (a floor of every ru_maxrss below); "
        f"{os.cpu_count()} cores; load {_load()}; {tree_state()}; tools {', '.join(chosen)}; "
        f"centsync as a {args.install} install; {args.reps} reps",
        flush=True,
    )
    runs: list[Run] = []
    try:
        if not args.no_household:
            runs += scenario(
                "household no-change", None, 3, True, chosen, args.reps, base, args.latency_ms
            )
        for n in sizes:
            name = f"first refresh {n:,}"
            runs += scenario(name, n, args.years, False, chosen, args.reps, base, args.latency_ms)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = args.out or RESULTS / f"compare-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps([asdict(r) for r in runs], indent=1))
    print(table(runs))
    print(f"\nRuns: {out}")


if __name__ == "__main__":
    main()
