"""The reconciliation report in a real headless Chromium (Debian's, driven by Playwright)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from centsync.pipelines import failures as errors
from centsync.pipelines.outputs import report_data

from .conftest import HttpEnv, serving

pytestmark = pytest.mark.e2e


@contextmanager
def _env(tmp: Path) -> Iterator[HttpEnv]:
    """A sandbox on loopback and a warehouse, for a module's tests (one refresh for many)."""
    with pytest.MonkeyPatch.context() as mp, serving(tmp, mp) as env:
        yield env


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The report `refresh --report` writes for the test household (verdict agree)."""
    with _env(tmp_path_factory.mktemp("demo")) as env:
        env.refresh("--report")
        yield env.warehouse.with_name("centsync-report.html")


@dataclass
class Corrupted:
    """A report on a warehouse with one row edited locally and one the service sent rejected."""

    path: Path
    small: Path  # the same warehouse, its report with a 1-row budget for embedded months
    row_id: str
    month: str
    concept: str
    rejected_id: str
    recon: dict[str, Any]


CONCEPT = '<img src=x onerror="window.__centsync_img = 1"><script>window.__centsync_injected = true</script>'


@pytest.fixture(scope="module")
def corrupted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corrupted]:
    with _env(tmp_path_factory.mktemp("corrupted")) as env:
        env.refresh()
        recent = max(env.sb.state()["transactions"], key=lambda t: t["booked_at"])
        env.admin("PUT", "/_sandbox/faults", {"corrupt": {recent["id"]: "unknown_type"}})
        code, _ = env.cli("refresh")
        assert code == errors.REJECTED
        (row_id, month) = env.sql(
            "SELECT id::VARCHAR, strftime(month, '%Y-%m') FROM core.transactions "
            "WHERE type = 'expense' AND month < DATE '2026-01-01' ORDER BY id LIMIT 1"
        )[0]
        env.sql(
            "UPDATE core.transactions SET amount = amount - 777, concept = ? WHERE id = ?",
            [CONCEPT, row_id],
        )
        code, recon = env.reconcile()
        assert code == 1 and recon["verdict"] == "differ"
        out = env.tmp / "corrupted.html"
        code, text = env.cli("report", "--out", str(out))
        assert code == 0 and str(out) in text
        small = env.tmp / "small.html"
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(report_data, "MAX_EMBEDDED_ROWS", 1)
            assert env.cli("report", "--out", str(small))[0] == 0
        yield Corrupted(out, small, row_id, month, CONCEPT, recent["id"], recon)


class Opened:
    """A report open in a page, and what the page did: console errors, requests made."""

    def __init__(self, browser: Any, path: Path, **page_options: Any) -> None:
        options = {"viewport": {"width": 1100, "height": 1400}, **page_options}
        self.page = browser.new_page(**options)
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.aborted: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        # nothing may leave the file: any other request is aborted (and recorded)
        self.page.route(re.compile(r"^(?!file:|data:|blob:)"), self._abort)
        self.page.goto(path.as_uri())
        self.page.wait_for_function("document.documentElement.dataset.ready", timeout=30_000)
        assert self.page.evaluate("document.documentElement.dataset.ready") == "yes", self.errors

    def _abort(self, route: Any) -> None:
        self.aborted.append(route.request.url)
        route.abort()

    def offline(self) -> None:
        """No console error, nothing requested outside the file."""
        assert self.errors == [], self.errors
        assert self.aborted == [], self.aborted
        assert all(u.startswith(("file:", "data:", "blob:")) for u in self.requests), self.requests

    def shown(self) -> list[list[str]]:
        """The transactions table's visible rows, cell texts."""
        return self.page.eval_on_selector_all(
            "#tx tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
        )

    def ids_shown(self) -> set[str]:
        return {cells[-1] for cells in self.shown() if len(cells) > 1}

    def close(self) -> None:
        self.page.close()


def _no_remote_resource(html: str) -> None:
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*https?://""", html, re.I)
    assert not re.search(r"url\(\s*['\"]?https?://", html, re.I)
    assert not re.search(r"@import\s+['\"]?https?://", html, re.I)


