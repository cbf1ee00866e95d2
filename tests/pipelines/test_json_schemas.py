"""One schema per command, held to real outputs: `doctor`, `schedule list`, `reconcile` (with
its run and exit code) and `status` (times to the second)."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from centsync.pipelines.results import json_schemas

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def _valid(command: str, data: dict[str, Any]) -> None:
    schema = json_schemas()[command]
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(data, schema)


def test_reconcile_json_carries_its_run_and_exit_code(http_env: HttpEnv) -> None:
    http_env.refresh()
    code, agreed = http_env.reconcile()
    assert code == 0 and agreed["exit_code"] == 0 and agreed["run_id"]
    _valid("reconcile", agreed)
    (tid,) = http_env.sql("SELECT id FROM core.transactions ORDER BY booked_at LIMIT 1")[0]
    http_env.sql("UPDATE core.transactions SET amount = amount + 1 WHERE id = ?", [tid])
    code, differs = http_env.reconcile()
    assert code == 1 and differs["exit_code"] == 1 and differs["run_id"] != agreed["run_id"]
    _valid("reconcile", differs)


SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d([+-]\d\d:\d\d)?$")


def test_status_times_are_whole_seconds(http_env: HttpEnv) -> None:
    http_env.refresh()
    code, out = http_env.cli("status", "--json")
    assert code == 0
    info = json.loads(out)
    _valid("status", info)
    times = [
        v
        for part in ("last_refresh", "last_success", "reconciliation")
        for k, v in (info[part] or {}).items()
        if k.endswith("_at") and v is not None
    ]
    assert times and all(SECONDS.match(t) for t in times), times


def test_status_of_a_refresh_that_recorded_no_counts_prints_no_none() -> None:
    import click
    from click.testing import CliRunner

    from centsync.pipelines.cli import render
    from centsync.pipelines.results import StatusResult

    last = {"status": "failed", "mode": "full", "started_at": "2026-11-25T00:00:00+00:00"}
    last |= {"seconds": None, "requests_total": None, "rows_changed": None, "error": "boom"}
    empty = dict.fromkeys(("source", "last_success", "synced_range", "verification", "outbox"))
    info = StatusResult.model_validate(
        {"warehouse": "w", "size_mb": 0, "last_refresh": last, "tables": {}, "warnings": []}
        | empty
        | {"reconciliation": None}
    )

    @click.command()
    def show() -> None:
        render._status_history(info)

    out = CliRunner().invoke(show).output
    assert out.startswith("Last refresh: failed full at 2026-11-25T00:00:00+00:00; error: boom")
    assert "None" not in out
