"""The distribution: one wheel that installs only `centsync.*`, and works outside the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("extract", "transform", "warehouse", "pipelines", "sandbox")


def uv() -> str:
    # `uv run` (how make test runs pytest) names itself in UV.
    found = os.environ.get("UV") or shutil.which("uv")
    assert found, "uv not found: run the tests with `make test` (or `uv run pytest`)"
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # sdist first, then the wheel from it (a clean tree: no stale build/ of the checkout)
    subprocess.run(
        [uv(), "build", "--out-dir", str(out), "-q", str(ROOT)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("centsync-*.whl")
    return built


def test_wheel_installs_only_the_centsync_name_with_every_module(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"centsync"}
    # no centsync/__init__.py: centsync is a namespace owned by this distribution's packages
    assert "centsync/__init__.py" not in names
    expected = {
        f"centsync/{p.relative_to(ROOT).as_posix()}"
        for layer in LAYERS
        for p in (ROOT / layer).rglob("*")
        if p.is_file()
        and p.suffix in {".py", ".sql", ".yaml", ".j2"}
        and "__pycache__" not in p.parts
    }
    assert expected - names == set(), "add the missing packages to [tool.setuptools] packages"
    entry = (
        zipfile.ZipFile(wheel)
        .read(next(n for n in names if n.endswith("entry_points.txt")))
        .decode()
    )
    assert "centsync = centsync.pipelines.cli.console:entry" in entry


def test_every_package_folder_is_listed_in_pyproject() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    folders = {
        "centsync." + ".".join(p.parent.relative_to(ROOT).parts)
        for layer in LAYERS
        for p in (ROOT / layer).rglob("__init__.py")
    }
    assert folders == listed


@pytest.mark.slow  # CI runs it (make test-slow); about 25-65 s on 2 cores
@pytest.mark.e2e
def test_installed_wheel_runs_outside_the_repository(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([uv(), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [uv(), "pip", "install", "-q", "--python", str(python), str(wheel)],
        check=True,
        capture_output=True,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CENTSYNC_", "VIRTUAL_ENV"))}
    env |= {
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "CENTSYNC_WAREHOUSE": str(tmp_path / "w.duckdb"),
    }
    run = lambda *cmd: subprocess.run(  # noqa: E731
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    version = run(str(venv / "bin" / "centsync"), "--version")
    assert version.returncode == 0 and "0.1.0" in version.stdout, version.stderr
    # the packaged migrations and dagster.yaml are found: a whole Dagster refresh from the wheel
    demo = run(str(venv / "bin" / "centsync"), "demo")
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "Up to date: 5 changes (5 new) in " in demo.stdout
    assert (tmp_path / "w.duckdb").is_file() and (tmp_path / "dagster" / "dagster.yaml").is_file()
    assets = run(
        str(venv / "bin" / "dagster"), "asset", "list", "-m", "centsync.pipelines.definitions"
    )
    assert assets.returncode == 0, assets.stderr[-2000:]
    assert "transactions" in assets.stdout.split()
