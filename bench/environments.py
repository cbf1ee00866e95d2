"""The Python environments the benchmarks run tools from, each made with uv and cached under
bench/results/ (which git ignores): a user's install of a centsync checkout, as `make setup`
makes it (bench/compare.py, bench/fixed_cost.py), and dlt's throwaway environment
(bench/compare.py)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
# centsync's layers: top-level folders of a checkout, installed as centsync.<layer>
LAYERS = ("extract", "transform", "warehouse", "pipelines", "sandbox")


def uv() -> list[str]:
    """The uv command: on the PATH, in ~/.local/bin, or as a module of python3."""
    found = shutil.which("uv") or next(
        (str(p) for p in (Path.home() / ".local/bin/uv",) if p.exists()), None
    )
    return [found] if found else ["python3", "-m", "uv"]


def dlt_python(cache: Path) -> Path:
    """The throwaway dlt environment, rebuilt when bench/requirements-dlt.txt changes."""
    req = BENCH / "requirements-dlt.txt"
    stamp = hashlib.sha256(req.read_bytes()).hexdigest()
    py = cache / "bin" / "python"
    if py.exists() and (cache / ".stamp").exists() and (cache / ".stamp").read_text() == stamp:
        return py
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "UV_COMPILE_BYTECODE": "1", "VIRTUAL_ENV": str(cache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([*uv(), "venv", "-q", "--python", "3.11", str(cache)], check=True, env=env)
    subprocess.run([*uv(), "pip", "install", "-q", "-r", str(req)], check=True, env=env)
    (cache / ".stamp").write_text(stamp)
    return py


def user_install(checkout: Path | None = None) -> Path:
    """centsync as `make setup` installs it for a user (no test tools: `uv sync --no-dev`), of
    this checkout or another one (`checkout`, CENTSYNC_BEFORE's), in a cached environment of
    its own under bench/results/; its `bin` folder.

    What a household runs. The `make setup-dev` environment has the test tools too, and some
    libraries import them whenever they are installed (pandera imports Hypothesis): about 0.08
    s of every process that no user pays (docs/benchmarks.md). `--install dev` measures that
    environment instead."""
    root = checkout or BENCH.parent
    cache = RESULTS / ("venv-user-other" if checkout else "venv-user")
    env = {
        **os.environ,
        "UV_COMPILE_BYTECODE": "1",
        "UV_LINK_MODE": "copy",
        "UV_PROJECT_ENVIRONMENT": str(cache),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("VIRTUAL_ENV", None)
    sync = [*uv(), "sync", "--frozen", "--no-dev", "--quiet", "--project", str(root)]
    subprocess.run(sync, check=True, env=env)
    # centsync's own modules are the checkout's files (an editable install): compiled in place,
    # as `make setup` does
    layers = [layer for layer in LAYERS if (root / layer).is_dir()]
    compile_ = [str(cache / "bin" / "python"), "-m", "compileall", "-q", "-j", "0", *layers]
    subprocess.run(compile_, check=True, env=env, cwd=root, stdout=subprocess.DEVNULL)
    return cache / "bin"
