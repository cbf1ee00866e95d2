"""Every reach into a third-party library's private names sits in its one adapter module.

The performance work reaches into dagster, httpx, httpx-aiohttp and pandera where they offer no
public way (docs/benchmarks.md measures each). Each library has one adapter module that does so,
and a test there pins what it relies on. This test parses every source file of the five layers
and fails on a reach that is not on the allow-list below: a private module imported or named
as a string, a library's internal module, or an attribute `x._name` (also through `getattr`,
`setattr`, `hasattr`) that one of those libraries' sources names and our code does not define,
and any `super()._name`.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("extract", "transform", "warehouse", "pipelines", "sandbox")
LIBRARIES = ("dagster", "httpx", "httpx_aiohttp", "pandera", "aiolimiter")
# internal modules without a leading underscore
INTERNAL_MODULES = ("pandera.backends", "pandera.api", "httpx_aiohttp.transport")
# Underscored names that are public API: NamedTuple's methods, os._exit.
PUBLIC_UNDERSCORED = frozenset({"_replace", "_fields", "_asdict", "_make", "_exit"})

# The adapters: (file, what it reaches). Each is pinned by the test named beside it.
ALLOWED: dict[tuple[str, str], str] = {
    # httpx / httpx-aiohttp: tests/extract/test_transport.py
    ("extract/_transport.py", "._transport"): "the transport of a caller's own client",
    ("extract/_transport.py", "._cookies"): "cookie parsing switched off",
    ("extract/_transport.py", "._transport_for_url"): "the transport a request would use",
    ("extract/_transport.py", "._uri_reference"): "a URL's parse, reused per path",
    ("extract/_transport.py", "._content"): "the body as the transport read it",
    ("extract/_transport.py", "httpx._main"): "httpx's command line, not imported",
    # aiolimiter: tests/extract/test_pacing.py::test_the_bucket_s_level_can_be_set_and_a_...
    ("extract/_pacing.py", "._leak"): "drain the bucket to now",
    ("extract/_pacing.py", "._wake_next"): "let a waiter re-check",
    ("extract/_pacing.py", "._level"): "the bucket's fill, set to the server's count",
    # pandera: tests/warehouse/test_validation.py::test_what_the_screen_relies_on_in_pandera
    ("warehouse/pandera_screen.py", "._check_fn"): "the function a check runs",
    ("warehouse/pandera_screen.py", "._check_kwargs"): "its arguments",
    # dagster: tests/pipelines/test_dagster_storage.py::test_the_dagster_internals_...
    ("pipelines/instance.py", "._initdb"): "Dagster's schema set-up, overridden",
    ("pipelines/instance.py", "._has_asset_key_col_on_connection"): "a column found, kept",
    ("pipelines/instance.py", "dagster._core.instance.ref"): "InstanceRef",
    ("pipelines/instance.py", "dagster._core.instance"): "InstanceType, for _from_ref",
    ("pipelines/instance.py", "dagster._core.storage.defs_state.base"): "DefsStateStorage",
    (
        "pipelines/instance.py",
        "dagster._core.storage.event_log.sqlite.sqlite_event_log",
    ): "SqliteEventLogStorage, subclassed",
    (
        "pipelines/instance.py",
        "dagster._core.storage.runs.sqlite.sqlite_run_storage",
    ): "SqliteRunStorage, subclassed",
    ("pipelines/instance.py", "dagster._core.storage.sql"): "create_engine",
    ("pipelines/instance.py", "dagster._core.storage.runs.schema"): "a new runs.db's tables",
    ("pipelines/instance.py", "dagster._core.storage.schedules.schema"): "a new schedules.db's",
    ("pipelines/instance.py", "dagster._core.storage.event_log.schema"): "a new event database's",
    ("pipelines/instance.py", "dagster._core.storage.sqlite"): "the busy timeout",
    ("pipelines/instance.py", "dagster._serdes"): "ConfigurableClassData",
    ("pipelines/instance.py", "dagster._core.storage.sqlite_storage"): "by name",
    ("pipelines/instance.py", "dagster._core.storage.schedules"): "by name",
    ("pipelines/instance.py", "dagster._core.storage.legacy_storage"): "by name",
    ("pipelines/instance.py", "dagster._core.storage.local_compute_log_manager"): "by name",
    ("pipelines/instance.py", "dagster._core.storage.noop_compute_log_manager"): "by name",
}

_MODULE_STRING = re.compile(rf"^(?:{'|'.join(LIBRARIES)})(?:\.\w+)+$")


@cache
def _library_names() -> frozenset[str]:
    """The underscored names in the five libraries' sources, to tell theirs from ours."""
    parts: list[str] = []
    for lib in LIBRARIES:
        spec = importlib.util.find_spec(lib)
        assert spec is not None and spec.origin is not None, lib
        parts.extend(p.read_text(errors="replace") for p in Path(spec.origin).parent.rglob("*.py"))
    return frozenset(re.findall(r"\b_\w+", "\n".join(parts)))


