"""The report next to the warehouse is never stale (issue 44): a refresh rewrites it when one is
there, the page says which refresh it shows and when, and `status` warns about an older copy."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from centsync.pipelines.outputs import report_path

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def _as_of(html: str) -> str:
    """The page's "As of the refresh of …" line, as a person reads it."""
    found = re.search(r'<p id="as-of" data-refresh-id="([^"]+)">([^<]+)</p>', html)
    assert found, "the page says which refresh it shows"
    assert found.group(1) in found.group(2)
    return found.group(2)


def test_a_refresh_rewrites_the_report_and_status_warns_about_an_older_copy(
    http_env: HttpEnv,
) -> None:
    first = http_env.refresh("--report")
    page = report_path(http_env.warehouse)
    assert first["report_path"] == str(page)
    first_as_of = _as_of(page.read_text())
    assert first["refresh_id"] in first_as_of
    assert re.match(r"As of the refresh of \d{1,2} \w{3} \d{4}, \d\d:\d\d UTC", first_as_of)
    old_copy = http_env.tmp / "old-report.html"
    shutil.copy2(page, old_copy)

    # no --report (the hourly schedule's --hot): the report is there, so the refresh rewrites it
    second = http_env.refresh("--hot")
    assert second["refresh_id"] != first["refresh_id"]
    assert second["report_path"] == str(page)
    assert second["refresh_id"] in _as_of(page.read_text())
    code, out = http_env.cli("status")
    assert code == 0 and "centsync report" not in out, out

    # an older copy put back (its mtime too): status says so, and the one command that fixes it
    shutil.copy2(old_copy, page)
    back = page.stat().st_mtime - 3600
    os.utime(page, (back, back))
    code, out = http_env.cli("status")
    assert code == 0, out
    assert "older than the last refresh" in out and "`centsync report`" in out
    assert second["refresh_id"] in out
    code, out = http_env.cli("status", "--json")
    assert any("centsync report" in w for w in json.loads(out)["warnings"])

    code, out = http_env.cli("report")
    assert code == 0, out
    assert second["refresh_id"] in _as_of(page.read_text())
    code, out = http_env.cli("status")
    assert code == 0 and "older than the last refresh" not in out, out


def test_without_a_report_a_refresh_writes_none(http_env: HttpEnv) -> None:
    result = http_env.refresh()
    assert result["report_path"] is None
    assert not report_path(http_env.warehouse).exists()


def test_a_rewrite_that_cannot_be_written_is_a_warning_and_status_says_so(
    http_env: HttpEnv,
) -> None:
    first = http_env.refresh("--report")
    page = report_path(http_env.warehouse)
    # the rewrite's temporary file cannot be created: a directory is in its place
    page.with_name(page.name + ".tmp").mkdir()
    second = http_env.refresh()  # exit 0: the data is published, the page is not
    assert second["report_path"] is None
    assert any("could not be rewritten" in w for w in second["warnings"]), second["warnings"]
    assert first["refresh_id"] in _as_of(page.read_text())
    # the failed write left the page as it was: older than the refresh that just finished
    code, out = http_env.cli("status")
    assert code == 0 and "older than the last refresh" in out, out


def test_the_kept_charts_are_the_fresh_ones_and_every_spec_meets_the_schema(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quiet day's page takes its compiled charts from the ones kept beside the warehouse: they
    are exactly what compiling again gives, and each Vega-Lite spec passes Altair's schema check
    (which a refresh skips)."""
    from centsync.pipelines.outputs import report, report_charts

    http_env.refresh("--report")
    http_env.refresh()  # a second day: the kept charts, with this refresh's rows in them
    folder = http_env.warehouse.absolute().parent
    (kept_file,) = folder.glob(".centsync-report-charts-*.json")
    assert len(json.loads(kept_file.read_text())) == 4, "each of the four charts is kept"
    data = report.gather(http_env.warehouse, None)
    kept = report_charts.charts(data, folder)
    monkeypatch.setattr(report_charts, "VALIDATE", True)
    fresh = report_charts.charts(data)  # no folder: every chart compiled again, and checked
    assert json.dumps(kept) == json.dumps(fresh)
    assert set(fresh) == {
        "chart-spending-month",
        "chart-categories",
        "chart-net-worth",
        "chart-cash-flow",
    }


QUIET_DAY = """
import json, sys
from click.testing import CliRunner
from centsync.pipelines.cli.main import main
result = CliRunner().invoke(main, ["refresh", "--json"], catch_exceptions=False)
heavy = ("altair", "vl_convert", "jsonschema", "itables", "jinja2")
print(json.dumps({"code": result.exit_code, "out": result.stdout,
                  "imported": [m for m in heavy if m in sys.modules]}))
"""


def test_a_quiet_day_s_refresh_rewrites_the_report_without_altair_or_vl_convert(
    http_env: HttpEnv,
) -> None:
    """With the compiled charts and the runtime kept beside the warehouse, a refresh's process
    rewrites the page without importing Altair (and its JSON-schema checker), vl-convert or itables."""
    import subprocess
    import sys

    http_env.refresh("--report")  # the first page: charts compiled and kept
    env = {**os.environ, **http_env.env}
    done = subprocess.run(
        [sys.executable, "-c", QUIET_DAY], env=env, capture_output=True, text=True, check=True
    )
    child = json.loads(done.stdout.strip().splitlines()[-1])
    assert child["code"] == 0, child["out"]
    result = json.loads(child["out"].strip().splitlines()[-1])
    assert result["report_path"] == str(report_path(http_env.warehouse))
    assert child["imported"] == ["jinja2"], child["imported"]  # (the page's template)


def test_a_refresh_without_a_report_imports_nothing_of_the_page_s(http_env: HttpEnv) -> None:
    """Without a report beside the warehouse, a refresh's process imports none of what the page
    is made with (Altair, vl-convert, itables, Jinja)."""
    import subprocess
    import sys

    http_env.refresh()
    env = {**os.environ, **http_env.env}
    done = subprocess.run(
        [sys.executable, "-c", QUIET_DAY], env=env, capture_output=True, text=True, check=True
    )
    child = json.loads(done.stdout.strip().splitlines()[-1])
    assert child["code"] == 0, child["out"]
    assert json.loads(child["out"].strip().splitlines()[-1])["report_path"] is None
    assert child["imported"] == [], child["imported"]


def test_the_datatables_bundle_is_the_one_itables_names() -> None:
    """The page's DataTables come from the file itables' own `options.dt_bundle` names, found
    without importing itables (pipelines/outputs/report.py: `_tables_runtime`)."""
    from pathlib import Path

    from itables import options

    from centsync.pipelines.outputs import report

    report._tables_runtime.cache_clear()
    js, css = report._tables_runtime()
    bundle = Path(str(options.dt_bundle))
    assert js == bundle.read_text(encoding="utf-8")
    assert css == bundle.with_suffix(".css").read_text(encoding="utf-8")
