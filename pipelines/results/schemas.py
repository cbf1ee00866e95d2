"""Each command's `--json` type (the result with its envelope) and its JSON Schema, as
`docs/schemas/<command>.json` holds it (generated, never written by hand)."""

from __future__ import annotations

import functools
import json
from typing import Any

from pydantic import create_model

from centsync.pipelines.results.base import Envelope, Result
from centsync.pipelines.results.runs import (
    ChangesResult,
    ImportResult,
    ReconcileResult,
    RefreshResult,
    RulesResult,
    WritebackResult,
)
from centsync.pipelines.results.standing import (
    DoctorResult,
    FailureResult,
    FleetResult,
    LakeResult,
    PlanResult,
    RejectedList,
    ScheduleResult,
    StatusResult,
)

# -------------------------------------------------------------------------- the schemas


@functools.cache
def command_json(cls: type[Result]) -> type[Result]:
    """`cls` with the CLI's envelope: the type of a command's `--json` object."""
    return create_model(cls.__name__ + "Json", __base__=(cls, Envelope))


# each command's --json type (a failure's, whatever the command, is `FailureResult`)
COMMANDS: dict[str, type[Result]] = {
    "refresh": RefreshResult,
    "reconcile": ReconcileResult,
    "writeback": WritebackResult,
    "rules": RulesResult,
    "import": ImportResult,
    "doctor": DoctorResult,
    "status": StatusResult,
    "schedule": ScheduleResult,
    "refresh-all": FleetResult,
    "refresh-plan": PlanResult,
    "lake": LakeResult,
    "writeback-rejected": RejectedList,
    "changes": ChangesResult,
}
TITLES = {
    "schedule": "centsync schedule list --json",
    "failure": "a failing command's --json",
    **{f"refresh-{o}": f"centsync refresh --{o} --json" for o in ("all", "plan")},
    "writeback-rejected": "centsync writeback --rejected --json",
}


def json_schemas() -> dict[str, dict[str, Any]]:
    """The `--json` schema of each command that has one, and of a failure's object."""
    types: dict[str, type[Result]] = {name: command_json(cls) for name, cls in COMMANDS.items()}
    types["failure"] = FailureResult
    out = {}
    for name, cls in types.items():
        schema = cls.json_schema()
        schema["title"] = TITLES.get(name, f"centsync {name} --json")
        out[name] = schema
    return out


def schema_files() -> dict[str, str]:
    """`docs/schemas/<command>.json`: each command's `--json` schema as committed (generated)."""
    return {
        command: json.dumps(schema, indent=2, sort_keys=True) + "\n"
        for command, schema in json_schemas().items()
    }
