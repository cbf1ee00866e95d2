"""One settings object: the environment is read in `pipelines/settings.py` only, never at import
time, and `docs/configuration.md` is generated from it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from centsync.extract import ConfigurationError
from centsync.pipelines.settings import Settings, configuration_markdown

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("sandbox", "extract", "warehouse", "transform", "pipelines")
THE_ONE = "pipelines/settings.py"
# The documented environment writes: pydantic's plugins off, Polars' threads for `refresh --all`
# and its start again with jemalloc preloaded, in the console script's `prepare` (it says why
# and what it measured), before the libraries load.
ENTRY = "pipelines/cli/console.py"
# The hand-over to a warm process (`centsync warm`, docs/cli.md): the console script's `refresh`
# reads `CENTSYNC_WARM` and `XDG_RUNTIME_DIR` and stamps the settings libraries read when they
# load before it imports anything (the settings object included), and sends its environment
# whole to the child that runs the command, which takes it on (`warm_server.py`). The uses are
# counted: another read of the environment there is a finding.
WARM_USES = {"pipelines/cli/warm.py": 8, "pipelines/cli/warm_server.py": 2}


def _sources() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py"))


def _environ_uses(tree: ast.AST) -> list[ast.AST]:
    """Every `os.environ`, `os.getenv`, `environ.get` and `getenv` in a module."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        if name in ("environ", "getenv"):
            found.append(node)
    return found


def _module_level(tree: ast.Module) -> list[ast.AST]:
    """Environment uses outside any function (they run at import)."""
    out: list[ast.AST] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(stmt, ast.ClassDef):
            for inner in stmt.body:
                if not isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    out += _environ_uses(inner)
            continue
        out += _environ_uses(stmt)
    return out


def test_the_environment_is_read_in_one_module_only() -> None:
    offenders = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        if rel == THE_ONE:
            continue
        tree = ast.parse(path.read_text())
        if rel == ENTRY:
            (entry,) = [n for n in tree.body if getattr(n, "name", "") == "prepare"]
            assert len(_environ_uses(entry)) == 3, "prepare: pydantic, Polars, LD_PRELOAD"
            assert "PYDANTIC_DISABLE_PLUGINS" in ast.unparse(entry)
            assert "POLARS_MAX_THREADS" in ast.unparse(entry)
            assert "preloaded(args, dict(os.environ), jemalloc())" in ast.unparse(entry)
            tree.body.remove(entry)
        uses = _environ_uses(tree)
        if rel in WARM_USES:
            assert len(uses) == WARM_USES[rel], f"{rel}: {len(uses)} uses of the environment"
            continue
        offenders += [f"{rel}:{getattr(n, 'lineno', '?')}" for n in uses]
    assert not offenders, f"read the environment in {THE_ONE} only: {offenders}"


def test_nothing_reads_the_environment_at_import_time() -> None:
    offenders = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text())
        offenders += [f"{rel}:{getattr(n, 'lineno', '?')}" for n in _module_level(tree)]
    assert not offenders, offenders


def test_the_scan_finds_what_it_looks_for() -> None:
    tree = ast.parse("import os\nX = os.environ.get('A')\ndef f():\n    return os.getenv('B')\n")
    assert len(_environ_uses(tree)) == 2 and len(_module_level(tree)) == 1


def test_configuration_md_is_generated_from_the_settings() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text("utf-8")
    assert text == configuration_markdown(), "stale: run `centsync docs`"
    for line in configuration_markdown().splitlines()[10:]:
        assert line.startswith("| `"), line


def test_defaults_resolve_under_the_data_home(tmp_path: Path) -> None:
    s = Settings.from_env({"XDG_DATA_HOME": str(tmp_path)})
    assert s.data_home == tmp_path / "centsync"
    assert s.warehouse == tmp_path / "centsync" / "centsync.duckdb"
    assert s.dagster_home == tmp_path / "centsync" / "centsync.dagster"
    assert s.inbox == tmp_path / "centsync" / "inbox"
    assert s.embedded and s.max_wait == 600.0 and s.verify_pages == 4 and not s.progress
    assert s.http_transport == "aiohttp" and s.duckdb_memory == "160MB"


