"""`centsync export`: the marts, `core` and `recon` as Parquet or CSV files in a folder, with
the warehouse's comments carried over and a manifest (CLI-free: the command only prints)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Callable
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from centsync.transform.contract import Outcome
from centsync.warehouse import analysis, connect_readonly, reads

SCHEMAS = ("marts", "core", "recon", "history")
FORMATS = ("parquet", "csv")
MANIFEST = "manifest.json"
# `--since` filters each table on the first of these columns it has; a table with none of them
# (accounts, categories, settings...) describes the present and is exported whole. A month
# column keeps the month `since` falls in.
SINCE_COLUMNS = ("booked_at", "month", "date", "to_date", "snapshot_at", "ran_at")
# Parquet key-value metadata keys: the table, its comment, the refresh, one per column comment
META_TABLE, META_COMMENT, META_REFRESH = "centsync.table", "centsync.comment", "centsync.refresh_id"
META_COLUMN = "centsync.column."


class AnalystUsageError(ValueError):
    """An analyst's request that cannot be run as given (a bad name, date or query): exit 2."""

    outcome: ClassVar[Outcome] = Outcome.USAGE
    headline: ClassVar[str] = "the request cannot be run as given"
    what_to_do: ClassVar[str] = "fix it as the message says and run again."


class QueryError(AnalystUsageError):
    """DuckDB refused an analyst's query (syntax, an unknown name, a write on a read-only file)."""

    headline = "the query failed"
    what_to_do = (
        "fix the query; the warehouse is read only, and docs/data-dictionary.md lists every "
        "table and column."
    )


def parse_since(text: str) -> dt.date:
    """`--since`: a day (2026-01-31) or a month (2026-01, its first day)."""
    try:
        if re.fullmatch(r"\d{4}-\d{2}", text):
            return dt.date.fromisoformat(text + "-01")
        return dt.date.fromisoformat(text)
    except ValueError:
        raise AnalystUsageError(
            f"--since {text!r} is not a date: give a day (2026-01-31) or a month (2026-01)"
        ) from None


def choose(relations: list[analysis.Relation], requested: list[str]) -> list[analysis.Relation]:
    """The relations `requested` names (`marts`, `core.accounts`...), in the catalogue's order;
    all of them when nothing is requested. An unknown name is a usage error listing the known."""
    if not requested:
        return relations
    known = {r.qualified for r in relations} | {r.schema for r in relations}
    unknown = [name for name in requested if name not in known]
    if unknown:
        raise AnalystUsageError(
            f"--tables: no {', '.join(unknown)} in the warehouse; choose among "
            f"{', '.join(SCHEMAS)} or {', '.join(r.qualified for r in relations)}"
        )
    wanted = set(requested)
    return [r for r in relations if r.qualified in wanted or r.schema in wanted]


def since_filter(relation: analysis.Relation, since: dt.date | None) -> tuple[str, dt.date] | None:
    """(column, lowest value) that `since` keeps rows of this relation by, else None (whole)."""
    if since is None:
        return None
    names = {c.name for c in relation.columns}
    for column in SINCE_COLUMNS:
        if column in names:
            return column, since.replace(day=1) if column == "month" else since
    return None


@dataclass(frozen=True)
class ExportedTable:
    """One file of an export, as the manifest lists it."""

    table: str
    kind: str
    file: str
    rows: int
    since_column: str | None
    comment: str | None
    columns: list[dict[str, str | None]]


@dataclass(frozen=True)
class Manifest:
    """What an export wrote: `manifest.json`, the last file written."""

    format: str
    warehouse: str
    refresh_id: str | None
    reconciliation: dict[str, Any] | None
    since: str | None
    exported_at: str
    tables: list[ExportedTable] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def export_tables(
    warehouse: Path,
    out: Path,
    fmt: str,
    requested: list[str] | None = None,
    since: dt.date | None = None,
) -> Manifest:
    """Write every chosen table and view of marts, core and recon to `out/<schema>.<name>.<fmt>`,
    then `out/manifest.json`; each file appears whole (written aside, then renamed)."""
    if fmt not in FORMATS:
        raise AnalystUsageError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if out.exists() and not out.is_dir():
        raise AnalystUsageError(f"--out {out} is a file: give a folder for a {fmt} export")
    con = connect_readonly(warehouse)
    try:
        chosen = choose(analysis.analyst_relations(con, SCHEMAS), requested or [])
        refresh_id = analysis.latest_refresh_id(con)
        recon = reads.latest_reconciliation(con)
        out.mkdir(parents=True, exist_ok=True)
        tables = [_export_one(con, r, out, fmt, since, refresh_id) for r in chosen]
    finally:
        con.close()
    manifest = Manifest(
        format=fmt,
        warehouse=str(warehouse),
        refresh_id=refresh_id,
        reconciliation=(
            {"recon_id": recon["recon_id"], "verdict": recon["verdict"]} if recon else None
        ),
        since=since.isoformat() if since else None,
        exported_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        tables=tables,
    )
    manifest_text = json.dumps(manifest.to_json(), indent=2) + "\n"
    write_whole(out / MANIFEST, lambda aside: aside.write_text(manifest_text, "utf-8"))
    return manifest


def _export_one(
    con: Any,
    relation: analysis.Relation,
    out: Path,
    fmt: str,
    since: dt.date | None,
    refresh_id: str | None,
) -> ExportedTable:
    """One relation to its file, with its comments as Parquet key-value metadata."""
    name = f"{relation.qualified}.{fmt}"
    where = since_filter(relation, since)
    metadata = {META_TABLE: relation.qualified, META_COMMENT: relation.comment or ""}
    metadata[META_REFRESH] = refresh_id or ""
    metadata |= {META_COLUMN + c.name: c.comment or "" for c in relation.columns}
    aside = out / f".{name}.partial"
    rows = analysis.copy_relation(con, relation, str(aside), fmt, where=where, metadata=metadata)
    os.replace(aside, out / name)
    return ExportedTable(
        table=relation.qualified,
        kind=relation.kind,
        file=name,
        rows=rows,
        since_column=where[0] if where else None,
        comment=relation.comment,
        columns=[
            # UUIDs are written as text (copy_relation), and the manifest says what is in the file
            {
                "name": c.name,
                "type": "VARCHAR" if c.type == "UUID" else c.type,
                "comment": c.comment,
            }
            for c in relation.columns
        ],
    )


def write_whole(target: Path, write: Callable[[Path], object]) -> None:
    """Write `target` whole: `write` fills a file beside it, renamed over it only once complete
    (a reader never sees half a file; a failed write leaves the old one and no partial)."""
    aside = target.with_name(f".{target.name}.partial")
    try:
        write(aside)
        os.replace(aside, target)
    finally:
        with suppress(FileNotFoundError):
            aside.unlink()
