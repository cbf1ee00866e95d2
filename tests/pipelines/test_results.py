"""The typed boundary: each command's `--json` object matches its schema, and the settings that
reach a run as a resource (the API key) never land in the instance's records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from centsync.pipelines.results import (
    ReconcileResult,
    RefreshResult,
    WritebackResult,
    json_schemas,
)

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def _valid(command: str, data: dict[str, Any]) -> None:
    schema = json_schemas()[command]
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(data, schema)


def test_every_json_output_matches_its_schema_and_the_key_stays_out(http_env: HttpEnv) -> None:
    refreshed = http_env.refresh()
    _valid("refresh", refreshed)
    assert RefreshResult.from_json({"report": refreshed}).verdict == refreshed["verdict"]

    code, reconciled = http_env.reconcile()
    assert code == 0
    _valid("reconcile", reconciled)
    assert ReconcileResult.from_json(reconciled).recon_id == reconciled["recon_id"]

    code, out = http_env.cli("writeback", "--dry-run", "--json")
    written = json.loads(out.strip().splitlines()[-1])
    assert code == 0
    _valid("writeback", written)
    assert WritebackResult.from_json(written).dry_run

    code, out = http_env.cli("status", "--json")
    assert code == 0
    _valid("status", json.loads(out))

    key = http_env.env["CENTSYNC_API_KEY"].encode()
    home = Path(http_env.env["DAGSTER_HOME"])
    holding = [p for p in home.rglob("*") if p.is_file() and key in p.read_bytes()]
    assert not holding, holding  # not in the run config, the event log or the logs


def test_a_result_survives_its_round_trip() -> None:
    result = WritebackResult(files=[], plan=[], sent=2, rejected=1, counts={"sent": 2})
    assert WritebackResult.from_json(json.loads(json.dumps(result.to_json()))) == result
    assert result.bad == 1


def test_the_committed_json_schemas_are_what_centsync_docs_generates() -> None:
    from pathlib import Path

    from centsync.pipelines.results import schema_files

    folder = Path(__file__).resolve().parents[2] / "docs" / "schemas"
    files = schema_files()
    assert set(files) == {"refresh", "reconcile", "writeback", "status", "doctor", "schedule"}
    assert {p.stem for p in folder.glob("*.json")} == set(files)
    for command, text in files.items():
        assert (folder / f"{command}.json").read_text("utf-8") == text, "run `centsync docs`"
