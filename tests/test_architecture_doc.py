"""docs/architecture.md stays true: its modules table names every module of the tree, and
nothing that is not there; its list of defs/ files is whole.

The page is the newcomer's map (issue 24 found three stale claims in it): a module added,
moved or removed without the page fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| `(?P<folder>[a-z_/]+/)` \| (?P<modules>.+) \|$")
NOT_LISTED = {"__init__.py", "__main__.py"}


def _table() -> dict[str, set[str]]:
    """Folder -> the module names its row of "The modules" table gives."""
    section = PAGE.read_text("utf-8").split("## The modules", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            names = re.findall(r"`([A-Za-z0-9_]+\.py)`", match["modules"])
            rows[match["folder"]] = set(names)
    return rows


def _tree(folder: str) -> set[str]:
    return {p.name for p in (ROOT / folder).glob("*.py")} - NOT_LISTED


def test_the_modules_table_names_every_module_and_only_those() -> None:
    table = _table()
    assert {"sandbox/", "extract/", "warehouse/", "transform/", "pipelines/"} <= set(table)
    for folder, named in table.items():
        assert named == _tree(folder), (
            f"{folder}: missing from the page {sorted(_tree(folder) - named)}, "
            f"not in the tree {sorted(named - _tree(folder))}"
        )


def test_every_package_folder_of_a_layer_has_its_row() -> None:
    table = _table()
    for layer in ("sandbox", "extract", "warehouse", "transform", "pipelines"):
        for init in (ROOT / layer).rglob("__init__.py"):
            folder = init.parent.relative_to(ROOT).as_posix() + "/"
            assert folder in table, f"{folder} has no row in docs/architecture.md's modules table"


def test_the_defs_paragraph_lists_every_defs_module() -> None:
    text = PAGE.read_text("utf-8")
    paragraph = text.split("`pipelines/definitions.py` is small", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`([a-z0-9_]+\.py)`", paragraph))
    assert named == _tree("pipelines/defs")
