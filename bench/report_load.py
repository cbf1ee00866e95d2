"""Report benchmark: file size, time to write and time to interactive in Chromium (issue 28).

Two warehouses: the demo household (`centsync demo`, ~1,800 rows) and a 1,000,000-row, 10-year
ledger synced from the sandbox over loopback (as bench/transform.py builds it). Building the big
one takes minutes, so it is built once and kept under --cache (default /tmp/centsync-bench-1m;
--rebuild builds it again). For each, the report is written clean and again after one local row
is edited (so the differing month is embedded), then opened in Debian's headless Chromium
(Playwright, --runs times, fresh page each): time to interactive is `performance.now()` when the
page says it is ready (every chart drawn, the transactions table built).

    uv run python bench/report_load.py [--runs 3] [--skip-1m]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run the centsync console script with this warehouse's environment."""
    exe = str(Path(sys.executable).with_name("centsync"))
    return subprocess.run([exe, *args], env={**os.environ, **env}, capture_output=True, text=True)


def demo_warehouse(root: Path) -> dict[str, str]:
    """The demo household's warehouse (`centsync demo`) in root."""
    env = {
        "CENTSYNC_WAREHOUSE": str(root / "wh" / "centsync.duckdb"),
        "DAGSTER_HOME": str(root / "dagster"),
    }
    (root / "dagster").mkdir(parents=True, exist_ok=True)
    done = _cli(env, "demo")
    assert done.returncode == 0, done.stderr[-2000:]
    return env


def big_warehouse(cache: Path, n: int, years: int, rebuild: bool) -> dict[str, str]:
    """A refreshed and reconciled n-row warehouse, built from the sandbox once and cached."""
    from centsync.extract import ApiClient
    from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
    from centsync.sandbox.server import free_port, spawn_serve

    wh = cache / "wh" / "centsync.duckdb"
    env = {"CENTSYNC_WAREHOUSE": str(wh), "DAGSTER_HOME": str(cache / "dagster")}
    if wh.is_file() and not rebuild:
        print(f"reusing the cached {n:,}-row warehouse: {wh}", flush=True)
        return env
    shutil.rmtree(cache, ignore_errors=True)
    (cache / "dagster").mkdir(parents=True)
    wh.parent.mkdir(parents=True)
    keys_file = cache / "keys.json"
    proc = spawn_serve(
        keys_file, "--port", str(free_port()), "--no-rate-limit",
        "--transactions", str(n), "--years", str(years),
    )  # fmt: skip
    try:
        keys = json.loads(keys_file.read_text())
        with ApiClient(keys["base_url"], keys["read_only"], max_window_rows=10**12) as client:
            t = time.perf_counter()
            s = run_refresh(client, str(wh), RefreshOptions())
            print(f"built: {s.transactions:,} rows in {time.perf_counter() - t:.1f} s", flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    return env


def corrupted_copy(env: dict[str, str], root: Path) -> dict[str, str]:
    """A copy of the warehouse with one expense edited locally, reconciled offline (differ)."""
    import duckdb

    wh = root / "corrupted" / "centsync.duckdb"
    wh.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(env["CENTSYNC_WAREHOUSE"], wh)
    con = duckdb.connect(str(wh))
    con.execute(
        "UPDATE core.transactions SET amount = amount - 777 WHERE id = (SELECT id FROM "
        "core.transactions WHERE type = 'expense' ORDER BY month, id LIMIT 1 OFFSET 10)"
    )
    con.close()
    out = {**env, "CENTSYNC_WAREHOUSE": str(wh)}
    done = _cli(out, "reconcile", "--json")
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])  # differ
    return out


