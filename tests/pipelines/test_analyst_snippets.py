"""Paths from one place: every analyst snippet of the README, docs/analysts.md, the data
dictionary and the `sql`/`export` sections of docs/cli.md, and every query line the demo
prints, run as written with the warehouse under XDG_DATA_HOME while another warehouse sits at
the default place (~/.local/share/centsync): each must open the first. And the notebooks'
helper finds the warehouse exactly where the settings do."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from centsync.pipelines.settings import Settings
from system_packages import need_command

from .test_sql_cli import copy_warehouse, query, shared_demo

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```(bash|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def between(page: str, start: str, end: str) -> str:
    text = (ROOT / page).read_text("utf-8")
    return text[text.index(start) : text.index(end, text.index(start))]


# (where, its text): the analyst sections, in the order a reader meets them; the reference
# pages' snippets run in the slow suite (each snippet is a few centsync processes)
SECTIONS = [
    ("README.md", between("README.md", "**2. SQL", "**3. The report.**")),
    ("docs/analysts.md", between("docs/analysts.md", "## Opening it", "## Queries")),
]
REFERENCE = [
    (
        "docs/data-dictionary.md",
        between("docs/data-dictionary.md", "## Reading it", "## Conventions"),
    ),
    ("docs/cli.md sql", between("docs/cli.md", "## `centsync sql`", "## `centsync export`")),
    ("docs/cli.md export", between("docs/cli.md", "## `centsync export`", "## `centsync ui`")),
]


def snippets(sections: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    return [(where, kind, code) for where, text in sections for kind, code in BLOCK.findall(text)]


SNIPPETS = snippets(SECTIONS)


class Place:
    """A warehouse under XDG_DATA_HOME, an emptied decoy at the default place, and a shell
    environment that names neither (no CENTSYNC_WAREHOUSE)."""

    def __init__(self, demo: Path, tmp: Path) -> None:
        self.home, self.xdg, self.work = tmp / "home", tmp / "xdg", tmp / "work"
        self.demo_output = (demo.parent / "demo-output.txt").read_text("utf-8")
        self.work.mkdir()
        self.warehouse = copy_warehouse(demo, self.xdg / "centsync")
        decoy = copy_warehouse(demo, self.home / ".local" / "share" / "centsync")
        con = duckdb.connect(str(decoy))
        try:
            tables = con.execute(
                "SELECT schema_name || '.' || table_name FROM duckdb_tables() "
                "WHERE schema_name IN ('marts', 'core', 'recon', 'history')"
            ).fetchall()
            for (table,) in tables:
                con.execute(f"DELETE FROM {table}")
        finally:
            con.close()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("CENTSYNC_", "XDG_"))}
        self.env.pop("DAGSTER_HOME", None)
        self.env |= {
            "HOME": str(self.home),
            "XDG_DATA_HOME": str(self.xdg),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }

    def run(self, kind: str, code: str) -> subprocess.CompletedProcess[str]:
        cmd = (
            ["bash", "-euo", "pipefail", "-c", code]
            if kind == "bash"
            else [sys.executable, "-c", code]
        )
        return subprocess.run(
            cmd, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=300
        )


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Place:
    need_command("jq")  # the snippets use it
    return Place(shared_demo(tmp_path_factory, worker_id), tmp_path_factory.mktemp("snippets"))


@pytest.fixture(scope="module")
def outputs(place: Place) -> dict[int, str]:
    """Every snippet run in order in one folder (later ones read what earlier ones wrote)."""
    printed = {}
    for i, (where, kind, code) in enumerate(SNIPPETS):
        done = place.run(kind, code)
        assert done.returncode == 0, f"{where} ({kind}):\n{code}\n{done.stdout}\n{done.stderr}"
        printed[i] = done.stdout
    return printed


def test_the_analyst_sections_have_snippets() -> None:
    everything = snippets(SECTIONS + REFERENCE)
    assert {w for w, _kind, _code in everything} == {w for w, _text in SECTIONS + REFERENCE}
    assert {"bash", "python"} <= {kind for _w, kind, _code in SNIPPETS}
    assert not any("local/share" in code for _w, _k, code in everything)


@pytest.mark.slow  # CI runs it (make test-slow); every snippet in order: about 20 s on 2 cores
def test_every_snippet_runs_on_the_warehouse_under_xdg_data_home(
    place: Place, outputs: dict[int, str]
) -> None:
    everything = "\n".join(outputs.values())
    work = place.work
    # the README's query printed the spending of the XDG warehouse (the decoy has none)
    assert "Rent" in everything and "Groceries" in everything
    months = query(place.warehouse, "SELECT count(*) AS n FROM marts.cash_flow_by_month")["n"][0]
    with open(work / "cash-flow.csv") as f:
        assert len(list(csv.DictReader(f))) == months > 0
    manifest = json.loads((work / "finance" / "manifest.json").read_text())
    assert manifest["warehouse"] == str(place.warehouse)
    rows = {t["table"]: t["rows"] for t in manifest["tables"]}
    assert rows["core.accounts"] == 6 and rows["marts.spending_by_month"] > 0
    spending = json.loads((work / "spending.json").read_text())
    assert (
        len(spending)
        == query(place.warehouse, "SELECT count(*) AS n FROM marts.spending_by_month")["n"][0]
    )
    assert f"{len(spending)} months" in everything  # the Python snippet, through `centsync status`
    assert (work / "centsync.beancount").stat().st_size > 100_000
    transactions = query(place.warehouse, "SELECT count(*) AS n FROM core.transactions")["n"][0]
    assert f"transactions\n{transactions}\n" in everything  # the stdin query's csv


@pytest.mark.slow
def test_the_reference_pages_snippets_run_on_it_too(place: Place, outputs: dict[int, str]) -> None:
    for where, kind, code in snippets(REFERENCE):
        done = place.run(kind, code)
        assert done.returncode == 0, f"{where} ({kind}):\n{code}\n{done.stdout}\n{done.stderr}"
        assert str(place.home) not in done.stdout  # the decoy's path is never printed
    assert (place.warehouse.parent / "centsync.beancount").exists()  # cli.md's, beside it


def test_the_demos_query_lines_run_as_printed(place: Place) -> None:
    """The demo prints each example as a `centsync sql "..."` line with its rows: run on the
    warehouse under XDG_DATA_HOME, each line prints those rows."""
    output = place.demo_output
    assert "duckdb -readonly" not in output
    blocks = re.findall(r"^(centsync sql \".*\")\n  (.*)\n((?:  .*\n)+)", output, re.MULTILINE)
    assert len(blocks) == 3, output
    for line, header, rows in blocks:
        # the demo shows money as `centsync sql` does for a person (markdown: the table's
        # cells without its box): `-14,400.00 EUR`, under `amount` for `amount_cents`
        done = place.run("bash", f"{line} --format markdown")
        assert done.returncode == 0, done.stderr
        table = [r for r in done.stdout.splitlines() if r.startswith("|") and "---" not in r]
        got = [" | ".join(c.strip() for c in r.strip("|").split("|")) for r in table]
        assert got == [header] + [r.strip() for r in rows.splitlines()]
        assert " EUR" in rows  # every example shows money


@pytest.mark.parametrize(
    "variables",
    [
        {"XDG_DATA_HOME": "xdg"},
        {"CENTSYNC_WAREHOUSE": "elsewhere/w.duckdb"},
        {"XDG_DATA_HOME": "xdg", "CENTSYNC_WAREHOUSE": "elsewhere/w.duckdb"},
        {},
    ],
)
def test_the_notebooks_find_the_warehouse_where_the_settings_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "notebooks"))
    import notebook_warehouse

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("XDG_DATA_HOME", "CENTSYNC_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, str(tmp_path / value))
    assert notebook_warehouse.warehouse_path() == Settings.from_env().warehouse