def test_values_are_parsed_and_paths_made_absolute(tmp_path: Path) -> None:
    s = Settings.from_env(
        {
            "CENTSYNC_API_BASE_URL": "https://api.example",
            "CENTSYNC_API_KEY": "pfd_live_secret",
            "CENTSYNC_WAREHOUSE": "relative/w.duckdb",
            "CENTSYNC_MAX_WAIT": "2.5",
            "CENTSYNC_VERIFY_DAYS": "0",
            "CENTSYNC_VERIFY_PAGES": "9",
            "CENTSYNC_HTTP_TRANSPORT": " HTTPCORE ",
            "CENTSYNC_PROGRESS": "yes",
        }
    )
    assert not s.embedded and s.api_key == "pfd_live_secret"
    assert s.warehouse.is_absolute() and s.warehouse.name == "w.duckdb"
    assert s.inbox == s.warehouse.parent / "inbox"
    assert (s.max_wait, s.verify_days, s.verify_pages) == (2.5, 0.0, 9)
    assert s.http_transport == "httpcore" and s.progress
    assert "pfd_live_secret" not in repr(s)  # never shown


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"CENTSYNC_MAX_WAIT": "soon"}, "CENTSYNC_MAX_WAIT='soon'"),
        ({"CENTSYNC_VERIFY_DAYS": "-1"}, "CENTSYNC_VERIFY_DAYS='-1'"),
        ({"CENTSYNC_VERIFY_DAYS": "nan"}, "CENTSYNC_VERIFY_DAYS='nan'"),
        ({"CENTSYNC_VERIFY_PAGES": "1.5"}, "CENTSYNC_VERIFY_PAGES='1.5'"),
        ({"CENTSYNC_HTTP_TRANSPORT": "curl"}, "CENTSYNC_HTTP_TRANSPORT='curl'"),
        ({"CENTSYNC_API_BASE_URL": "https://api.example"}, "CENTSYNC_API_KEY is not"),
        # issue 25: each of these used to crash or exit 1 inside a run, or sync the sandbox
        ({"CENTSYNC_API_KEY": "k"}, "CENTSYNC_API_KEY is set but CENTSYNC_API_BASE_URL is not"),
        (
            {"CENTSYNC_API_BASE_URL": "https://api.example/v1/", "CENTSYNC_API_KEY": "k"},
            "ends in /v1, and centsync adds /v1 itself",
        ),
        (
            {"CENTSYNC_API_BASE_URL": "https://me:pw@api.example", "CENTSYNC_API_KEY": "k"},
            "CENTSYNC_API_BASE_URL holds credentials",
        ),
        ({"CENTSYNC_API_BASE_URL": "api.example", "CENTSYNC_API_KEY": "k"}, "not an http"),
        ({"CENTSYNC_DUCKDB_MEMORY": "lots"}, "CENTSYNC_DUCKDB_MEMORY='lots'"),
        ({"CENTSYNC_DUCKDB_MEMORY": "100000"}, "CENTSYNC_DUCKDB_MEMORY='100000'"),
        ({"CENTSYNC_DUCKDB_MEMORY": "1KB"}, "at least 16MB"),
    ],
)
def test_a_value_that_cannot_be_used_names_its_variable(env: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigurationError, match=says.replace(".", r"\.").replace("?", r"\?")):
        Settings.from_env(env)


def test_a_child_process_gets_the_settings_as_its_environment(tmp_path: Path) -> None:
    s = Settings.from_env({"XDG_DATA_HOME": str(tmp_path), "CENTSYNC_PROGRESS": "1"})
    env = s.child_environ()
    assert env["CENTSYNC_WAREHOUSE"] == str(s.warehouse)
    assert env["DAGSTER_HOME"] == str(s.dagster_home)
    assert env["CENTSYNC_PROGRESS"] == "1"
    assert "CENTSYNC_API_KEY" not in env or env["CENTSYNC_API_KEY"]  # empty is left out
    again = Settings.from_env(env)
    assert (again.warehouse, again.dagster_home, again.inbox) == (
        s.warehouse,
        s.dagster_home,
        s.inbox,
    )


@pytest.mark.parametrize("value", ["160MB", "1GB", "1.5 GiB", "2gib", "50%"])
def test_every_memory_size_duckdb_reads_is_accepted(value: str) -> None:
    assert Settings.from_env({"CENTSYNC_DUCKDB_MEMORY": value}).duckdb_memory == value


def test_credentials_in_the_base_url_are_never_echoed() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Settings.from_env(
            {"CENTSYNC_API_BASE_URL": "https://me:s3cret@api.example", "CENTSYNC_API_KEY": "k"}
        )
    assert "s3cret" not in str(caught.value)
