"""`centsync sql`: the warehouse in a terminal SQL workbench (Harlequin), or one query's result
printed for scripts; read only either way, so it never waits for (or blocks) a refresh."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import click

from centsync.pipelines import failures as errors
from centsync.pipelines.cli.group import FILE, all_owners_option, settings
from centsync.transform.contract import Outcome

if TYPE_CHECKING:
    import duckdb
    import polars as pl

FORMATS = ("table", "csv", "json", "markdown", "parquet")
SUFFIXES = {".csv": "csv", ".json": "json", ".md": "markdown", ".parquet": "parquet"}


class WorkbenchError(Exception):
    """Harlequin stopped with an error of its own (it printed it): most likely the file."""

    outcome: ClassVar[Outcome] = Outcome.WAREHOUSE
    headline: ClassVar[str] = "the SQL workbench (Harlequin) stopped with an error"
    what_to_do: ClassVar[str] = (
        'its message is above; `centsync sql "SELECT 1"` checks the warehouse without it.'
    )


@click.command("sql")
@click.argument("query", required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    help="How to print the result (default: table, or what --out's suffix says).",
)
@click.option("--out", type=FILE, help="Write the result to this file instead of stdout.")
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing file at --out (never one centsync keeps: the warehouse, outbox...).",
)
@all_owners_option(
    "Query every owner's published tables (the shared lake) and the household views."
)
def sql(
    query: str | None, fmt: str | None, out: Path | None, force: bool, all_owners: bool
) -> None:
    """Query the warehouse, read only: a SQL workbench, or one query's result for scripts.

    Without QUERY, on a terminal: Harlequin, a SQL IDE (schemas, tables and their comments,
    autocomplete, a results grid, export); Ctrl+J (or Ctrl+Enter) runs, Ctrl+Q quits. With
    QUERY (or `-`, or a pipe: read from stdin) the result is printed as a table, or as csv,
    json, markdown or parquet with --format and --out.

    Example: centsync sql "SELECT * FROM marts.spending_by_month ORDER BY month DESC LIMIT 3"
    """
    from centsync.warehouse import NoWarehouseError

    warehouse = settings().warehouse
    if all_owners:
        _check_all(query, fmt, out)
    elif not warehouse.exists():
        raise NoWarehouseError(f"no warehouse at {warehouse} (`make demo` makes one)")
    if query is None and sys.stdin.isatty():
        if fmt or out:
            raise click.UsageError("--format and --out print a query's result: give the QUERY")
        raise SystemExit(workbench(warehouse, settings().child_environ()))
    text = sys.stdin.read() if query in (None, "-") else query
    fmt = fmt or (SUFFIXES.get(out.suffix.lower(), "") if out else "") or "table"
    if out is None and fmt == "parquet" and sys.stdout.isatty():
        raise click.UsageError("--format parquet writes a file: give --out PATH (or a pipe)")
    if out is not None and not out.parent.is_dir():
        raise click.UsageError(f"--out {out}: the folder {out.parent} does not exist")
    if out is not None:
        from centsync.pipelines.kept import guard_output

        guard_output(out, settings(), force=force)
    try:
        lake = (lambda: _lake_connection(text or "")) if all_owners else None
        run(warehouse, text or "", fmt, out, lake)
    except KeyboardInterrupt:
        raise SystemExit(errors.INTERRUPTED) from None


def _check_all(query: str | None, fmt: str | None, out: Path | None) -> None:
    """`sql --all` prints a query's result: the workbench opens one warehouse file."""
    if query is None and sys.stdin.isatty():
        raise click.UsageError("--all runs a QUERY over every owner: give one (or `-`)")


def _lake_connection(query: str) -> duckdb.DuckDBPyConnection:
    """The lake (every owner's published tables the query names) and the household views,
    in memory."""
    from centsync.pipelines import owners
    from centsync.warehouse.lake import open_lake, referenced

    config = settings()
    members: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    if config.owners_file.exists():  # the household's owners and accounts, if it names them
        household = owners.load(config.owners_file).household
        members, accounts = household.owners, household.accounts
    return open_lake(config.lake, members, accounts, referenced(query))


