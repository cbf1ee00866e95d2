"""The console script (`centsync` = `pipelines.cli.console:entry`): its start-up settings and exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = r"""
import gc, sys, click
from centsync.pipelines.cli import main as cli
from centsync.pipelines.cli import group as cli_support
cli_support.JOB_COMMANDS = cli_support.JOB_COMMANDS | {"probe-job"}

def state():
    return f"gc={gc.isenabled()} frozen={gc.get_freeze_count() > 0}"

@cli.main.command("probe-job")
def probe_job():
    click.echo("before " + state())
    cli_support.imports_done()
    click.echo("after " + state())
    raise SystemExit(3)

@cli.main.command("probe-other")
def probe_other():
    click.echo("other " + state())

sys.argv = ["centsync", sys.argv[1]]
cli.entry()
"""


def _run(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, command], capture_output=True, text=True, timeout=120
    )


def test_a_job_command_imports_with_the_collector_off_then_runs_with_it_on() -> None:
    done = _run("probe-job")
    assert done.returncode == 3, done.stderr  # the command's exit code, through os._exit
    lines = done.stdout.splitlines()
    assert lines[0] == "before gc=False frozen=False"
    assert lines[1] == "after gc=True frozen=True"


def test_any_other_command_runs_with_the_collector_on() -> None:
    done = _run("probe-other")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "other gc=True frozen=True"


IMPORT_PROBE = r"""
import gc, os, sys

# collections that start while the CLI's main module is still being imported (its `entry`,
# defined after its imports, not there yet)
during = []

def record(phase, info):
    main = sys.modules.get("centsync.pipelines.cli.main")
    if phase == "start" and main is not None and not hasattr(main, "entry"):
        during.append(info["generation"])

gc.callbacks.append(record)
exit_now = os._exit
os._exit = lambda code: (print("probe", len(during), code), sys.stdout.flush(), exit_now(code))
sys.argv = ["centsync", "--version"]
if os.environ.get("PROBE_ENTRY") == "console":
    from centsync.pipelines.cli.console import entry
else:
    from centsync.pipelines.cli.main import entry
entry()
"""


def _import_probe(how: str) -> list[str]:
    import os

    done = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PROBE_ENTRY": how},
    )
    probe = [line for line in done.stdout.splitlines() if line.startswith("probe ")]
    assert len(probe) == 1, done.stdout + done.stderr
    return probe[0].split()[1:]


def test_the_console_script_imports_the_cli_with_the_collector_off() -> None:
    """`console.entry` turns the collector off before it imports the CLI (about 0.3 s of
    imports that set off collections, ~35 ms of them); importing the CLI's main module first,
    as the console script did, collects during that import."""
    collections, code = _import_probe("console")
    assert (collections, code) == ("0", "0")
    collections, code = _import_probe("main")
    assert int(collections) > 0 and code == "0"


# The console script as the `centsync` program runs it, with the CLI's `main.entry` in place of
# the command: Polars' pool as the command would find it (importing the CLI imports Polars).
THREADS_PROBE = r"""
import sys, types

def probe():
    del sys.modules["centsync.pipelines.cli.main"]  # this stand-in: the real one from here
    from centsync.pipelines.cli import main as real  # the CLI's imports, Polars among them
    import polars
    print("threads", polars.thread_pool_size(), hasattr(real, "main"))

fake = types.ModuleType("centsync.pipelines.cli.main")
fake.entry = probe
sys.modules["centsync.pipelines.cli.main"] = fake
from centsync.pipelines.cli.console import entry
sys.argv = ["centsync", *sys.argv[1:]]
entry()
"""


def _console(probe: str, args: tuple[str, ...], name: str, value: str | None) -> str:
    """A child running the console script with `probe` as the CLI, with the environment
    variable `name` unset (None) or set to `value`; its stdout."""
    import os

    env = {k: v for k, v in os.environ.items() if k != name}
    if value is not None:
        env[name] = value
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _threads(*args: str, user: str | None = None) -> int:
    out = _console(THREADS_PROBE, args, "POLARS_MAX_THREADS", user)
    line = [ln for ln in out.splitlines() if ln.startswith("threads ")]
    assert len(line) == 1, out
    return int(line[0].split()[1])


def test_refresh_all_runs_polars_on_one_thread_and_a_single_refresh_on_every_core() -> None:
    """`refresh --all` (many households, each a few hundred small plans) gets one Polars
    thread, told before Polars loads; any other command keeps Polars' pool of every core (a
    big ledger's first sync parses in parallel); a value the user set wins either way."""
    import polars

    every_core = polars.thread_pool_size()  # this test process: Polars' default
    assert _threads("refresh", "--all", "--json") == 1
    assert _threads("--debug", "refresh", "--all") == 1
    assert _threads("refresh") == every_core
    assert _threads("sql", "--all") == every_core  # another command's option of that name
    assert _threads("refresh", "--all", user="2") == 2


