"""The one dependency rule (docs/architecture.md), checked on the source of every layer.

sandbox, extract, warehouse and transform never import each other; only pipelines wires them.
transform is pure: frames in, frames out, no I/O. And nothing imports a layer by its folder
name (`import extract`): the installed name is `centsync.<layer>`.

One exception, the shared kernel: three small pure modules of transform (calendar months, the
contract's constants, money as text) that extract and warehouse may import too, so that each
of those facts lives once. They import nothing but the standard library. The sandbox keeps its
own copies: it is the contract's independent oracle and shares no code with the client.
"""

from __future__ import annotations

import ast
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
KERNEL_MAY_IMPORT = {"__future__", "datetime", "enum", "math", "re", "collections", "typing"}
# transform has no I/O: no network, files, processes, databases or orchestration.
IO_MODULES = {
    "duckdb", "httpx", "aiohttp", "requests", "urllib", "socket", "os", "pathlib", "io",
    "shutil", "subprocess", "sqlite3", "dagster", "tempfile", "glob", "uvicorn", "starlette",
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


def python_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


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