def run(
    warehouse: Path,
    text: str,
    fmt: str,
    out: Path | None,
    connect: Callable[[], duckdb.DuckDBPyConnection] | None = None,
) -> None:
    """Run the query on a read-only connection and print (or write) its result as `fmt`."""
    import duckdb

    from centsync.pipelines.outputs.export import QueryError
    from centsync.warehouse import analysis, connect_readonly

    if not text.strip():
        raise QueryError("no query: give one as an argument, or on stdin with `-`")
    con = connect() if connect is not None else connect_readonly(warehouse)
    # Ctrl-C: DuckDB is told to stop the query (its default handling surfaces as a plain
    # RuntimeError), and the command exits 130 whatever the query became
    interrupted: list[int] = []

    def on_sigint(signum: int, _frame: Any) -> None:
        interrupted.append(signum)
        con.interrupt()

    old = signal.signal(signal.SIGINT, on_sigint)
    try:
        result = con.sql(text)  # the last statement's result, if it has one
        if result is None:
            click.echo("(the statement returned no rows)", err=True)
        elif fmt in ("table", "markdown"):
            frame = as_money(analysis.result_frame(result), _currency(con))
            _emit(_as_text(frame, fmt), out)
        else:
            _write(con, result, fmt, out)
    except duckdb.Error as exc:
        if interrupted:
            raise SystemExit(errors.INTERRUPTED) from None
        if isinstance(exc, duckdb.OutOfMemoryException):
            raise  # the warehouse's kind of failure (6), not the query's
        raise QueryError(str(exc).strip()) from exc
    finally:
        signal.signal(signal.SIGINT, old)
        con.close()
    if interrupted:
        raise SystemExit(errors.INTERRUPTED)


def _currency(con: duckdb.DuckDBPyConnection) -> str:
    """The settings' currency ('' when the warehouse has none yet, or in the shared lake)."""
    import duckdb

    try:
        rows = con.execute("SELECT currency FROM core.settings LIMIT 1").fetchall()
    except duckdb.Error:
        return ""
    return str(rows[0][0] or "") if rows else ""


def as_money(frame: pl.DataFrame, currency: str) -> pl.DataFrame:
    """The money columns (integer cents: `*_cents`, `amount`, `balance`) as a person reads
    them, `-1,440,000` cents -> `-14,400.00 EUR` under the heading without `_cents`; the csv,
    json and parquet formats keep the cents."""
    import polars as pl

    from centsync.transform.money import is_money_column, money_heading, money_text

    def whole(t: pl.DataType) -> bool:  # a sum of BIGINTs is a HUGEINT: a DECIMAL(38, 0) here
        return t.is_integer() or (isinstance(t, pl.Decimal) and t.scale == 0)

    money = [c for c, t in frame.schema.items() if is_money_column(c, whole(t))]
    taken = set(frame.columns)
    renames = {c: money_heading(c) for c in money if money_heading(c) not in taken}
    return frame.with_columns(
        pl.col(c).map_elements(lambda v: money_text(v, currency), return_dtype=pl.String)
        for c in money
    ).rename(renames)


def _as_text(frame: pl.DataFrame, fmt: str) -> str:
    """The result as Polars prints a table (box drawing, or markdown), every row and column."""
    import polars as pl

    if fmt == "markdown":  # a `|` inside a cell would end it
        strings = [c for c, t in frame.schema.items() if t == pl.String]
        frame = frame.with_columns(
            pl.col(c).str.replace_all("|", r"\|", literal=True).str.replace_all("\n", " ")
            for c in strings
        ).rename(lambda c: c.replace("|", r"\|"))
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 65535
    with pl.Config(
        tbl_formatting="MARKDOWN" if fmt == "markdown" else "UTF8_FULL_CONDENSED",
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=-1,
        tbl_cols=-1,
        fmt_str_lengths=1000,
        tbl_width_chars=width,
    ):
        text = str(frame)
    if fmt == "table":
        text += f"\n({frame.height:,} row{'' if frame.height == 1 else 's'})"
    return text + "\n"


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        click.echo(text, nl=False)
    else:
        from centsync.pipelines.outputs.export import write_whole

        write_whole(out, lambda aside: aside.write_text(text, "utf-8"))


