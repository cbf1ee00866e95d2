"""The reconciliation report in a real headless Chromium (Debian's, driven by Playwright)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Env

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium, installed with apt when missing (never a downloaded browser build)."""
    import fcntl

    # one install at a time: each pytest-xdist worker asks
    with open("/tmp/centsync-chromium-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = shutil.which("chromium")
        if found is None:
            env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
            for cmd in (
                ["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "chromium"],
            ):
                subprocess.run(cmd, check=True, capture_output=True, env=env, timeout=900)
            found = shutil.which("chromium")
    assert found, "chromium could not be installed with apt"
    return found


@pytest.fixture
def browser(chromium: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        try:
            yield b
        finally:
            b.close()


def _open(browser: Any, page_path: Path, shot: Path) -> dict[str, Any]:
    """Open a report offline; what the console said, what was requested, what it shows."""
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    errors: list[str] = []
    requests: list[str] = []
    failed: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.on("requestfailed", lambda r: failed.append(r.url))
    page.goto(page_path.as_uri())
    page.wait_for_function("document.querySelectorAll('.chart svg').length === 4", timeout=30_000)
    page.screenshot(path=str(shot), full_page=True)
    seen = {
        "verdict": page.get_attribute("#verdict", "data-verdict"),
        "verdict_text": page.inner_text("#verdict"),
        "marks": page.evaluate(
            "[...document.querySelectorAll('.chart svg')].map(s => s.querySelectorAll('path').length)"
        ),
        "difference_scopes": page.eval_on_selector_all(
            "#differences tr td.scope", "cells => cells.map(c => c.textContent)"
        ),
        "rows_text": page.inner_text("#rows") if page.query_selector("#rows") else "",
        "injected": page.evaluate("window.__centsync_injected === undefined ? null : true"),
    }
    page.close()
    return {"errors": errors, "requests": requests, "failed": failed, **seen}


def _offline(result: dict[str, Any]) -> None:
    assert result["errors"] == [], result["errors"]
    assert result["failed"] == []
    assert all(u.startswith(("file:", "data:", "blob:")) for u in result["requests"]), result[
        "requests"
    ]


def _no_remote_resource(html: str) -> None:
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*https?://""", html, re.I)
    assert not re.search(r"url\(\s*['\"]?https?://", html, re.I)
    assert not re.search(r"@import\s+['\"]?https?://", html, re.I)


def test_the_demo_report_opens_offline_with_every_chart(
    env: Env, browser: Any, tmp_path: Path
) -> None:
    env.refresh("--report")
    report = env.warehouse.with_name("centsync-report.html")
    assert report.is_file()
    html = report.read_text()
    _no_remote_resource(html)
    assert len(html) < 3_000_000
    shot = tmp_path / "report.png"
    result = _open(browser, report, shot)
    _offline(result)
    code, recon = env.reconcile()
    assert code == 0 and result["verdict"] == recon["verdict"] == "agree"
    assert "AGREE" in result["verdict_text"]
    assert all(n > 0 for n in result["marks"]), result["marks"]  # every chart drew marks
    assert shot.stat().st_size > 50_000  # a page, not a blank
    if os.environ.get("CENTSYNC_REPORT_SCREENSHOT"):  # `make report-screenshot`: the README's
        shutil.copyfile(shot, os.environ["CENTSYNC_REPORT_SCREENSHOT"])


def test_a_corrupted_warehouse_shows_differ_its_month_and_rows_as_text(
    env: Env, browser: Any, tmp_path: Path
) -> None:
    env.refresh()
    (row_id, month) = env.sql(
        "SELECT id::VARCHAR, strftime(month, '%Y-%m') FROM core.transactions "
        "WHERE type = 'expense' AND month < DATE '2026-01-01' ORDER BY id LIMIT 1"
    )[0]
    concept = "<script>window.__centsync_injected = true</script>"
    env.sql(
        "UPDATE core.transactions SET amount = amount - 777, concept = ? WHERE id = ?",
        [concept, row_id],
    )
    code, recon = env.reconcile()
    assert code == 1 and recon["verdict"] == "differ"
    out = tmp_path / "corrupted.html"
    code, text = env.cli("report", "--out", str(out))
    assert code == 0 and str(out) in text
    html = out.read_text()
    assert concept not in html and "&lt;script&gt;" in html  # escaped by the template
    _no_remote_resource(html)
    result = _open(browser, out, tmp_path / "corrupted.png")
    _offline(result)
    assert result["verdict"] == "differ" and "DIFFER" in result["verdict_text"]
    assert month in result["difference_scopes"]
    differing = {d["scope"] for d in recon["differences"] if d["check"] == "spending.month"}
    assert month in differing
    assert row_id in result["rows_text"] and "<script>" in result["rows_text"]  # shown as text
    assert result["injected"] is None  # and not run
    json.dumps(result["requests"])  # (for the failure message above)
