"""The one dependency rule (docs/architecture.md), checked on the source of every layer.

sandbox, extract, warehouse and transform never import each other; only pipelines wires them.
transform is pure: frames in, frames out, no I/O. And nothing imports a layer by its folder
name (`import extract`): the installed name is `centsync.<layer>`.

One exception, the shared kernel: three small pure modules of transform (calendar months, the
contract's constants, money as text) that extract and warehouse may import too, so that each
of those facts lives once. They import nothing but the standard library. The sandbox keeps its
own copies: it is the contract's independent oracle and shares no code with the client.

Inside pipelines, a rule too (`INSIDE_PIPELINES`, drawn in docs/architecture.md): what each
part (a sub-package, or a top-level module) may import of the others, checked over every
import, at module level or inside a function, with no cycle between parts.
"""

from __future__ import annotations

import ast
import graphlib
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("sandbox", "extract", "warehouse", "transform", "pipelines")
# What each layer may import of centsync (besides itself).
ALLOWED: dict[str, set[str]] = {
    "sandbox": set(),
    "extract": set(),
    "warehouse": set(),
    "transform": set(),
    "pipelines": {"sandbox", "extract", "warehouse", "transform"},
}
# The shared kernel: the only modules of another layer that extract and warehouse may import.
KERNEL = {"centsync.transform.calendar", "centsync.transform.contract", "centsync.transform.money"}
KERNEL_MAY_IMPORT = {
    "__future__", "datetime", "enum", "functools", "math", "re", "collections", "typing", "zoneinfo",
}  # fmt: skip
# transform has no I/O: no network, files, processes, databases or orchestration.
IO_MODULES = {
    "duckdb", "httpx", "aiohttp", "requests", "urllib", "socket", "os", "pathlib", "io",
    "shutil", "subprocess", "sqlite3", "dagster", "tempfile", "glob", "uvicorn", "starlette",
}  # fmt: skip


# Inside pipelines: what each part may import of the others (docs/architecture.md, "The rule
# inside pipelines/"). From the bottom up: the foundations, the use cases, the boundary of a
# run, Dagster, the shell. Nothing imports the CLI; Dagster's code never imports the CLI.
BASE = {
    "settings",
    "owners",
    "failures",
    "clients",
    "results",
    "contract_book",
}  # what every use case may use
INSIDE_PIPELINES: dict[str, set[str]] = {
    # foundations
    "owners": set(),
    "failures": set(),
    "instance": set(),
    "setting_checks": {"contract_book"},
    "settings": {"owners", "setting_checks"},
    "kept": {"settings"},  # what centsync keeps: guarded from outputs, private to its owner
    "clients": {"settings"},
    "alerts": {"failures"},
    # what a run returns across the Dagster boundary: typed results, written once
    "results": set(),
    # the learned contract of the service's "not shown" answers (read and written by use cases)
    "contract_book": set(),
    # use cases (plain Python, no Dagster)
    # the marts built (the service's and the analysts'): for reconcile and history
    "mart_build": set(),
    "reconcile": BASE | {"mart_build"},
    "writeback": BASE,
    "outputs": BASE,
    "refresh": BASE | {"reconcile", "writeback"},
    "embedded": BASE | {"refresh"},
    "history": BASE | {"mart_build"},
    # the one reader of a finished run
    "recorded": BASE | {"alerts"},
    # Dagster: the definitions, the code location, the fleet's code location
    "defs": BASE | {"alerts", "instance", "outputs", "reconcile", "recorded", "refresh", "results", "writeback"},
    "definitions": BASE | {"defs", "kept"},
    "fleet": BASE | {"alerts", "defs", "instance", "outputs", "reconcile", "recorded", "refresh", "results", "writeback"},
    # the shell: anything but itself is below it
    "cli": {
        "alerts", "clients", "contract_book", "definitions", "defs", "embedded", "failures", "fleet", "history",
        "instance", "kept", "outputs", "owners", "recorded", "reconcile", "refresh", "results", "settings",
        "writeback",
    },
}  # fmt: skip


