"""Write-back: inbox files and analysts' requests into the outbox, then the outbox to the service.

intake   (intake.py) read the inbox's CSV files (inbox_csv.py) and ops.outbox_requests,
         check every row against the warehouse (transform.writeback), write each request
         with its exact body and key (or its reason) into the outbox in one transaction per
         source, then move the file to inbox/done/ or inbox/rejected/ (with a .errors.csv)
drain    (drain.py) send each pending row with its key; record the outcome before the next
confirm  (confirm.py, in a refresh) rows the refresh read back from the service become
         confirmed
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from centsync.extract import ApiClient
from centsync.pipelines.results import PlanEntry, WritebackResult
from centsync.pipelines.writeback import inbox_csv
from centsync.pipelines.writeback.drain import DrainStopped, WriteScopeMissing, drain
from centsync.pipelines.writeback.intake import intake
from centsync.pipelines.writeback.summary import WritebackOptions, plan_entry
from centsync.warehouse.outbox import STATES, Outbox, outbox_path


def inbox_path(warehouse: Path) -> Path:
    """`inbox/` beside the warehouse: the inbox when none is configured (Settings.inbox's
    default; the edge passes Settings.inbox as WritebackOptions.inbox)."""
    return Path(warehouse).absolute().parent / "inbox"


def run_writeback(
    client: ApiClient | None, warehouse: Path, options: WritebackOptions
) -> WritebackResult:
    """Intake then drain (or, dry, the plan only: nothing is written, moved or sent)."""
    warehouse = Path(warehouse)
    outbox = Outbox(outbox_path(warehouse))
    inbox = options.inbox or inbox_path(warehouse)
    summary = WritebackResult(outbox=str(outbox.path), inbox=str(inbox), dry_run=options.dry_run)
    if options.dry_run:
        _intake(outbox, warehouse, inbox, options, summary)
        summary.plan.extend(_pending_entry(row) for row in outbox.in_state("pending"))
        summary.counts = outbox.counts()
        return summary
    with outbox.draining():
        _intake(outbox, warehouse, inbox, options, summary)
        if client is not None:
            try:
                drain(client, outbox, options, summary)
            except (WriteScopeMissing, DrainStopped) as e:
                summary.stopped = str(e)
                if options.strict:
                    summary.counts = outbox.counts()
                    raise
                summary.warnings.append(str(e))
        refusals_to_errors(inbox, summary)
    summary.counts = outbox.counts()
    return summary


def refusals_to_errors(inbox: Path, summary: WritebackResult) -> None:
    """Each inbox file's rows the service refused, as the checks' rejections are: into its
    errors file (line, reason, row) and, when this run took the file in, under its header into
    `rejected/<file>` to fix and drop again; the errors file is named in each refusal."""
    folder = inbox / "rejected"
    files = {f["file"]: f for f in summary.files}
    for refused in summary.refused:
        if refused["source"] != "inbox":
            continue  # ops.outbox_requests' rows: `centsync writeback --rejected` lists them
        name = refused["source_name"]
        path = folder / f"{name}.errors.csv"
        folder.mkdir(parents=True, exist_ok=True)
        row = [refused["line"], f"refused by the service: {refused['reason']}", refused["row"]]
        inbox_csv.append_errors(path, row)
        refused["errors_file"] = str(path)
        _refused_row(folder / name, files.get(name, {}), refused["row"])


def _refused_row(target: Path, entry: dict[str, Any], text: str) -> None:
    """A refused row into `rejected/<file>` under its file's header (this run's split file, or
    a new one); left out when the header is unknown (a row queued by an earlier run) or another
    file of that name waits there."""
    done = Path(entry.get("moved_to") or "")
    if not entry.get("moved_to") or not done.is_file():
        return
    if target.exists() and entry.get("rejected_rows_file") != str(target):
        return
    header = done.read_bytes().decode("utf-8-sig", "replace").splitlines()[0]
    first = "" if target.exists() else header + "\n"
    with target.open("a", encoding="utf-8") as f:
        f.write(first + text + "\n")
    entry.setdefault("rejected_rows_file", str(target))


def _intake(
    outbox: Outbox,
    warehouse: Path,
    inbox: Path,
    options: WritebackOptions,
    summary: WritebackResult,
) -> None:
    """The inbox and the requests into the outbox as `options` say (dry: into the plan only)."""
    intake(
        outbox,
        warehouse,
        inbox,
        options.now(),
        summary,
        dry_run=options.dry_run,
        allow_future=options.allow_future,
    )


def _pending_entry(row: dict[str, Any]) -> PlanEntry:
    """The plan's line for a row already pending in the outbox (a dry run would send it)."""
    return plan_entry(
        row["source_name"],
        row["source_line"],
        row["operation"],
        "send",
        method=row["method"],
        path=row["path"],
        body=orjson.loads(row["body"]),
        reason=row["reason"],
        idempotency_key=row["idempotency_key"],
    )


__all__ = [
    "STATES",
    "DrainStopped",
    "WriteScopeMissing",
    "WritebackOptions",
    "WritebackResult",
    "inbox_path",
    "run_writeback",
]
