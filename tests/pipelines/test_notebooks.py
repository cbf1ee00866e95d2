"""The analysts' warehouse: the notebooks on the demo warehouse (headless while a refresh holds
it, and exported to HTML opened in Debian's headless Chromium), its comments and example queries,
and `centsync notebook`."""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from centsync.pipelines.cli.analysts import NOTEBOOKS
from centsync.pipelines.cli.main import main
from centsync.pipelines.outputs.data_dictionary import EXAMPLE_QUERIES, render, undocumented
from centsync.warehouse import Warehouse

# CI runs them (make test-slow): the module's demo runs and exports every notebook (about 30 s
# on 2 cores) and its tests open them in Chromium and marimo (about 75 s in all)
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
# What each notebook must show once it ran through (not stopped early), and its charts.
EXPECTED = {
    "spending": (["Last 12 months:", "is still running", "Top merchants", "Drill down"], 3),
    "net_worth": (["Net worth on", "Assets against liabilities", "Per-refresh snapshots"], 3),
    "reconciliation": (["AGREE", "What differs", "History of verdicts", "over time"], 3),
    "writeback": (["The outbox by state", "Rejected rows and their reasons", "Every request"], 1),
    "recurring": (["active series", "Transfers paired", "Expenses drawn down"], 1),
}


class Demo:
    """The demo warehouse (`centsync demo` on the embedded sandbox) and the notebooks run on it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.warehouse = tmp / "wh" / "centsync.duckdb"
        self.env = {
            **os.environ,
            "CENTSYNC_WAREHOUSE": str(self.warehouse),
            "DAGSTER_HOME": str(tmp / "dagster"),
            "CENTSYNC_INBOX": str(tmp / "inbox"),
        }
        for var in ("CENTSYNC_API_BASE_URL", "CENTSYNC_API_KEY"):
            self.env.pop(var, None)
        self.runs: dict[str, subprocess.CompletedProcess[str]] = {}
        self.exports: dict[str, tuple[subprocess.CompletedProcess[str], float]] = {}

    def notebook(self, name: str) -> Path:
        return ROOT / "notebooks" / f"{name}.py"

    def run(self, name: str) -> None:
        self.runs[name] = subprocess.run(
            [sys.executable, str(self.notebook(name))],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def export(self, name: str) -> None:
        started = time.monotonic()
        cmd = [sys.executable, "-m", "marimo", "-q", "export", "html", "--no-include-code"]
        cmd += [str(self.notebook(name)), "-o", str(self.html(name)), "-f"]
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=180)
        self.exports[name] = (done, time.monotonic() - started)

    def html(self, name: str) -> Path:
        return self.tmp / "html" / f"{name}.html"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """`centsync demo`, then every notebook run and exported while a refresh holds the warehouse."""
    d = Demo(tmp_path_factory.mktemp("notebooks"))
    (d.tmp / "html").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for k in ("CENTSYNC_API_BASE_URL", "CENTSYNC_API_KEY"):
            mp.delenv(k, raising=False)
        for k in ("CENTSYNC_WAREHOUSE", "DAGSTER_HOME", "CENTSYNC_INBOX"):
            mp.setenv(k, d.env[k])
        result = CliRunner().invoke(main, ["demo"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        # A write session holds the refresh lock and its working copy open read-write for as
        # long as the notebooks run: they read the published file, which nobody writes.
        with Warehouse.refreshing(d.warehouse, record=False) as wh:
            assert wh.con.execute("SELECT count(*) FROM core.transactions").fetchall()[0][0] > 0
            jobs = [(d.run, n) for n in NOTEBOOKS] + [(d.export, n) for n in NOTEBOOKS]
            with ThreadPoolExecutor(max_workers=2) as pool:
                for f in [pool.submit(fn, n) for fn, n in jobs]:
                    f.result()
            held = d.warehouse.with_name(d.warehouse.name + ".lock")
            assert held.exists() and wh.path != d.warehouse  # the working copy, not the file read
        yield d


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_notebook_runs_headless_on_the_demo_warehouse_while_a_refresh_holds_it(
    demo: Demo, name: str
) -> None:
    run = demo.runs[name]
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr, run.stderr


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served(demo: Demo) -> Iterator[str]:
    """The exported pages over loopback HTTP, with marimo's frontend from the installed package
    instead of its CDN (not reachable here; module scripts cannot load from file://)."""
    import marimo

    folder = demo.tmp / "html"
    cdn = f"https://cdn.jsdelivr.net/npm/@marimo-team/frontend@{marimo.__version__}/dist/"
    for name in NOTEBOOKS:
        html = demo.html(name).read_text("utf-8")
        assert cdn in html  # else marimo changed how it points at its frontend
        demo.html(name).with_suffix(".local.html").write_text(html.replace(cdn, "/_static/"))
    (folder / "_static").symlink_to(Path(marimo.__file__).parent / "_static")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_exported_notebook_opens_in_headless_chromium_without_console_errors(
    demo: Demo,
    served: str,
    browser: Any,  # the fixture of conftest.py
    name: str,
) -> None:
    done, seconds = demo.exports[name]
    assert done.returncode == 0, done.stderr
    texts, charts = EXPECTED[name]
    page = browser.new_page(viewport={"width": 1200, "height": 2400})
    errors: list[str] = []
    elsewhere: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "request",
        lambda r: None if r.url.startswith((served, "data:", "blob:")) else elsewhere.append(r.url),
    )
    page.goto(f"{served}/{name}.local.html")
    # Vega draws each chart into an element of class "marks" (in marimo's shadow roots, which
    # Playwright's locators pierce)
    page.locator(".marks").nth(charts - 1).wait_for(timeout=60_000)
    for text in texts:
        page.get_by_text(text).first.wait_for(timeout=30_000)
    shown = page.locator("body").inner_text()
    page.screenshot(path=str(demo.tmp / "html" / f"{name}.png"), full_page=True)
    page.close()
    assert errors == [], errors
    assert elsewhere == [], elsewhere
    assert page.is_closed() and "Traceback" not in shown
    assert seconds < 60, f"marimo export html took {seconds:.1f} s"


