"""The Dagster code location: it loads, and Dagster's own tools find it from the project root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from centsync.pipelines.definitions import build
from centsync.pipelines.defs.marts import MARTS
from centsync.pipelines.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENDPOINT_ASSETS = {
    "me", "settings", "accounts", "connections", "sync_status", "transactions",
    "transactions_summary", "accounts_summary", "net_worth", "spending",
}  # fmt: skip


def test_definitions_load_with_jobs_schedules_sensor_and_check() -> None:
    defs = build(Settings())
    defs.validate_loadable(defs)
    assert {s.name for s in defs.schedules} == {  # type: ignore[union-attr]
        "hourly_hot_window",
        "nightly_fingerprints",
        "weekly_full",
    }
    assert {s.name for s in defs.sensors} == {  # type: ignore[union-attr]
        "bank_sync_finished",
        "alert_on_findings",
        "alert_on_failure",
    }
    assert defs.resolve_job_def("refresh_job") is not None
    assert defs.resolve_job_def("bank_sync_job") is not None
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    marts = {f"marts/{m}" for m in MARTS}
    assert keys == ENDPOINT_ASSETS | marts | {
        "bank_sync",
        "transactions_by_month",
        "recon/results",
        "outbox",
    }
    # the write-back runs first in a refresh, and alone in its own job (no schedule starts it)
    graph_parents = defs.resolve_asset_graph().get(dg.AssetKey("transactions")).parent_keys
    assert dg.AssetKey("outbox") in graph_parents
    writeback_job = defs.resolve_job_def("writeback_job")
    assert {n for n in writeback_job.graph.node_names()} == {"outbox"}
    assert "outbox" in defs.resolve_job_def("refresh_job").graph.node_names()
    scheduled = {s.job_name for s in defs.schedules}  # type: ignore[union-attr]
    assert "writeback_job" not in scheduled
    # lineage: endpoints -> marts -> reconciliation
    graph = defs.resolve_asset_graph()
    parents = {k.to_user_string() for k in graph.get(dg.AssetKey(["recon", "results"])).parent_keys}
    assert marts | {"spending", "accounts_summary", "net_worth", "transactions_summary"} <= parents
    spend = graph.get(dg.AssetKey(["marts", "spending_by_month_category"])).parent_keys
    assert {k.to_user_string() for k in spend} == {"transactions", "spending"}
    checks = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
    assert {(m, "reconciles_with_service") for m in marts} <= checks
    assert {"reconcile_job", "reconcile_live_job"} <= {j.name for j in defs.jobs}  # type: ignore[union-attr]


def test_root_dagster_yaml_is_the_packaged_one() -> None:
    assert (ROOT / "dagster.yaml").read_text() == (ROOT / "pipelines/dagster.yaml").read_text()


def _from_root(*cmd: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    return subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_dg_lists_the_definitions_from_the_root_with_no_flags() -> None:
    listed = _from_root(str(BIN / "dg"), "list", "defs", "--json")
    assert listed.returncode == 0, listed.stderr[-2000:]
    found = json.loads(listed.stdout)
    assert {a["asset_key"] for a in found["assets"]} >= ENDPOINT_ASSETS
    assert {s["name"] for s in found["schedules"]} == {
        "hourly_hot_window",
        "nightly_fingerprints",
        "weekly_full",
    }


def test_dagster_finds_the_code_location_from_the_root_with_no_flags() -> None:
    # `dagster dev` and `dagster definitions validate` read [tool.dg.project] from pyproject.toml
    validated = _from_root(str(BIN / "dagster"), "definitions", "validate")
    assert validated.returncode == 0, validated.stderr[-2000:]
    assert "centsync.pipelines.definitions" in validated.stdout + validated.stderr
