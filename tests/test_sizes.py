"""No function over 80 lines and no module over 600 in the five layers, but the named exceptions.

The limits keep each function readable in one screen and each module one concern (issue 24).
An exception is listed here with its reason; the test also fails when a listed exception has
become small enough (or gone), so the list never goes stale.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("sandbox", "extract", "warehouse", "transform", "pipelines")
MAX_FUNCTION, MAX_MODULE = 80, 600

# "path:function" or "path" -> why it stays over the limit.
EXCEPTIONS: dict[str, str] = {}


def _sources() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py"))


def _over_the_limits() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_MODULE:
            found[rel] = lines
        for node in ast.walk(ast.parse(text, rel)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION:
                    found[f"{rel}:{node.name}"] = length
    return found


def test_no_function_over_80_lines_and_no_module_over_600_but_the_named_exceptions() -> None:
    over = _over_the_limits()
    assert {k: v for k, v in over.items() if k not in EXCEPTIONS} == {}
    # an exception that fits now leaves the list
    assert sorted(set(EXCEPTIONS) - set(over)) == []