def test_many_owners_reads_the_command_line() -> None:
    from centsync.pipelines.cli.console import many_owners

    assert many_owners(["refresh", "--all"])
    assert many_owners(["--debug", "refresh", "--concurrency", "4", "--all"])
    assert not many_owners(["refresh"])
    assert not many_owners(["status", "--all"])
    assert not many_owners([])


# The console script as `centsync refresh --all` runs it, the CLI's `main.entry` replaced by a
# probe: what this process was started with, and whether jemalloc is mapped into it.
PRELOAD_PROBE = r"""
import os, sys, types

def probe():
    with open("/proc/self/maps") as maps:
        mapped = "libjemalloc" in maps.read()
    print("preload", repr(os.environ.get("LD_PRELOAD")), "mapped", mapped, "pid", os.getpid())

print("started", repr(os.environ.get("LD_PRELOAD")), "pid", os.getpid())
fake = types.ModuleType("centsync.pipelines.cli.main")
fake.entry = probe
sys.modules["centsync.pipelines.cli.main"] = fake
from centsync.pipelines.cli.console import entry
sys.argv = ["centsync", *sys.argv[1:]]
entry()
"""


def _preload_probe(*args: str, preload: str | None = None) -> list[str]:
    return _console(PRELOAD_PROBE, args, "LD_PRELOAD", preload).splitlines()


def test_refresh_all_starts_again_once_with_jemalloc_mapped() -> None:
    """`refresh --all` starts itself again (the same process) with the system's jemalloc
    preloaded, and it is mapped into the process that runs the command; any other command
    starts once, on glibc's allocator, and a user's LD_PRELOAD (an empty one included) wins."""
    from centsync.pipelines.cli.console import jemalloc

    library = jemalloc()
    if library is None:
        pytest.skip("no jemalloc on this system (Debian: apt-get install libjemalloc2)")
    first, second, probed = _preload_probe("refresh", "--all", "--json")
    assert first.startswith("started None pid ")
    assert second.startswith(f"started {library!r} pid ")
    assert probed.startswith(f"preload {library!r} mapped True pid ")
    assert first.split()[-1] == second.split()[-1] == probed.split()[-1]  # execve: one process
    once = _preload_probe("refresh")
    assert [once[0].split()[:2], once[1].split()[:4]] == [
        ["started", "None"],
        ["preload", "None", "mapped", "False"],
    ]
    kept = _preload_probe("refresh", "--all", preload="")
    assert [kept[0].split()[:2], kept[1].split()[:4]] == [
        ["started", "''"],
        ["preload", "''", "mapped", "False"],
    ]


def test_preloaded_decides_from_the_command_the_environment_and_the_library() -> None:
    from centsync.pipelines.cli.console import jemalloc, preloaded

    lib = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
    assert preloaded(["refresh", "--all"], {"A": "1"}, lib) == {"A": "1", "LD_PRELOAD": lib}
    assert preloaded(["refresh"], {}, lib) is None
    assert preloaded(["status", "--all"], {}, lib) is None
    assert preloaded(["refresh", "--all"], {}, None) is None
    assert preloaded(["refresh", "--all"], {"LD_PRELOAD": ""}, lib) is None
    assert preloaded(["refresh", "--all"], {"LD_PRELOAD": "/x/libother.so"}, lib) is None
    assert jemalloc(("/nonexistent/libjemalloc.so.2",)) is None


# The console script with a probe as the CLI: whether pydantic looked for plugins when the
# probe made a model (its loader keeps what it found once it has looked).
PYDANTIC_PROBE = r"""
import sys, types

def probe():
    import pydantic
    from pydantic.plugin import _loader

    class Model(pydantic.BaseModel):
        x: int

    print("looked", _loader._plugins is not None, Model(x=1).x)

fake = types.ModuleType("centsync.pipelines.cli.main")
fake.entry = probe
sys.modules["centsync.pipelines.cli.main"] = fake
from centsync.pipelines.cli.console import entry
sys.argv = ["centsync", *sys.argv[1:]]
entry()
"""


def test_every_command_skips_pydantics_plugin_search_unless_the_user_asks_for_it() -> None:
    """pydantic reads every installed distribution's entry points for plugins when a process
    makes its first model (11-13 ms of each command); the console script switches that off,
    and a user's `PYDANTIC_DISABLE_PLUGINS` (an empty one lets plugins load) wins."""
    name = "PYDANTIC_DISABLE_PLUGINS"
    assert _console(PYDANTIC_PROBE, ("status",), name, None).split() == ["looked", "False", "1"]
    assert _console(PYDANTIC_PROBE, ("refresh",), name, "").split() == ["looked", "True", "1"]
