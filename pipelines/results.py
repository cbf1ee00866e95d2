"""What a run returns across the Dagster boundary: one typed object per command.

The asset (or op) that does the work records its result as one JSON metadata entry, `RESULT_KEY`,
serialized by the object (`to_json`); the CLI finds that entry in the run's events, rebuilds the
object (`from_json`) and renders it. `json_schema()` is the schema of the command's `--json`
object (tests validate real outputs against it).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from centsync.pipelines.writeback.summary import WritebackSummary

if TYPE_CHECKING:
    from centsync.pipelines.reconcile import Outcome

# the one metadata entry a result travels in
RESULT_KEY = "centsync/result"

_DIFFERENCE = {
    "type": "object",
    "required": ["check", "scope", "status", "local_cents", "server_cents", "difference_cents"],
    "properties": {
        "check": {"type": "string"},
        "scope": {"type": ["string", "null"]},
        "status": {"enum": ["agree", "explained", "differ"]},
        "local_cents": {"type": ["integer", "null"]},
        "server_cents": {"type": ["integer", "null"]},
        "difference_cents": {"type": ["integer", "null"]},
    },
}
_ROW_DIFFERENCE = {
    "type": "object",
    "required": ["entity", "id", "kind", "month", "fields", "local", "server", "source"],
}


def _own_fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The entries of `data` that are fields of the dataclass `cls` (a recorded object may
    carry keys the boundary added, such as `exit_code`)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True)
class ReconcileResult:
    """One reconciliation (`centsync reconcile`): its verdict, its counts, its differences."""

    verdict: str
    refresh_id: str | None
    recon_id: str
    source: str
    checked: int
    agree: int
    explained: int
    differ: int
    # the comparisons that do not agree, unexplained first, narrowest scope first
    differences: list[dict[str, Any]]
    # the rows behind them, by month then id
    row_differences: list[dict[str, Any]]
    # checks whose service side could not be read (issue 42): listed, never counted as agreeing
    unavailable: int = 0

    @classmethod
    def from_outcome(cls, outcome: Outcome) -> ReconcileResult:
        """The result of a reconciliation `pipelines/reconcile.py` ran."""
        data = outcome.as_json()
        rows = sorted(
            data["row_differences"],
            key=lambda r: (r["month"] is None, r["month"] or "", r["id"] or ""),
        )
        return cls(
            verdict=data["verdict"],
            refresh_id=data["refresh_id"],
            recon_id=data["recon_id"],
            source=data["source"],
            checked=data["checked"],
            agree=data["agree"],
            explained=data["explained"],
            differ=data["differ"],
            differences=data["differences"],
            row_differences=rows,
            unavailable=data.get("unavailable", 0),
        )

    def to_json(self) -> dict[str, Any]:
        """The object as recorded in the run (and printed by `reconcile --json`)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReconcileResult:
        """The object back from what `to_json` recorded."""
        return cls(**_own_fields(cls, data))

    @staticmethod
    def json_schema() -> dict[str, Any]:
        """The schema of `centsync reconcile --json`."""
        counts = {k: {"type": "integer", "minimum": 0} for k in ("checked", "explained", "differ")}
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "centsync reconcile --json",
            "type": "object",
            "required": [
                "verdict",
                "refresh_id",
                "recon_id",
                "source",
                "checked",
                "explained",
                "differ",
                "seconds",
                "differences",
                "row_differences",
                "run_id",
                "exit_code",
            ],
            "properties": {
                "verdict": {"enum": ["agree", "explained", "differ"]},
                "run_id": {"type": "string"},
                "exit_code": {"enum": [0, 1]},
                "refresh_id": {"type": ["string", "null"]},
                "recon_id": {"type": "string"},
                "source": {"enum": ["refresh", "offline", "live"]},
                **counts,
                "agree": {"type": "integer", "minimum": 0},
                "seconds": {"type": "number", "minimum": 0},
                "differences": {"type": "array", "items": _DIFFERENCE},
                "row_differences": {"type": "array", "items": _ROW_DIFFERENCE},
            },
        }


