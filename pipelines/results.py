"""What a run returns across the Dagster boundary: one typed object per command.

The asset (or op) that does the work records its result as one JSON metadata entry, `RESULT_KEY`,
serialized by the object (`to_json`); the CLI finds that entry in the run's events, rebuilds the
object (`from_json`) and renders it. `json_schema()` is the schema of the command's `--json`
object (tests validate real outputs against it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
        )

    def to_json(self) -> dict[str, Any]:
        """The object as recorded in the run (and printed by `reconcile --json`)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReconcileResult:
        """The object back from what `to_json` recorded."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

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
            ],
            "properties": {
                "verdict": {"enum": ["agree", "explained", "differ"]},
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