def imports(source: Path) -> list[tuple[int, str]]:
    """(level, module) of every import in a file: level 0 for absolute imports."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            found += [(0, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


# bench/results holds the benches' own environments (bench/environments.py): thousands of
# installed files, none of them ours
NOT_OURS = ROOT / "bench" / "results"


def python_files(*folders: str) -> list[Path]:
    return sorted(
        p for f in folders for p in (ROOT / f).rglob("*.py") if not p.is_relative_to(NOT_OURS)
    )


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_only_what_the_rule_allows(layer: str) -> None:
    offenders = []
    for source in python_files(layer):
        for level, module in imports(source):
            if level >= 2:  # `from ..other import x` would reach a sibling layer
                offenders.append(f"{source.relative_to(ROOT)}: relative import level {level}")
            parts = module.split(".")
            if level == 0 and parts[0] == "centsync" and len(parts) > 1:
                other = parts[1]
                kernel = layer in ("extract", "warehouse") and module in KERNEL
                if other != layer and other not in ALLOWED[layer] and not kernel:
                    offenders.append(f"{source.relative_to(ROOT)}: {module}")
    assert offenders == []


def test_the_kernel_imports_only_the_standard_library() -> None:
    offenders = [
        f"{name}: {module}"
        for name in sorted(KERNEL)
        for level, module in imports(ROOT / "transform" / f"{name.rsplit('.', 1)[1]}.py")
        if level or module.split(".")[0] not in KERNEL_MAY_IMPORT
    ]
    assert offenders == []


def test_transform_does_no_io() -> None:
    offenders = []
    for source in python_files("transform"):
        tree = ast.parse(source.read_text(), str(source))
        for level, module in imports(source):
            if level == 0 and module.split(".")[0] in IO_MODULES:
                offenders.append(f"{source.name}: imports {module}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open":
                offenders.append(f"{source.name}:{node.lineno}: open()")
            # Polars' own I/O: pl.read_*/pl.scan_* and frame.write_*/frame.sink_* calls
            func = node.func if isinstance(node, ast.Call) else None
            if isinstance(func, ast.Attribute) and (
                func.attr.startswith(("write_", "sink_"))
                or (
                    func.attr.startswith(("read_", "scan_"))
                    and isinstance(func.value, ast.Name)
                    and func.value.id == "pl"
                )
            ):
                offenders.append(f"{source.name}:{node.lineno}: .{func.attr}()")
    assert offenders == []


def test_nothing_imports_a_layer_by_its_folder_name() -> None:
    offenders = [
        f"{source.relative_to(ROOT)}: {module}"
        for source in python_files(*LAYERS, "tests", "bench")
        for level, module in imports(source)
        if level == 0 and module.split(".")[0] in LAYERS
    ]
    assert offenders == []


def test_each_top_level_layer_is_a_package_of_its_own_code() -> None:
    # The card's first listing shows the architecture: each layer a folder holding its code.
    for layer in LAYERS:
        assert (ROOT / layer / "__init__.py").is_file(), layer
    assert (ROOT / "notebooks" / "README.md").is_file()
    assert not (ROOT / "src").exists()


def _part(source: Path) -> str:
    """The part of pipelines a file belongs to: its sub-package, or its own module name."""
    return source.relative_to(ROOT / "pipelines").parts[0].removesuffix(".py")


def _pipelines_imports(source: Path) -> list[tuple[int, str]]:
    """(line, part) for every part of pipelines that `source` imports, wherever the import is."""
    package = ["centsync", *source.relative_to(ROOT).with_suffix("").parts[:-1]]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            module = ".".join(x for x in (base, node.module or "") if x)
            # `from centsync.pipelines import failures`: the names are the parts
            names = [module] + [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        parts = {n.split(".")[2] for n in names if n.startswith("centsync.pipelines.")}
        found += [(node.lineno, part) for part in sorted(parts)]
    return found


def _pipelines_edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for source in python_files("pipelines"):
        if source.name == "__init__.py" and source.parent == ROOT / "pipelines":
            continue
        here = _part(source)
        for line, there in _pipelines_imports(source):
            if there != here:
                edges[(here, there)].append(f"{source.relative_to(ROOT)}:{line}")
    return edges


def test_every_part_of_pipelines_has_its_row() -> None:
    parts = {
        p.name.removesuffix(".py")
        for p in (ROOT / "pipelines").iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()
    }
    assert parts == set(INSIDE_PIPELINES)


def test_each_part_of_pipelines_imports_only_what_the_rule_allows() -> None:
    offenders = [
        f"{where}: {here} -> {there}"
        for (here, there), places in sorted(_pipelines_edges().items())
        if there not in INSIDE_PIPELINES[here]
        for where in places
    ]
    assert offenders == []


def test_the_parts_of_pipelines_import_each_other_in_no_cycle() -> None:
    # the rule itself is drawn bottom-up, and so is what the code does
    graphlib.TopologicalSorter(INSIDE_PIPELINES).prepare()
    actual: dict[str, set[str]] = defaultdict(set)
    for here, there in _pipelines_edges():
        actual[here].add(there)
    graphlib.TopologicalSorter(actual).prepare()
    assert not any("cli" in allowed for allowed in INSIDE_PIPELINES.values())


def test_the_architecture_page_draws_the_same_rule() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    section = page.split("## The rule inside `pipelines/`", 1)[1].split("\n## ", 1)[0]
    drawn = {}
    for line in section.splitlines():
        match = re.match(r"^\| `([a-z_]+)` \| (.*) \|$", line)
        if match:
            drawn[match[1]] = set(re.findall(r"`([a-z_]+)`", match[2]))
    assert drawn == INSIDE_PIPELINES