def test_the_demo_report_opens_offline_with_every_chart_and_drills_into_a_month(
    demo_report: Path, shared_browser: Any, tmp_path: Path
) -> None:
    html = demo_report.read_text()
    _no_remote_resource(html)
    assert len(html) < 3_000_000
    opened = Opened(shared_browser, demo_report)
    page = opened.page
    assert page.get_attribute("#verdict", "data-verdict") == "agree"
    assert "AGREE" in page.inner_text("#verdict")
    marks = page.evaluate(
        "[...document.querySelectorAll('.chart svg')].map(s => s.querySelectorAll('path').length)"
    )
    assert len(marks) == 4 and all(n > 0 for n in marks), marks
    # years on every month axis: a label like "Mar 2025"
    labels = page.eval_on_selector_all(
        "#chart-spending-month text, #chart-cash-flow text", "ts => ts.map(t => t.textContent)"
    )
    assert any(re.fullmatch(r"[A-Z][a-z]{2} 20\d\d", t) for t in labels), labels[:20]
    # the month table's button drills into the month: only its rows remain, all of them
    months = page.eval_on_selector_all("#months button.drill", "bs => bs.map(b => b.textContent)")
    month = months[-3]
    page.click(f"#months button.drill >> text={month}")
    assert month in page.inner_text("#filter-list")
    rows = opened.shown()
    assert rows and all(cells[0].startswith(month) for cells in rows), rows[:3]
    # every row of the month (income and transfers too), as the warehouse counts them
    counted = page.evaluate(
        f"JSON.parse(document.getElementById('drill-data').textContent).month_rows['{month}']"
    )
    assert f"of {counted} entries" in page.inner_text("#tx_info")
    # the README's picture: the verdict above the drilled-down month
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(tmp_path / "report.png"))
    assert (tmp_path / "report.png").stat().st_size > 50_000  # a page, not a blank
    opened.offline()
    opened.close()
    if os.environ.get("CENTSYNC_REPORT_SCREENSHOT"):  # `make report-screenshot`: the README's
        shutil.copyfile(tmp_path / "report.png", os.environ["CENTSYNC_REPORT_SCREENSHOT"])


@pytest.mark.slow  # CI runs it (make test-slow); make test opens the report once
def test_search_finds_a_concept_and_a_category_drills_from_the_keyboard(
    demo_report: Path, shared_browser: Any
) -> None:
    opened = Opened(shared_browser, demo_report)
    page = opened.page
    concepts = [cells[1] for cells in opened.shown()]
    wanted = concepts[3]
    page.fill("#tx_wrapper input[type=search]", wanted)
    page.wait_for_function("document.querySelectorAll('#tx tbody tr').length > 0")
    shown = opened.shown()
    assert shown and all(wanted.lower() in " ".join(c).lower() for c in shown), shown[:3]
    # the keyboard alone: focus a category button in the lists, Enter drills into it
    page.fill("#tx_wrapper input[type=search]", "")
    page.click("details.pick summary")
    button = page.locator("#category-list button.drill").first
    category = button.inner_text()
    button.focus()
    page.keyboard.press("Enter")
    assert f"category {category}" in page.inner_text("#filter-list")
    shown = opened.shown()
    assert shown and all(cells[2] == category for cells in shown), shown[:3]
    opened.offline()
    opened.close()


@pytest.mark.slow  # CI runs it (make test-slow); make test opens the report once
def test_dark_print_and_phone_width_render(demo_report: Path, shared_browser: Any) -> None:
    dark = Opened(shared_browser, demo_report, color_scheme="dark")
    background = dark.page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 21, 27)", background
    assert dark.page.evaluate("document.documentElement.classList.contains('dark')")
    dark.offline()
    dark.close()
    printed = Opened(shared_browser, demo_report)
    printed.page.emulate_media(media="print")
    assert (
        printed.page.evaluate("getComputedStyle(document.querySelector('nav.toc')).display")
        == "none"
    )
    assert (
        printed.page.evaluate("getComputedStyle(document.body).backgroundColor")
        == "rgb(255, 255, 255)"
    )
    assert len(printed.page.pdf()) > 50_000  # it prints: pages, not a blank
    printed.offline()
    printed.close()
    phone = Opened(shared_browser, demo_report, viewport={"width": 390, "height": 844})
    overflow = phone.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page is {overflow}px wider than a phone"
    widths = phone.page.evaluate(
        "[...document.querySelectorAll('.chart svg')].map(s => s.getBoundingClientRect().width)"
    )
    assert all(0 < w <= 390 for w in widths), widths
    phone.offline()
    phone.close()


