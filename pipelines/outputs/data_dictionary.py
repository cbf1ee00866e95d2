"""The data dictionary, generated from the warehouse itself: every schema, table, view and
column's comment in a freshly migrated warehouse, under the human prose of a template."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

import duckdb
import jinja2

from centsync.warehouse import current_version, history, migrate, reads

# The schemas an analyst sees (DuckDB's own are not listed).
INTERNAL_SCHEMAS = ("main", "information_schema", "pg_catalog")
# Shown in the dictionary and in docs/analysts.md; each runs on the demo warehouse
# (tests/pipelines/test_notebooks.py).
EXAMPLE_QUERIES: list[tuple[str, str]] = [
    (
        "Where the money went: spending by category over the last 12 months",
        "SELECT category_name, -amount_cents / 100.0 AS spent, transactions\n"
        "FROM marts.spending_last_12_months ORDER BY amount_cents LIMIT 10;",
    ),
    (
        "Spending per month, the service's rule (refunds included)",
        "SELECT strftime(month, '%Y-%m') AS month, -amount_cents / 100.0 AS spent\n"
        "FROM marts.spending_by_month ORDER BY month DESC LIMIT 12;",
    ),
    (
        "Top merchants this year",
        "SELECT merchant, -sum(amount_cents) / 100.0 AS spent, sum(transactions) AS n\n"
        "FROM marts.spending_by_month_merchant\n"
        "WHERE month >= date_trunc('year', (SELECT max(month) FROM marts.spending_by_month_merchant))\n"
        "GROUP BY merchant ORDER BY spent DESC LIMIT 10;",
    ),
    (
        "Net worth on the first of each month",
        "SELECT date, assets_cents / 100.0 AS assets, liabilities_cents / 100.0 AS liabilities,\n"
        "       net_worth_cents / 100.0 AS net_worth\n"
        "FROM marts.net_worth_daily WHERE day(date) = 1 ORDER BY date DESC LIMIT 12;",
    ),
    (
        "Accounts now, by type: assets against liabilities",
        "SELECT account_type, side, count(*) AS accounts, sum(balance_cents) / 100.0 AS balance\n"
        "FROM marts.accounts_current GROUP BY ALL ORDER BY balance DESC;",
    ),
    (
        "Does the warehouse match the app? The latest verdict, then what differs",
        "SELECT verdict, checked, explained, differ FROM recon.latest_run;\n"
        'SELECT "check", scope, difference_cents, status, explanation FROM recon.latest_differences;',
    ),
]

_TYPE_NAMES = {"TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ"}


@dataclass
class Column:
    name: str
    type: str
    comment: str


@dataclass
class Table:
    name: str
    kind: str  # "table" or "view"
    comment: str
    columns: list[Column] = field(default_factory=list)


@dataclass
class Schema:
    name: str
    comment: str
    tables: list[Table] = field(default_factory=list)


def _cell(text: str | None) -> str:
    """A comment as one Markdown table cell (no pipes or line breaks to break the row)."""
    return " ".join((text or "").split()).replace("|", "\\|")


def describe(con: duckdb.DuckDBPyConnection) -> list[Schema]:
    """Every schema, table, view and column an analyst sees, with its comment, in the
    dictionary's order (ops.schemas' order, then any other schema by name)."""
    names = reads.catalogue_schemas(con, INTERNAL_SCHEMAS)
    described = reads.schema_descriptions(con)
    names.sort(key=lambda n: (described.get(n, (10_000, ""))[0], n))
    relations = reads.catalogue_relations(con)
    columns = reads.catalogue_columns(con)
    by_table: dict[tuple[str, str], list[Column]] = {}
    for s, t, c, typ, comment in columns:
        by_table.setdefault((s, t), []).append(Column(c, _TYPE_NAMES.get(typ, typ), _cell(comment)))
    schemas = {n: Schema(n, _cell(described.get(n, (0, ""))[1])) for n in names}
    for s, t, kind, comment in relations:
        if s in schemas:
            schemas[s].tables.append(
                Table(f"{s}.{t}", kind, _cell(comment), by_table.get((s, t), []))
            )
    return [schemas[n] for n in names]


def fresh() -> duckdb.DuckDBPyConnection:
    """An empty warehouse in memory with every migration applied: what the dictionary documents."""
    con = duckdb.connect()
    migrate(con)
    return con


@cache
def _template() -> jinja2.Template:
    text = (
        resources.files("centsync.pipelines.outputs")
        .joinpath("templates/data-dictionary.md.j2")
        .read_text("utf-8")
    )
    env = jinja2.Environment(
        autoescape=False,  # Markdown, from our own comments
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.from_string(text)


def render(con: duckdb.DuckDBPyConnection | None = None) -> str:
    """The data dictionary (Markdown) of `con`, else of a freshly migrated warehouse."""
    own = con is None
    con = con or fresh()
    try:
        examples = "\n\n".join(f"-- {title}\n{sql}" for title, sql in EXAMPLE_QUERIES)
        return _template().render(
            schemas=describe(con),
            version=current_version(con),
            examples=examples,
            macros=[(name, _cell(comment)) for name, comment, _ in history.table_macros(con)],
        )
    finally:
        if own:
            con.close()


def repository_file(*parts: str) -> Path | None:
    """A file of the source checkout this package runs from (None from an installed wheel)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        return None
    return root.joinpath(*parts)


def undocumented(con: duckdb.DuckDBPyConnection, schemas: tuple[str, ...]) -> list[str]:
    """Every table, view or column of `schemas` without a comment (empty: all documented)."""
    missing: list[str] = []
    for s in describe(con):
        if s.name not in schemas:
            continue
        if not s.comment:
            missing.append(f"schema {s.name}")
        for t in s.tables:
            if not t.comment:
                missing.append(f"{t.kind} {t.name}")
            missing += [f"column {t.name}.{c.name}" for c in t.columns if not c.comment]
    return missing