@dataclass
class WritebackResult(WritebackSummary):
    """One write-back (`centsync writeback`, and the first step of every refresh): the
    write-back's own summary, with what it needs to cross the Dagster boundary."""

    @property
    def bad(self) -> int:
        """Rows rejected (by the checks or the service) or needing attention: exit 7."""
        return self.rejected + self.rejected_by_service + self.needs_attention + self.conflicts

    def to_json(self) -> dict[str, Any]:
        """The object as recorded in the run (the core of `writeback --json`)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WritebackResult:
        """The object back from what `to_json` (or `WritebackSummary.report`) made."""
        return cls(**_own_fields(cls, data))

    @staticmethod
    def json_schema() -> dict[str, Any]:
        """The schema of `centsync writeback --json`."""
        counts: tuple[str, ...] = ("queued", "duplicates", "rejected", "conflicts", "sent")
        counts += ("replayed", "found_by_lookup", "rejected_by_service", "needs_attention")
        counts += ("confirmed",)
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "centsync writeback --json",
            "type": "object",
            "required": ["files", "plan", *counts, "counts", "outbox", "dry_run", "exit_code"],
            "properties": {
                **{k: {"type": "integer", "minimum": 0} for k in counts},
                "files": {"type": "array", "items": {"type": "object"}},
                "plan": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["source", "line", "operation", "action"],
                    },
                },
                "warnings": {"type": "array", "items": {"type": "string"}},
                "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                "outbox": {"type": "string"},
                "dry_run": {"type": "boolean"},
                "run_id": {"type": "string"},
                "exit_code": {"enum": [0, 7]},
            },
        }


@dataclass(frozen=True)
class RefreshResult:
    """One refresh (`centsync refresh`): `RefreshSummary.report()`, the documented core of
    `refresh --json`, read through typed properties, and the HTML report's path if written."""

    report: dict[str, Any]
    report_path: str | None = None

    @property
    def verdict(self) -> str | None:
        return self.report["verdict"]

    @property
    def rejected(self) -> int:
        return int(self.report["rows"]["rejected"])

    @property
    def reconciliation(self) -> dict[str, Any]:
        """recon_id, checked, explained, differ and the differences, narrowest first."""
        return self.report["reconciliation"]

    @property
    def mode(self) -> str:
        """The mode and why (`auto (fingerprints)`)."""
        return f"{self.report['mode']} ({self.report['reason']})"

    def to_json(self) -> dict[str, Any]:
        return {"report": self.report, "report_path": self.report_path}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RefreshResult:
        return cls(report=data["report"], report_path=data.get("report_path"))

    @staticmethod
    def json_schema() -> dict[str, Any]:
        """The schema of `centsync refresh --json`."""
        count = {"type": "integer", "minimum": 0}
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "centsync refresh --json",
            "type": "object",
            "required": [
                "status",
                "mode",
                "reason",
                "refresh_id",
                "source",
                "rows",
                "requests",
                "months_checked",
                "months_reread",
                "verification",
                "rereads",
                "durations",
                "verdict",
                "reconciliation",
                "outbox",
                "warnings",
                "key_expires_at",
                "backup",
                "run_id",
                "warehouse",
                "exit_code",
            ],
            "properties": {
                "status": {"enum": ["ok", "rejected", "differ"]},
                "mode": {"enum": ["auto", "full", "hot"]},
                "reason": {"type": "string"},
                "refresh_id": {"type": "string"},
                "source": {"type": "object", "required": ["base_url", "owner"]},
                "rows": {
                    "type": "object",
                    "required": ["total", "changed", "rejected", "landed"],
                    "properties": {k: count for k in ("total", "changed", "rejected", "landed")},
                },
                "requests": {
                    "type": "object",
                    "required": ["total", "floor", "retries", "by_endpoint"],
                    "properties": {
                        **{k: count for k in ("total", "floor", "retries")},
                        "by_endpoint": {"type": "object", "additionalProperties": count},
                    },
                },
                "months_checked": count,
                "months_reread": {"type": "array", "items": {"type": "object"}},
                "verification": {"type": "object", "required": ["months", "oldest_verified"]},
                "rereads": count,
                "durations": {
                    "type": "object",
                    "required": ["refresh_seconds", "reconcile_seconds", "total_seconds"],
                },
                "verdict": {"enum": ["agree", "explained", "differ", None]},
                "reconciliation": {
                    "type": "object",
                    "required": ["recon_id", "checked", "explained", "differ", "differences"],
                    "properties": {"differences": {"type": "array", "items": _DIFFERENCE}},
                },
                "outbox": {"type": "object", "required": ["confirmed", "states"]},
                "warnings": {"type": "array", "items": {"type": "string"}},
                "run_id": {"type": "string"},
                "warehouse": {"type": "string"},
                "writeback": {"type": "object"},
                "report_path": {"type": "string"},
                "exit_code": {"enum": [0, 1, 7]},
            },
        }