@pytest.mark.slow  # CI runs it (make test-slow); make test opens the report once
def test_a_corrupted_warehouse_clicks_from_the_verdict_to_the_changed_row(
    corrupted: Corrupted, shared_browser: Any
) -> None:
    html = corrupted.path.read_text()
    assert corrupted.concept not in html and "&lt;script&gt;" in html  # escaped by the template
    _no_remote_resource(html)
    opened = Opened(shared_browser, corrupted.path)
    page = opened.page
    assert page.get_attribute("#verdict", "data-verdict") == "differ"
    page.click("#verdict-link")
    scopes = page.eval_on_selector_all(
        "#differences td.scope", "cells => cells.map(c => c.dataset.scope)"
    )
    assert corrupted.month in scopes
    row = page.locator(
        "#differences tr", has=page.locator(f"td.scope[data-scope='{corrupted.month}']")
    )
    assert "local copy changed" in row.inner_text()
    assert f"centsync refresh --months {corrupted.month}" in row.inner_text()  # what resolves it
    row.locator("button.drill").click()
    assert corrupted.month in page.inner_text("#filter-list")
    page.check("#only-differing")
    shown = opened.shown()
    assert [c[-1] for c in shown] == [corrupted.row_id], shown
    cells = shown[0]
    assert cells[1] == corrupted.concept  # shown as text, not run
    local, service = (Decimal(cells[i].replace(",", "")) for i in (5, 6))
    assert local == service - Decimal("7.77"), cells  # in currency units, side by side
    assert page.evaluate(
        "window.__centsync_injected === undefined && window.__centsync_img === undefined"
    )
    # the rows behind the differences: field by field, money in units
    rows_text = page.inner_text("#rows")
    assert corrupted.row_id in rows_text and "amount" in rows_text and "<script>" in rows_text
    assert '"amount"' not in rows_text  # not raw JSON
    opened.offline()
    opened.close()


@pytest.mark.slow  # CI runs it (make test-slow); make test opens the report once
def test_a_chart_click_drills_and_rejected_rows_are_named(
    corrupted: Corrupted, shared_browser: Any
) -> None:
    opened = Opened(shared_browser, corrupted.path)
    page = opened.page
    # the red point of the differing month in the spending chart
    page.locator("#chart-spending-month g.mark-symbol path[fill='#c53030']").first.click(force=True)
    page.wait_for_function("document.getElementById('filter-list').textContent.includes('month')")
    assert corrupted.month in page.inner_text("#filter-list")
    rejected = page.inner_text("#rejected")
    assert corrupted.rejected_id in rejected and "type" in rejected  # named, with its reason
    # and the differences it explains say so, and what to do
    differences = page.inner_text("#differences")
    assert "rejected by validation" in differences and "Rejected rows" in differences
    opened.offline()
    opened.close()


@pytest.mark.slow  # CI runs it (make test-slow); make test opens the report once
def test_a_month_outside_the_budget_keeps_its_totals_and_says_how_to_get_its_rows(
    corrupted: Corrupted, shared_browser: Any
) -> None:
    html = corrupted.small.read_text()
    start = html.index('id="drill-data">') + len('id="drill-data">')
    drill = json.loads(html[start : html.index("</script>", start)].replace("<\\/", "</"))
    assert drill["embedded"] == [] and drill["rows"] == []  # a 1-row budget: no whole month fits
    opened = Opened(shared_browser, corrupted.small)
    page = opened.page
    page.click(f"#months button.drill >> text={corrupted.month}")
    notice = page.inner_text("#not-embedded")
    assert "not embedded" in notice and f"DATE '{corrupted.month}-01'" in notice
    opened.offline()
    opened.close()