def _write(
    con: duckdb.DuckDBPyConnection, result: duckdb.DuckDBPyRelation, fmt: str, out: Path | None
) -> None:
    """csv, json or parquet by DuckDB's own writers: to `out`, or through a file to stdout."""
    from centsync.pipelines.outputs.export import write_whole
    from centsync.warehouse import analysis

    if out is not None:
        write_whole(out, lambda aside: analysis.copy_result(con, result, str(aside), fmt))
        return
    with tempfile.TemporaryDirectory(prefix="centsync-sql-") as folder:
        path = Path(folder) / f"result.{fmt}"
        analysis.copy_result(con, result, str(path), fmt)
        stdout = sys.stdout.buffer
        sys.stdout.flush()
        with path.open("rb") as f:
            shutil.copyfileobj(f, stdout)
        stdout.flush()


def harlequin_cache(warehouse: Path) -> Path:
    """Harlequin's own folder for one warehouse (`<warehouse name>.harlequin/`, private):
    its editor buffers, catalog cache and query history, so that one warehouse's buffers
    never open on another's."""
    return warehouse.with_name(warehouse.stem + ".harlequin")


def workbench(warehouse: Path, child_env: dict[str, str]) -> int:
    """Run Harlequin on the warehouse, read only, until it quits; its exit code as ours.

    A child process in our own process group (it needs the terminal); SIGTERM, SIGHUP and
    SIGINT sent to centsync are passed on to it, so it never outlives the command. Harlequin
    keeps its buffers in the user's cache folder (platformdirs: `$XDG_CACHE_HOME/harlequin`),
    one for every database it opens; the child's XDG_CACHE_HOME is this warehouse's own.
    """
    cmd = [sys.executable, "-m", "harlequin", "--adapter", "duckdb", "--read-only"]
    # ~/.duckdbrc is the DuckDB shell's, and may hold dot-commands Harlequin cannot run
    cmd += ["--no-init", str(warehouse)]
    cache = harlequin_cache(warehouse)
    cache.mkdir(mode=0o700, exist_ok=True)
    terminal = _terminal_state()
    child = subprocess.Popen(cmd, env={**child_env, "XDG_CACHE_HOME": str(cache)})
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        with suppress(ProcessLookupError):
            child.send_signal(signal.SIGTERM if signum != signal.SIGINT else signum)

    stops = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    old = {s: signal.signal(s, forward) for s in stops}
    try:
        try:
            code = child.wait(timeout=None)
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
    finally:
        if child.poll() is None:  # we are leaving for another reason: take it with us
            child.terminate()
            child.wait()
    if received:  # it was stopped, with no chance to give the terminal back as it found it
        _restore_terminal(terminal)
        return 128 + received[0]
    if code < 0:
        return 128 - code
    if code not in (0, errors.USAGE):
        raise WorkbenchError(f"harlequin exited with code {code} on {warehouse}")
    return code


def _terminal_state() -> list[Any] | None:
    """The terminal's settings (to give it back after a stopped workbench), None without one."""
    import termios

    try:
        return termios.tcgetattr(sys.stdin.fileno())
    except (OSError, ValueError, termios.error):
        return None


def _restore_terminal(state: list[Any] | None) -> None:
    """The terminal as it was: its settings, the main screen, a visible cursor."""
    import termios

    if state is None:
        return
    with suppress(OSError, termios.error):
        termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, state)
        sys.stdout.write("\x1b[?1049l\x1b[?25h")
        sys.stdout.flush()