def _sources() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py"))


def _private_module(name: str) -> bool:
    parts = name.split(".")
    if parts[0] not in LIBRARIES:
        return False
    internal = any(name == m or name.startswith(m + ".") for m in INTERNAL_MODULES)
    return internal or any(p.startswith("_") and not p.startswith("__") for p in parts[1:])


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORED


def _our_names(trees: list[ast.Module]) -> set[str]:
    """Names our own code defines: functions, classes, attributes set on `self`, module-level
    names. An attribute we set on another library's object is not one of ours."""
    ours: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if not _overrides(node):
                    ours.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                ours.add(node.id)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                ours.add(node.attr)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                ("centsync", ".")
            ):
                ours.update(a.asname or a.name for a in node.names)
            elif (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets)
                and isinstance(node.value, ast.Tuple | ast.List)
            ):
                ours.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
    return ours


def _overrides(node: ast.AST) -> bool:
    # a method that calls super() of the same name overrides a library's: not ours
    name = getattr(node, "name", "")
    for inner in ast.walk(node):
        if (
            isinstance(inner, ast.Attribute)
            and inner.attr == name
            and isinstance(inner.value, ast.Call)
            and isinstance(inner.value.func, ast.Name)
            and inner.value.func.id == "super"
        ):
            return True
    return False


def _reaches(tree: ast.Module, ours: set[str], theirs: frozenset[str]) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _private_module(alias.name):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if _private_module(node.module):
                yield node.lineno, node.module
                continue
            for alias in node.names:
                if _private_module(f"{node.module}.{alias.name}"):
                    yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _MODULE_STRING.match(node.value) and _private_module(node.value):
                yield node.lineno, node.value
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            super_call = (
                isinstance(base, ast.Call)
                and isinstance(base.func, ast.Name)
                and base.func.id == "super"
            )
            if super_call or (node.attr not in ours and node.attr in theirs):
                yield node.lineno, "." + node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and node.args[1].value not in ours
            and node.args[1].value in theirs
        ):
            yield node.lineno, "." + node.args[1].value


@cache
def _found() -> dict[tuple[str, str], list[int]]:
    paths = _sources()
    trees = [ast.parse(p.read_text(), str(p)) for p in paths]
    ours = _our_names(trees)
    theirs = _library_names()
    found: dict[tuple[str, str], list[int]] = {}
    for path, tree in zip(paths, trees, strict=True):
        rel = path.relative_to(ROOT).as_posix()
        for line, what in _reaches(tree, ours, theirs):
            found.setdefault((rel, what), []).append(line)
    return found


def test_every_private_reach_is_in_its_adapter() -> None:
    found = _found()
    new = {f"{file}:{lines[0]} {what}" for (file, what), lines in found.items()}
    new = {n for n in new if (n.split(":")[0], n.split(" ", 1)[1]) not in ALLOWED}
    assert not new, (
        "a private name of dagster/httpx/httpx_aiohttp/pandera/aiolimiter outside its adapter "
        f"module (move it there, with a test that pins it): {sorted(new)}"
    )


def test_the_allow_list_is_exact() -> None:
    """An allowed reach that is gone is taken off the list, so the list says what is left."""
    stale = set(ALLOWED) - set(_found())
    assert not stale, f"no longer reached, remove from ALLOWED: {sorted(stale)}"


def test_the_scan_sees_a_reach() -> None:
    tree = ast.parse(
        "import pandera.api.polars.types\n"
        "from dagster._core.x import y\n"
        "from pandera.backends.polars import builtin_checks\n"
        "import httpx\n"
        "c = httpx.AsyncClient()\n"
        "c._transport_for_url(1)\n"
        "getattr(c, '_mounts')\n"
        "m = 'dagster._core.storage.x'\n"
        "t._replace(a=1)\n"
    )
    got = {what for _, what in _reaches(tree, {"c", "m"}, _library_names())}
    assert got == {
        "pandera.api.polars.types",
        "dagster._core.x",
        "pandera.backends.polars",
        "._transport_for_url",
        "._mounts",
        "dagster._core.storage.x",
    }
