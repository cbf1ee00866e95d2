"""`centsync sql` on the demo warehouse: one query's result in every format, read back by
Polars and DuckDB; bad queries and missing warehouses with their exit codes; a query while a
refresh holds the warehouse; and the workbench (Harlequin) driven in a real terminal (tmux)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner
from filelock import FileLock

from centsync.pipelines.cli.main import main
from centsync.transform.money import money_text
from centsync.warehouse import RefreshInProgressError, Warehouse
from system_packages import need_command

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
# a query whose result has text, a date, integer cents and a UUID
QUERY = "SELECT id, booked_at, amount, concept FROM core.transactions ORDER BY id"


def build_demo(folder: Path) -> Path:
    """`centsync demo` (embedded sandbox) into `folder`: the demo warehouse's path."""
    warehouse = folder / "centsync.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        for k in ("CENTSYNC_API_BASE_URL", "CENTSYNC_API_KEY", "XDG_DATA_HOME"):
            mp.delenv(k, raising=False)
        mp.setenv("CENTSYNC_WAREHOUSE", str(warehouse))
        mp.setenv("DAGSTER_HOME", str(folder / "dagster"))
        mp.setenv("CENTSYNC_INBOX", str(folder / "inbox"))
        result = CliRunner().invoke(main, ["demo"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (folder / "demo-output.txt").write_text(result.output, "utf-8")
    return warehouse


def shared_demo(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """One demo warehouse for the analysts' tests of every xdist worker of this session (built
    by the first to ask, under a lock); tests read it, and copy it to change or hold it."""
    base = tmp_path_factory.getbasetemp()
    # the workers' folders share the session's; without xdist the session's is the base itself
    shared = (base.parent if worker_id != "master" else base) / "analyst-demo"
    shared.mkdir(exist_ok=True)
    with FileLock(str(shared) + ".lock"):
        warehouse = shared / "centsync.duckdb"
        if not (shared / "demo-output.txt").exists():
            build_demo(shared)
    return warehouse


@pytest.fixture(scope="session")
def demo_warehouse(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    return shared_demo(tmp_path_factory, worker_id)


def copy_warehouse(source: Path, folder: Path) -> Path:
    """A private copy of a warehouse file, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "centsync.duckdb"
    shutil.copyfile(source, target)
    return target


def query(warehouse: Path, sql: str) -> pl.DataFrame:
    """What DuckDB itself returns for `sql` on the warehouse, read only (instants in UTC: DuckDB
    names the zone Etc/UTC, a Parquet file UTC)."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        frame = pl.from_arrow(con.sql(sql).to_arrow_table())
    finally:
        con.close()
    assert isinstance(frame, pl.DataFrame)
    return in_utc(frame)


def in_utc(frame: pl.DataFrame) -> pl.DataFrame:
    """Every time-zone-aware column converted to UTC (the same instants)."""
    zoned = [c for c, t in frame.schema.items() if isinstance(t, pl.Datetime) and t.time_zone]
    return frame.with_columns(pl.col(c).dt.convert_time_zone("UTC") for c in zoned)


def centsync_process(warehouse: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The real `centsync` in a child process, on `warehouse`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CENTSYNC_")}
    environ |= {"CENTSYNC_WAREHOUSE": str(warehouse)}
    environ.setdefault("DAGSTER_HOME", str(warehouse.parent / "dagster"))
    return subprocess.run(
        [sys.executable, "-m", "centsync.pipelines.cli", *args],
        capture_output=True,
        env=environ,
        timeout=120,
    )


def centsync(warehouse: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """`centsync ARGS` on `warehouse`, in this process (a child process costs 1.4 s of imports):
    its exit code and what it printed, as `centsync_process` returns them."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("CENTSYNC_")}
    env |= {"CENTSYNC_WAREHOUSE": str(warehouse)}
    env.setdefault(
        "DAGSTER_HOME", os.environ.get("DAGSTER_HOME") or str(warehouse.parent / "dagster")
    )
    result = CliRunner().invoke(main, list(args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(
        args, result.exit_code, result.stdout_bytes, result.stderr_bytes
    )


@pytest.fixture
def sql(
    demo_warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., tuple[int, str]]:
    """`centsync sql ARGS` in process on the demo warehouse: (exit code, stdout and stderr)."""
    monkeypatch.setenv("CENTSYNC_WAREHOUSE", str(demo_warehouse))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))  # a failure's log goes there

    def run(*args: str, stdin: str | None = None) -> tuple[int, str]:
        result = CliRunner().invoke(main, ["sql", *args], input=stdin)
        return result.exit_code, result.stdout + result.stderr

    return run


def test_a_query_prints_every_row_as_a_table(
    sql: Callable[..., tuple[int, str]], demo_warehouse: Path
) -> None:
    want = query(
        demo_warehouse,
        "SELECT category_name, amount_cents FROM marts.spending_last_12_months ORDER BY amount_cents",
    )
    code, out = sql(
        "SELECT category_name, amount_cents FROM marts.spending_last_12_months ORDER BY amount_cents"
    )
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.startswith("│")]
    # money as a person reads it: the cents in the settings' currency, under `amount`
    assert [c.strip("│ ") for c in lines[0].split("┆")] == ["category_name", "amount"]
    cells = [[c.strip("│ ") for c in line.split("┆")] for line in lines[1:]]
    assert cells == [[name, money_text(cents, "EUR")] for name, cents in want.iter_rows()]
    assert cells[0][1].endswith(" EUR") and "," in cells[0][1]  # -14,400.00 EUR
    assert out.rstrip().endswith(f"({want.height} rows)")


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_each_file_format_round_trips_through_polars_and_duckdb(
    demo_warehouse: Path, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / f"result.{fmt}"
    done = centsync_process(demo_warehouse, "sql", QUERY, "--out", str(out))  # format from suffix
    assert done.returncode == 0, done.stderr
    want = query(demo_warehouse, QUERY.replace("SELECT id,", "SELECT id::VARCHAR AS id,"))
    assert want.height > 1000
    read = {
        "csv": lambda p: pl.read_csv(p, try_parse_dates=True),
        "json": lambda p: pl.read_json(p).with_columns(pl.col("booked_at").str.to_date()),
        "parquet": pl.read_parquet,
    }[fmt]
    assert read(out).equals(want)
    reader = {"csv": "read_csv", "json": "read_json", "parquet": "read_parquet"}[fmt]
    back = query(
        demo_warehouse,
        f"SELECT id::VARCHAR AS id, booked_at, amount, concept FROM {reader}('{out}')",
    )
    assert back.equals(want)


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_stdout_and_out_print_the_same_bytes(
    demo_warehouse: Path, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / f"result.{fmt}"
    to_file = centsync(demo_warehouse, "sql", QUERY, "--format", fmt, "--out", str(out))
    to_stdout = centsync(demo_warehouse, "sql", QUERY, "--format", fmt)
    assert to_file.returncode == to_stdout.returncode == 0, to_file.stderr + to_stdout.stderr
    assert to_stdout.stdout == out.read_bytes()
    assert not list(tmp_path.glob(".*partial"))


def test_markdown_escapes_a_pipe_inside_a_cell(sql: Callable[..., tuple[int, str]]) -> None:
    code, out = sql("SELECT 'a|b' AS text, 42 AS n", "--format", "markdown")
    assert code == 0, out
    assert out.splitlines() == ["| text | n  |", "|------|----|", r"| a\|b | 42 |"]


def test_the_query_can_come_from_stdin(sql: Callable[..., tuple[int, str]]) -> None:
    for args in (["-"], []):  # `-`, or no query and a pipe
        code, out = sql(*args, "--format", "csv", stdin="SELECT count(*) AS n FROM core.accounts")
        assert code == 0, out
        assert out.splitlines() == ["n", "6"]


def test_types_polars_cannot_take_are_shown_as_text(sql: Callable[..., tuple[int, str]]) -> None:
    code, out = sql("SELECT INTERVAL 3 DAY AS wait, 1::UNION(a INT, b VARCHAR) AS u")
    assert code == 0, out
    assert "3 days" in out and "(1 row)" in out


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        ("SELEC 1", "syntax error"),
        ("SELECT * FROM marts.nothing_here", "nothing_here"),
        ("DELETE FROM core.accounts", "read-only"),
        ("   ", "no query"),
    ],
)
def test_a_bad_query_is_a_usage_error_and_changes_nothing(
    demo_warehouse: Path, statement: str, says: str
) -> None:
    before = demo_warehouse.stat().st_mtime_ns
    done = centsync(demo_warehouse, "sql", statement)
    assert done.returncode == 2, done.stderr
    err = done.stderr.decode()
    assert "the query failed" in err and says in err and "Traceback" not in err
    assert demo_warehouse.stat().st_mtime_ns == before
    assert query(demo_warehouse, "SELECT count(*) AS n FROM core.accounts")["n"][0] == 6


def test_usage_errors_and_a_missing_warehouse_have_their_exit_codes(
    demo_warehouse: Path, tmp_path: Path
) -> None:
    missing = centsync_process(tmp_path / "nowhere.duckdb", "sql", "SELECT 1")
    assert missing.returncode == 6 and b"no warehouse at" in missing.stderr
    no_folder = centsync(demo_warehouse, "sql", "SELECT 1", "--out", str(tmp_path / "no" / "x.csv"))
    assert no_folder.returncode == 2 and b"does not exist" in no_folder.stderr
    bad_format = centsync(demo_warehouse, "sql", "SELECT 1", "--format", "xml")
    assert bad_format.returncode == 2


def test_a_query_runs_while_a_refresh_holds_the_warehouse(
    demo_warehouse: Path, tmp_path: Path
) -> None:
    warehouse = copy_warehouse(demo_warehouse, tmp_path / "wh")
    with Warehouse.refreshing(warehouse, record=False) as wh:
        wh.con.execute("DELETE FROM core.accounts")  # the refresh's working copy, not published
        done = centsync_process(
            warehouse, "sql", "SELECT count(*) AS n FROM core.accounts", "--format", "csv"
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode().split() == ["n", "6"]
        # the lock is still the refresh's alone
        with pytest.raises(RefreshInProgressError), Warehouse.refreshing(warehouse, record=False):
            pass


def _open_files(fds: Path) -> set[Path]:
    """The files a process holds open; one it closes while they are listed is skipped (its
    /proc entry is gone by the time it is resolved)."""
    found = set()
    for fd in fds.iterdir():
        try:
            found.add(Path(os.readlink(fd)))
        except FileNotFoundError:
            continue
    return found


def test_ctrl_c_stops_a_long_query_with_exit_130(demo_warehouse: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CENTSYNC_")}
    environ |= {"CENTSYNC_WAREHOUSE": str(demo_warehouse)}
    environ["DAGSTER_HOME"] = str(demo_warehouse.parent / "dagster")
    endless = "SELECT sum(range) FROM range(100000000000)"
    child = subprocess.Popen(
        [sys.executable, "-m", "centsync.pipelines.cli", "sql", endless],
        env=environ,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as on a terminal
    )
    try:
        deadline = time.monotonic() + 60
        fds = Path(f"/proc/{child.pid}/fd")
        while demo_warehouse not in _open_files(fds):  # the query is on
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.1)
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        _out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err


# ------------------------------------------------------------------ the workbench, in tmux


class Terminal:
    """A tmux server of our own with one 160x45 window running a command under `sh`, which
    writes the command's exit code to a file when it ends."""

    def __init__(self, tmp: Path, command: list[str], env: dict[str, str]) -> None:
        self.env = env
        self.socket = str(tmp / "tmux.sock")
        self.rc = tmp / "exit-code"
        # pytest's own COLUMNS and LINES would tell the program a terminal of 80x24
        words = ["env", "-u", "COLUMNS", "-u", "LINES", *(f"{k}={v}" for k, v in env.items())]
        line = " ".join(shlex.quote(a) for a in words)
        line += " " + " ".join(shlex.quote(a) for a in command)
        self.tmux(
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "160",
            "-y",
            "45",
            "sh",
            "-c",
            f"{line}; echo $? > {shlex.quote(str(self.rc))}; sleep 600",
        )
        self.tmux("set-window-option", "-t", "t", "window-size", "manual")
        self.tmux("resize-window", "-t", "t", "-x", "160", "-y", "45")

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def screen(self, ansi: bool = False) -> str:
        return self.tmux("capture-pane", "-p", *(["-e"] if ansi else []), "-t", "t")

    def wait_for(self, text: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.3)
        raise AssertionError(f"{text!r} never appeared; the screen:\n{self.screen()}")

    def command_pid(self) -> int:
        """The command's process (the child of the pane's `sh`)."""
        shell = self.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip()
        return int(children(int(shell))[0])

    def exit_code(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.rc.exists() and self.rc.read_text().strip():
                return int(self.rc.read_text())
            time.sleep(0.2)
        raise AssertionError(f"the command did not exit; the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)


def children(pid: int) -> list[int]:
    """The child processes of `pid`."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in found.split()]


@pytest.fixture
def workbench(demo_warehouse: Path, tmp_path: Path) -> Iterator[Terminal]:
    """`centsync sql` in tmux on the demo warehouse, with a HOME and XDG folders of its own
    (Harlequin keeps its history and caches there)."""
    need_command("tmux")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "CENTSYNC_WAREHOUSE": str(demo_warehouse),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "TERM": "xterm-256color",
        "COLORTERM": "truecolor",
    }
    term = Terminal(tmp_path, [sys.executable, "-m", "centsync.pipelines.cli", "sql"], env)
    try:
        term.wait_for("Query Editor")
        term.wait_for("Database Connected")
        yield term
    finally:
        term.close()


def test_the_workbench_runs_a_typed_query_and_quits_cleanly(
    workbench: Terminal, demo_warehouse: Path
) -> None:
    want = query(
        demo_warehouse,
        "SELECT category_name, transactions FROM marts.spending_last_12_months ORDER BY amount_cents LIMIT 5",
    )
    workbench.tmux(
        "send-keys",
        "-t",
        "t",
        "-l",
        "SELECT category_name, transactions FROM marts.spending_last_12_months ORDER BY amount_cents LIMIT 5",
    )
    workbench.tmux("send-keys", "-t", "t", "C-j")  # Harlequin's "run query" (also Ctrl+Enter)
    screen = workbench.wait_for("Query Results (5 Records)")
    for name, count in want.iter_rows():
        assert any(name in line and f" {count} " in line for line in screen.splitlines()), screen
    shot = os.environ.get("CENTSYNC_SQL_SCREENSHOT")
    if shot:  # `make sql-screenshot` style: the picture in docs/
        save_screenshot(workbench.screen(ansi=True), Path(shot))
    workbench.tmux("send-keys", "-t", "t", "C-q")
    assert workbench.exit_code() == 0
    # the buffer is this warehouse's own (`<warehouse>.harlequin/`), not the user's cache's,
    # which every warehouse would share
    own = demo_warehouse.with_name(demo_warehouse.stem + ".harlequin") / "harlequin"
    assert list(own.glob("cache-*.pickle")), sorted(p.name for p in own.parent.rglob("*"))
    shared = Path(workbench.env["XDG_CACHE_HOME"]) / "harlequin"
    assert not list(shared.glob("cache-*.pickle"))


def test_sigterm_stops_centsync_and_the_workbench_with_it(workbench: Terminal) -> None:
    pid = workbench.command_pid()
    harlequin = children(pid)
    assert harlequin, "the workbench is a child process of centsync"
    os.kill(pid, signal.SIGTERM)
    assert workbench.exit_code() == 143
    for child in harlequin:
        with pytest.raises(ProcessLookupError):
            os.kill(child, 0)


def save_screenshot(ansi: str, target: Path) -> None:
    """The terminal's screen (tmux's ANSI capture) as a PNG: rich renders it as HTML, headless
    Chromium photographs the page."""
    from rich.console import Console
    from rich.text import Text

    console = Console(record=True, width=160, force_terminal=True, color_system="truecolor")
    console.print(Text.from_ansi(ansi.rstrip("\n")), end="")
    html = target.with_suffix(".html")
    console.save_html(str(html), inline_styles=True)
    page = html.read_text("utf-8").replace(
        "<body>", '<body style="margin:0;background:#0f0f1a"><style>pre{margin:0}</style>', 1
    )
    html.write_text(page, "utf-8")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser, "chromium is not installed (apt-get install -y chromium)"
    subprocess.run(
        [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={target}",
            "--window-size=1560,880",
            html.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    html.unlink()
    assert json.dumps(str(target)) and target.stat().st_size > 10_000
