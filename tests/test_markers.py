"""Test hygiene the suite keeps by itself (issue 41): an end-to-end test says so with the `e2e`
marker (so `-m "not e2e"` is the fast loop), and the benches never import the tests.

Read from the source (AST), not by running anything: quick, and true of every file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
BENCH = ROOT / "bench"

# Fixtures that serve the sandbox over loopback HTTP (tests/conftest.py, tests/pipelines/conftest.py)
LOOPBACK_FIXTURES = {"live_sandbox", "http_env"}
# Calls that serve the sandbox over loopback, or run the product end to end (`centsync demo`
# builds its warehouse with real Dagster runs against the embedded sandbox on loopback)
LOOPBACK_CALLS = {"run_in_thread", "spawn_serve", "serving", "shared_demo", "build_demo"}


def _marks_e2e(node: ast.expr) -> bool:
    """Whether a decorator or a `pytestmark` value is (or lists) `pytest.mark.e2e`."""
    return "mark.e2e" in ast.unparse(node)


def _module_marked(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
        and _marks_e2e(n.value)
        for n in tree.body
    )


def _calls(node: ast.AST) -> set[str]:
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            names.add(f.id if isinstance(f, ast.Name) else getattr(f, "attr", ""))
    return names


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _functions_at_top(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    return {a.arg for a in fn.args.args + fn.args.kwonlyargs}


def _unmarked_end_to_end(path: Path) -> list[str]:
    """The tests of a file that serve the sandbox over loopback (through a fixture, this file's
    own fixtures included, or a call) without the e2e marker, theirs or the module's."""
    tree = ast.parse(path.read_text("utf-8"))
    if _module_marked(tree):
        return []
    functions = _functions(tree)
    loopback = set(LOOPBACK_FIXTURES)
    changed = True
    while changed:  # this file's fixtures and helpers that serve, or use one that does
        changed = False
        for fn in _functions_at_top(tree):
            if fn.name in loopback or fn.name.startswith("test_"):
                continue
            if _params(fn) & loopback or _calls(fn) & LOOPBACK_CALLS:
                loopback.add(fn.name)
                changed = True
    return [
        fn.name
        for fn in functions
        if fn.name.startswith("test_")
        and (_params(fn) & loopback or _calls(fn) & (LOOPBACK_CALLS | loopback))
        and not any(_marks_e2e(d) for d in fn.decorator_list)
    ]


def test_every_e2e_file_carries_the_marker() -> None:
    files = sorted(TESTS.rglob("*_e2e.py"))
    assert len(files) >= 13
    unmarked = [
        str(p.relative_to(ROOT)) for p in files if not _module_marked(ast.parse(p.read_text()))
    ]
    assert unmarked == [], f"add `pytestmark = pytest.mark.e2e` to {unmarked}"


def test_every_test_on_loopback_carries_the_marker() -> None:
    unmarked = {
        str(p.relative_to(ROOT)): names
        for p in sorted(TESTS.rglob("test_*.py"))
        if p.name != "test_markers.py" and (names := _unmarked_end_to_end(p))
    }
    assert unmarked == {}, (
        "these tests serve the sandbox over loopback: mark them `@pytest.mark.e2e` (or the file "
        f"`pytestmark = pytest.mark.e2e`): {unmarked}"
    )


@pytest.mark.parametrize(
    ("source", "unmarked"),
    [
        ("def test_a(http_env): pass", ["test_a"]),
        ("import pytest\n@pytest.mark.e2e\ndef test_a(http_env): pass", []),
        ("import pytest\npytestmark = [pytest.mark.e2e]\ndef test_a(http_env): pass", []),
        ("def served():\n    run_in_thread(1)\ndef test_a(served): pass", ["test_a"]),
        ("def test_a():\n    def go():\n        spawn_serve()\n    go()", ["test_a"]),
        ("def test_a():\n    def go(): pass\n    go()\ndef test_b():\n    go()", []),
        ("def test_a(sandbox): pass", []),
    ],
)
def test_the_marker_guard_sees_fixtures_calls_and_marks(
    tmp_path: Path, source: str, unmarked: list[str]
) -> None:
    path = tmp_path / "test_x.py"
    path.write_text(source)
    assert _unmarked_end_to_end(path) == unmarked


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    found = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            found |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            found.add(n.module)
    return found


def test_bench_never_imports_tests() -> None:
    """A bench runs without the test suite: what both need lives in bench/ (fleetside.py), and
    the tests import it through pytest's `pythonpath`."""
    test_modules = {p.stem for p in TESTS.glob("*.py")} | {
        p.name for p in TESTS.iterdir() if (p / "__init__.py").exists()
    }
    reaches = {}
    for path in sorted(BENCH.glob("*.py")):
        text = path.read_text("utf-8")
        names = {m for m in _imported_modules(path) if m.split(".")[0] in test_modules | {"tests"}}
        if names or '"tests"' in text or "'tests'" in text:
            reaches[path.name] = sorted(names) or ["a path to tests/"]
    assert reaches == {}, f"bench/ imports tests/: {reaches}"
