"""The dependency rule: extract imports none of sandbox, warehouse, transform, pipelines."""

from __future__ import annotations

import ast
from pathlib import Path

import centsync.extract

FORBIDDEN = ("centsync.sandbox", "centsync.warehouse", "centsync.transform", "centsync.pipelines")


def test_extract_imports_no_other_centsync_layer() -> None:
    package = Path(centsync.extract.__file__).parent
    offenders = []
    for source in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{source.name}: {n}" for n in names if n.startswith(FORBIDDEN)]
    assert offenders == []