def write_report(env: dict[str, str], out: Path) -> float:
    """Write the report; seconds it took (the CLI's process start included)."""
    t = time.perf_counter()
    done = _cli(env, "report", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    return time.perf_counter() - t


def time_to_interactive(page_path: Path, runs: int) -> list[dict[str, int]]:
    """Per run (a fresh page each): milliseconds from navigation start to the page's ready mark
    (`ready`), to its transactions table and to its last chart, and the CPU time from navigation
    to ready of the renderer's main thread (`main`) and of every Chromium process (`cpu`): on a
    machine shared with other work the wall time waits for the CPU, the CPU time does not, and
    the main thread's is about what the wall time is on an idle machine."""
    from playwright.sync_api import sync_playwright

    got = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        for _ in range(runs):
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.route("**/*", _only_the_file)
            before = _browser_cpu()
            page.goto(page_path.as_uri())
            page.wait_for_function("document.documentElement.dataset.ready", timeout=120_000)
            assert page.evaluate("document.documentElement.dataset.ready") == "yes"
            after = _browser_cpu()
            marks = page.evaluate(
                "Object.fromEntries(performance.getEntriesByType('mark')"
                ".map(m => [m.name, Math.round(m.startTime)]))"
            )
            got.append(
                {
                    "ready": int(page.evaluate("document.documentElement.dataset.readyMs")),
                    "table": marks["centsync-tables"],
                    "charts": marks["centsync-charts"],
                    "cpu": round((after[0] - before[0]) * 1000),
                    "main": round((after[1] - before[1]) * 1000),
                }
            )
            page.close()
        browser.close()
    return got


def _browser_cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of every Chromium process this one started, and of the
    renderers' main threads alone (where the page's parsing, scripts, style and layout run)."""
    import psutil

    total = main = 0.0
    for proc in psutil.Process().children(recursive=True):
        try:
            if "chrom" not in proc.name():
                continue
            t = proc.cpu_times()
            total += t.user + t.system
            if "--type=renderer" in proc.cmdline():
                main += sum(
                    th.user_time + th.system_time for th in proc.threads() if th.id == proc.pid
                )
        except psutil.NoSuchProcess:
            continue
    return total, main


def _only_the_file(route: Any) -> None:
    """Let the file (and its blob: module) load; abort anything else (there must be none)."""
    if route.request.url.startswith(("file:", "blob:", "data:")):
        route.continue_()
    else:
        raise AssertionError(f"the report requested {route.request.url}")


def measure(label: str, env: dict[str, str], out: Path, runs: int) -> None:
    """Print one report's figures."""
    secs = write_report(env, out)
    html = out.read_text()
    start = html.index('id="drill-data">') + len('id="drill-data">')
    drill = json.loads(html[start : html.index("</script>", start)].replace("<\\/", "</"))
    runs_ms = time_to_interactive(out, runs)

    def med(key: str) -> str:
        return f"{statistics.median(r[key] for r in runs_ms):,.0f}"

    print(
        f"{label:<30}: {out.stat().st_size / 2**20:5.2f} MB, written in {secs:5.1f} s, "
        f"embeds {len(drill['rows']):,} of {drill['total_rows']:,} rows "
        f"({len(drill['embedded'])} of {len(drill['month_rows'])} months); median of {runs}: "
        f"ready {med('ready')} ms (table {med('table')}, charts {med('charts')}), "
        f"CPU: renderer main thread {med('main')} ms, all Chromium {med('cpu')} ms; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--transactions", type=int, default=1_000_000)
    ap.add_argument("--years", type=int, default=10)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/centsync-bench-1m"))
    ap.add_argument("--rebuild", action="store_true", help="build the big warehouse again")
    ap.add_argument("--skip-1m", action="store_true", help="only the demo's report")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="centsync-report-bench-"))
    try:
        demo = demo_warehouse(root / "demo")
        measure("demo, agree", demo, root / "demo.html", args.runs)
        measure(
            "demo, one row edited",
            corrupted_copy(demo, root / "demo"),
            root / "demo-c.html",
            args.runs,
        )
        if not args.skip_1m:
            big = big_warehouse(args.cache, args.transactions, args.years, args.rebuild)
            name = f"{args.transactions:,} rows"
            measure(f"{name}, agree", big, root / "big.html", args.runs)
            measure(
                f"{name}, one row edited",
                corrupted_copy(big, root / "big"),
                root / "big-c.html",
                args.runs,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
