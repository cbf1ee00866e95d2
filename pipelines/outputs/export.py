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

import polars as pl

from centsync.transform.contract import Outcome
from centsync.transform.spending import merchant_key
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


def category_names(path: Path) -> dict[str, str]:
    """The names a person gave categories (the service lists none for income and transfer
    categories): the `[categories]` table of the TOML file at `path`, a category's id (or its
    first 8 or more characters) = its name. Absent file: none. A bad file: a usage error."""
    import tomllib

    if not path.exists():
        return {}
    try:
        doc = tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise AnalystUsageError(f"the category names file {path} is not valid TOML ({e})") from None
    table = doc.get("categories", {})
    if not isinstance(table, dict):
        table = {"[categories]": None}  # not a table: said as what to fix
    bad = [k for k, v in table.items() if len(k) < 8 or not isinstance(v, str) or not v.strip()]
    if bad:
        raise AnalystUsageError(
            f"the category names file {path}: each line of [categories] is a category's id (or "
            f'its first 8 characters) = "its name"; fix {", ".join(map(repr, bad)) or "it"}'
        )
    return {k.lower(): v.strip() for k, v in table.items()}


def given_name(category_id: str, given: dict[str, str]) -> str | None:
    """The name a person gave the category: by its id, or the longest prefix of it given."""
    found = [k for k in given if category_id.lower().startswith(k)]
    return given[max(found, key=len)] if found else None


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
    guard: Callable[[list[str]], None] | None = None,
    given: dict[str, str] | None = None,
) -> Manifest:
    """Write every chosen table and view of marts, core and recon to `out/<schema>.<name>.<fmt>`,
    then `out/manifest.json`; each file appears whole (written aside, then renamed). `guard`
    is given the files' names first (it raises to refuse the folder: pipelines/kept.py);
    `given`: the names a person gave categories (`category_names`), for a CSV's names."""
    if fmt not in FORMATS:
        raise AnalystUsageError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if out.exists() and not out.is_dir():
        raise AnalystUsageError(f"--out {out} is a file: give a folder for a {fmt} export")
    con = connect_readonly(warehouse)
    try:
        chosen = choose(analysis.analyst_relations(con, SCHEMAS), requested or [])
        refresh_id = analysis.latest_refresh_id(con)
        recon = reads.latest_reconciliation(con)
        if guard is not None:
            guard([*(f"{r.qualified}.{fmt}" for r in chosen), MANIFEST])
        out.mkdir(parents=True, exist_ok=True)
        tables = [_export_one(con, r, out, fmt, since, refresh_id, given) for r in chosen]
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
    given: dict[str, str] | None = None,
) -> ExportedTable:
    """One relation to its file, with its comments as Parquet key-value metadata."""
    name = f"{relation.qualified}.{fmt}"
    where = since_filter(relation, since)
    metadata = {META_TABLE: relation.qualified, META_COMMENT: relation.comment or ""}
    metadata[META_REFRESH] = refresh_id or ""
    metadata |= {META_COLUMN + c.name: c.comment or "" for c in relation.columns}
    aside = out / f".{name}.partial"
    reshape = _with_names(con, given) if (fmt == "csv" and relation.qualified in NAMED) else None
    rows = analysis.copy_relation(
        con, relation, str(aside), fmt, where=where, metadata=metadata, reshape=reshape
    )
    os.replace(aside, out / name)
    return ExportedTable(
        table=relation.qualified,
        kind=relation.kind,
        file=name,
        rows=rows,
        since_column=where[0] if where else None,
        comment=relation.comment,
        columns=_beside(
            [
                # UUIDs are written as text (copy_relation); the manifest says what is in the file
                {
                    "name": c.name,
                    "type": "VARCHAR" if c.type == "UUID" else c.type,
                    "comment": c.comment,
                }
                for c in relation.columns
            ],
            named=reshape is not None,
        ),
    )


def _beside(columns: list[dict[str, Any]], *, named: bool) -> list[dict[str, Any]]:
    """The manifest's columns in the file's order: with names, each after its id (BESIDE)."""
    if not named:
        return columns
    extra = {c["name"]: c for c in NAMED_COLUMNS}
    return [x for c in columns for x in (c, extra.get(BESIDE.get(c["name"], ""))) if x]


# A CSV of transactions is read by a person (a spreadsheet): the names beside the ids
# (issue 44). Parquet keeps the table as it is, for tools that join on the ids.
NAMED = {"core.transactions"}
BESIDE = {"account_id": "account_name", "category_id": "category_name", "concept": "merchant"}
NAMED_COLUMNS: list[dict[str, str | None]] = [
    {"name": "account_name", "type": "VARCHAR", "comment": "The account's name (core.accounts)."},
    {
        "name": "category_name",
        "type": "VARCHAR",
        "comment": "The category's name: the one given in the category names file "
        "(CENTSYNC_CATEGORY_NAMES), else core.categories'; empty where neither has one (the "
        "service lists none for income and transfer categories).",
    },
    {
        "name": "merchant",
        "type": "VARCHAR",
        "comment": "The merchant: the concept trimmed, lower-cased, whitespace collapsed (the "
        "key of marts.spending_by_month_merchant).",
    },
]


def _with_names(con: Any, given: dict[str, str] | None) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """Transactions with account_name after account_id, category_name after category_id (the
    name a person gave it first: `category_names`) and merchant after concept."""
    accounts, categories = analysis.id_names(con)
    if given:
        ids = con.sql("SELECT DISTINCT category_id::VARCHAR FROM core.transactions").fetchall()
        mine = {i: n for (i,) in ids if i and (n := given_name(i, given))}
        serviced = dict(zip(categories["category_id"], categories["category_name"], strict=True))
        categories = pl.DataFrame(
            {
                "category_id": list(serviced | mine),
                "category_name": list((serviced | mine).values()),
            },
            schema={"category_id": pl.String, "category_name": pl.String},
        )

    def reshape(frame: pl.DataFrame) -> pl.DataFrame:
        named = (
            frame.join(accounts, on="account_id", how="left", maintain_order="left")
            .join(categories, on="category_id", how="left", maintain_order="left")
            .with_columns(merchant=merchant_key(pl.col("concept")))
        )
        after = {
            "account_id": "account_name",
            "category_id": "category_name",
            "concept": "merchant",
        }
        order = [x for c in frame.columns for x in (c, after.get(c)) if x is not None]
        return named.select(order)

    return reshape


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