def test_a_differing_warehouse_shows_in_the_reconciliation_notebook(
    demo: Demo, tmp_path: Path
) -> None:
    copy = tmp_path / "centsync.duckdb"
    shutil.copyfile(demo.warehouse, copy)
    con = duckdb.connect(str(copy))
    (month,) = con.execute(
        "SELECT strftime(month, '%Y-%m') FROM core.transactions WHERE type = 'expense' "
        "ORDER BY month, id LIMIT 1"
    ).fetchall()[0]
    con.execute(
        "UPDATE core.transactions SET amount = amount - 777 WHERE id = (SELECT id FROM "
        "core.transactions WHERE type = 'expense' ORDER BY month, id LIMIT 1)"
    )
    con.close()
    env = {**demo.env, "CENTSYNC_WAREHOUSE": str(copy)}
    reconciled = CliRunner().invoke(main, ["reconcile"], env=env, catch_exceptions=False)
    assert reconciled.exit_code == 1, reconciled.output  # differ
    html = tmp_path / "reconciliation.html"
    cmd = [sys.executable, "-m", "marimo", "-q", "export", "html", "--no-include-code"]
    done = subprocess.run(
        [*cmd, str(demo.notebook("reconciliation")), "-o", str(html)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    page = html.read_text("utf-8")
    assert "DIFFER" in page and month in page and "-7.77" in page


def test_every_table_view_and_column_of_the_demo_warehouse_carries_a_comment(
    demo: Demo,
) -> None:
    con = duckdb.connect(str(demo.warehouse), read_only=True)
    try:
        missing = undocumented(con, ("marts", "recon", "core", "ops", "raw", "history", "server"))
        # a refresh rebuilds the marts (delete, insert) and keeps every comment: the published
        # warehouse documents itself exactly as the dictionary says
        assert render(con) == render()
    finally:
        con.close()
    assert missing == []


def test_the_analysts_example_queries_run_on_the_demo_warehouse(demo: Demo) -> None:
    page = (ROOT / "docs" / "analysts.md").read_text("utf-8")
    con = duckdb.connect(str(demo.warehouse), read_only=True)
    try:
        for title, sql in EXAMPLE_QUERIES:
            assert sql in page, f"docs/analysts.md lacks the example {title!r}"
            for statement in filter(str.strip, sql.split(";")):
                rows = con.execute(statement).fetchall()
                assert rows or "differences" in statement, f"{title}: no rows"
    finally:
        con.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_centsync_notebook_spending_opens_a_working_notebook(
    demo: Demo,
    browser: Any,  # the fixture of conftest.py
) -> None:
    """The issue's "done when": the editor on the project's warehouse, every cell run."""
    log = demo.tmp / "notebook.log"
    cmd = [sys.executable, "-m", "centsync.pipelines.cli", "notebook", "spending", "--headless"]
    with log.open("w") as out:
        child = subprocess.Popen(
            [*cmd, "--port", str(_free_port())],
            env=demo.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline and child.poll() is None:
            found = re.search(r"URL: (http://\S+)", log.read_text())
            url = found.group(1) if found else time.sleep(0.2)
        assert url, log.read_text()
        page = browser.new_page(viewport={"width": 1200, "height": 2400})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(url)
        page.locator(".marks").nth(EXPECTED["spending"][1] - 1).wait_for(timeout=60_000)
        page.get_by_text("Last 12 months:").first.wait_for(timeout=30_000)
        page.close()
        assert errors == [], errors
    finally:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=30)
    assert str(demo.warehouse) in log.read_text()


def test_centsync_notebook_names_the_notebooks_it_knows(demo: Demo) -> None:
    env = {"CENTSYNC_WAREHOUSE": demo.env["CENTSYNC_WAREHOUSE"]}
    result = CliRunner().invoke(main, ["notebook", "nosuch"], env=env)
    assert result.exit_code == 2
    assert all(n in result.output for n in NOTEBOOKS)
    assert re.search(r"no notebook 'nosuch'", result.output)


def test_sigterm_to_centsync_notebook_stops_the_marimo_server(demo: Demo) -> None:
    """Only centsync gets the signal (it is not in the test's own process group): marimo and
    everything it started must go with it, and the port must be free again."""
    import psutil

    log, port = demo.tmp / "notebook-sigterm.log", _free_port()
    cmd = [sys.executable, "-m", "centsync.pipelines.cli", "notebook", "spending", "--headless"]
    with log.open("w") as out:
        child = subprocess.Popen(
            [*cmd, "--port", str(port)], env=demo.env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 60
        while "URL: http" not in log.read_text() and time.monotonic() < deadline:
            assert child.poll() is None, log.read_text()
            time.sleep(0.2)
        family = psutil.Process(child.pid).children(recursive=True)
        assert family, "centsync notebook started no marimo"
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == 0
        _, alive = psutil.wait_procs(family, timeout=30)
        assert alive == [], [p.cmdline() for p in alive]
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # nothing listens on it any more
    finally:
        if child.poll() is None:
            child.kill()
