"""The analysts' commands: `centsync notebook` (the marimo notebooks in notebooks/, on this
project's warehouse) and `centsync docs` (the data dictionary, generated from the warehouse)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from centsync.pipelines.cli.group import FILE, settings
from centsync.pipelines.cli.ui import run_group

NOTEBOOKS = ("spending", "net_worth", "reconciliation", "writeback", "recurring")


def notebooks_folder() -> Path:
    """The notebooks of the source checkout (they are not part of the installed package)."""
    from centsync.pipelines.outputs.data_dictionary import repository_file

    folder = repository_file("notebooks")
    if folder is None or not folder.is_dir():
        raise click.UsageError(
            "the notebooks live in the repository's notebooks/ folder, which this installation "
            "does not have: run `centsync notebook` from a clone (`make setup`)"
        )
    return folder


def notebook_file(name: str) -> Path:
    """notebooks/<name>.py for a notebook's name (net-worth and net_worth.py are accepted)."""
    key = Path(name).stem.replace("-", "_")
    if key not in NOTEBOOKS:
        raise click.UsageError(f"no notebook {name!r}: choose one of {', '.join(NOTEBOOKS)}")
    return notebooks_folder() / f"{key}.py"


@click.command("notebook")
@click.argument("name", required=False)
@click.option(
    "--run",
    "as_app",
    is_flag=True,
    help="Open it as an app (read only, code hidden) instead of the editor.",
)
@click.option("--port", type=int, help="Port of the marimo server (default: marimo's, 2718).")
@click.option("--headless", is_flag=True, help="Do not open a browser; print the URL only.")
def notebook(name: str | None, as_app: bool, port: int | None, headless: bool) -> None:
    """Open an analyst notebook (marimo) on this project's warehouse, read only.

    NAME is one of spending, net_worth, reconciliation, writeback, recurring; without it the editor opens
    on the notebooks/ folder. The warehouse is CENTSYNC_WAREHOUSE, else the default; the
    notebooks read it read only, so they stay open while refreshes publish.

    Example: centsync notebook spending
    """
    from centsync.warehouse import NoWarehouseError

    config = settings()
    warehouse = config.warehouse
    if not warehouse.exists():
        raise NoWarehouseError(f"no warehouse at {warehouse} (`make demo` makes one)")
    if as_app and name is None:
        raise click.UsageError("--run opens one notebook: name it (e.g. spending)")
    target = notebook_file(name) if name else notebooks_folder()
    cmd = [sys.executable, "-m", "marimo", "run" if as_app else "edit", str(target)]
    cmd += ["--headless"] if headless else []
    cmd += ["--port", str(port)] if port else []
    click.echo(f"Opening {target} on {warehouse} (read only); Ctrl-C stops it.")
    env = config.child_environ()  # the notebooks read CENTSYNC_WAREHOUSE
    # its own process group, stopped whole on SIGINT or SIGTERM: no marimo server (or kernel)
    # is left on its port
    code, stopping = run_group(cmd, env, Path.cwd(), signal.SIGTERM)
    raise SystemExit(0 if stopping else code)


@click.command("docs")
@click.option(
    "--out",
    type=FILE,
    help="Where to write it (default: docs/data-dictionary.md of this checkout).",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the file is stale.")
def docs(out: Path | None, check: bool) -> None:
    """Generate the data dictionary from the comments in a freshly migrated warehouse.

    Every schema, table, view and column and its comment (meaning, units, sign), under the
    prose of pipelines/outputs/templates/data-dictionary.md.j2. Run it after adding a migration.
    Without --out, docs/configuration.md (every setting) and docs/schemas/<command>.json (the
    JSON schema of each command's --json output) are written (or checked) too.

    Example: centsync docs --check
    """
    from centsync.pipelines.outputs.data_dictionary import render, repository_file
    from centsync.pipelines.results import schema_files
    from centsync.pipelines.settings import configuration_markdown

    if out is not None:  # a generated file, rewritten at will; never over one centsync keeps
        from centsync.pipelines.kept import guard_output

        guard_output(out, settings(), force=True)
    target = out or repository_file("docs", "data-dictionary.md")
    if target is None:
        raise click.UsageError("no docs/ folder in this installation: give --out PATH")
    stale = _generated(target, render(), check)
    configuration = None if out else repository_file("docs", "configuration.md")
    if configuration is not None:
        stale += _generated(configuration, configuration_markdown(), check)
        for command, text in schema_files().items():
            schema = configuration.with_name("schemas") / f"{command}.json"
            schema.parent.mkdir(exist_ok=True)
            stale += _generated(schema, text, check)
    if stale:
        raise click.ClickException(
            f"{', '.join(map(str, stale))} is stale: run `centsync docs` (or `make docs`)"
        )


def _generated(target: Path, text: str, check: bool) -> list[Path]:
    """Write (or with `check`, compare) a generated file; the file when it is stale."""
    current = target.read_text("utf-8") if target.exists() else None
    if check and current != text:
        return [target]
    if current == text:
        click.echo(f"{target} is up to date.")
        return []
    target.write_text(text, "utf-8")
    click.echo(f"Wrote {target}.")
    return []