def status_json_schema() -> dict[str, Any]:
    """The schema of `centsync status --json` (its object is `outputs.status.read_status`'s)."""
    nullable_object = {"type": ["object", "null"]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "centsync status --json",
        "type": "object",
        "required": [
            "warehouse",
            "size_mb",
            "source",
            "last_refresh",
            "last_success",
            "synced_range",
            "verification",
            "tables",
            "reconciliation",
            "outbox",
            "warnings",
        ],
        "properties": {
            "warehouse": {"type": "string"},
            "size_mb": {"type": "number", "minimum": 0},
            "source": {"type": "object", "required": ["base_url", "account_id"]},
            "last_refresh": nullable_object,
            "last_success": nullable_object,
            "synced_range": nullable_object,
            "verification": nullable_object,
            "tables": {"type": "object", "additionalProperties": {"type": "integer"}},
            "reconciliation": nullable_object,
            "outbox": nullable_object,
            "warnings": {"type": "array", "items": {"type": "string"}},
        },
    }


def doctor_json_schema() -> dict[str, Any]:
    """The schema of `centsync doctor --json` (its object is `cli/doctor.py`'s)."""
    check = {
        "type": "object",
        "required": ["name", "status", "value", "detail", "exit_code"],
        "properties": {
            "name": {"type": "string"},
            "status": {"enum": ["ok", "warn", "fail"]},
            "value": {"type": "string"},
            "detail": {"type": "string"},
            "exit_code": {"enum": [0, 2, 3, 4, 5, 6]},
        },
    }
    setting = {
        "type": "object",
        "required": ["env", "value"],
        "properties": {"env": {"type": "string"}, "value": {"type": "string"}},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "centsync doctor --json",
        "type": "object",
        "required": ["status", "exit_code", "checks", "settings"],
        "properties": {
            "status": {"enum": ["ok", "problem"]},
            "exit_code": {"enum": [0, 2, 3, 4, 5, 6]},
            "checks": {"type": "array", "items": check, "minItems": 1},
            "settings": {"type": "array", "items": setting},
        },
    }


def schedule_json_schema() -> dict[str, Any]:
    """The schema of `centsync schedule list --json` (its object is `cli/schedule.py`'s)."""
    entry = {
        "type": "object",
        "required": ["name", "on", "cron", "description"],
        "properties": {
            "name": {"enum": ["hourly_hot_window", "nightly_fingerprints", "weekly_full"]},
            "on": {"type": "boolean"},
            "cron": {"type": "string"},
            "description": {"type": ["string", "null"]},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "centsync schedule list --json",
        "type": "object",
        "required": ["dagster_home", "schedules", "daemon_running"],
        "properties": {
            "dagster_home": {"type": "string"},
            "schedules": {"type": "array", "items": entry},
            "daemon_running": {"type": "boolean"},
        },
    }


# every command's --json schema, by command (docs and tests read them here)
def json_schemas() -> dict[str, dict[str, Any]]:
    """The `--json` schema of each command that has one."""
    return {
        "refresh": RefreshResult.json_schema(),
        "reconcile": ReconcileResult.json_schema(),
        "writeback": WritebackResult.json_schema(),
        "status": status_json_schema(),
        "doctor": doctor_json_schema(),
        "schedule": schedule_json_schema(),
    }


def schema_files() -> dict[str, str]:
    """`docs/schemas/<command>.json`: each command's `--json` schema as committed (generated)."""
    return {
        command: json.dumps(schema, indent=2, sort_keys=True) + "\n"
        for command, schema in json_schemas().items()
    }
