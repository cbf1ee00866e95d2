"""Every centsync job is bound to `NoValues`, the IO manager that stores nothing: its steps
record their results as metadata, and Dagster's default IO manager (which imports UPath and
fsspec when a run starts) is not made."""

import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from centsync.pipelines.definitions import build
from centsync.pipelines.defs.resources import IO_DESCRIPTION, NoValues, resources
from centsync.pipelines.fleet import definitions as fleet


def test_a_cli_run_imports_no_upath_or_fsspec(tmp_path: Path) -> None:
    """A job run as the CLI runs one (`runner.execute`, the write-back job with nothing to
    send), in a fresh process, succeeds without importing UPath or fsspec: with Dagster's
    default IO manager it imported both when the run started."""
    code = (
        "import sys\n"
        "from centsync.pipelines.settings import Settings\n"
        "from centsync.pipelines.cli import runner\n"
        "run = runner.execute(Settings.from_env(), 'writeback_job')\n"
        "assert run.success\n"
        "print(sorted(m for m in ('upath', 'fsspec') if m in sys.modules))\n"
    )
    env = {
        "CENTSYNC_WAREHOUSE": str(tmp_path / "w.duckdb"),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "CENTSYNC_API_BASE_URL": "http://127.0.0.1:9",
        "CENTSYNC_API_KEY": "pfd_live_" + "x" * 40,
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_every_job_of_both_code_locations_stores_nothing() -> None:
    """Both code locations bind `io_manager` to `NoValues`, and every output of every job is
    one `NoValues` accepts: Nothing, or an asset's result or check (which Dagster records as
    events, never handing them to an IO manager)."""
    ops = 0
    for defs in (build(), fleet.build()):
        repo = defs.get_repository_def()
        assets = {a.op.name for a in repo.assets_defs_by_key.values()}
        for job in repo.get_all_jobs():
            manager = job.resource_defs["io_manager"]
            assert isinstance(manager, dg.IOManagerDefinition)
            assert manager.description == IO_DESCRIPTION, job.name
            for node in job.all_node_defs:
                for out in node.output_defs:
                    assert out.io_manager_key == "io_manager"
                    if node.name in assets:
                        continue
                    ops += 1  # a plain op's output that is not Nothing would reach NoValues
                    assert out.dagster_type.is_nothing, (
                        f"{job.name}: op {node.name} returns {out.dagster_type.display_name}"
                    )
    assert ops == 3  # reconcile_offline, reconcile_live, maintain_lake


def test_a_step_that_returns_a_value_fails_naming_itself() -> None:
    """A value returned by an op is refused by name (not pickled where nothing reads it); the
    assets' MaterializeResult and None pass."""

    @dg.op
    def hands_on() -> int:
        return 7

    @dg.op
    def records(context: dg.OpExecutionContext) -> None:
        context.log.info("recorded")

    @dg.asset
    def materialised() -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"rows": 1})

    io = {"io_manager": resources()["io_manager"]}

    @dg.job(resource_defs=io)
    def refused() -> None:
        hands_on()

    @dg.job(resource_defs=io)
    def fine() -> None:
        records()

    run = refused.execute_in_process(raise_on_error=False)
    assert not run.success
    failure = next(e for e in run.all_events if e.is_step_failure)
    message = failure.step_failure_data.error.to_string()  # type: ignore[union-attr]
    assert "'hands_on' returned a value (int)" in message and "return None" in message
    assert fine.execute_in_process().success
    assert dg.materialize([materialised], resources=io).success


def test_an_input_asked_of_it_is_refused() -> None:
    with pytest.raises(dg.DagsterInvariantViolationError, match="hand none on"):
        NoValues().load_input(dg.build_input_context(name="ledger"))
