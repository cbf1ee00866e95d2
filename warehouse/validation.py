"""Validation of landed frames: normalise column types, check rules with pandera, split.

Every frame the warehouse lands goes through `split_valid`: it returns the rows that pass every
rule and, separately, the rows that do not with a human-readable reason per row. Nothing is
dropped silently: a rejected row is stored in `raw.rejected_rows` by the loaders.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

import pandera.polars as pa
import polars as pl
from pandera.errors import SchemaError, SchemaErrors

from centsync.transform.calendar import iana_zones
from centsync.transform.contract import ACCOUNT_TYPES, MAX_AMOUNT, TRANSACTION_TYPES, UUID_PATTERN
from centsync.warehouse.errors import FrameShapeError
from centsync.warehouse.pandera_screen import passes_every_check
from centsync.warehouse.pandera_screen import validated as validated  # the marts' validator

Kind = Literal["uuid", "str", "int", "date", "datetime", "uuid_list"]

CONNECTION_STATUSES = ("active", "reauth_required", "error")
# A real booking date: wide enough for any ledger, narrow enough to catch epoch/garbage values.
MIN_DATE = dt.date(1900, 1, 1)
MAX_DATE = dt.date(2199, 12, 31)

_POLARS_TYPE: dict[Kind, pl.DataType] = {
    "uuid": pl.String(),
    "str": pl.String(),
    "int": pl.Int64(),
    "date": pl.Date(),
    "datetime": pl.Datetime("us", "UTC"),
    "uuid_list": pl.List(pl.String()),
}


@dataclass(frozen=True)
class ColumnSpec:
    """One column a landed frame carries: its kind, and whether it may be absent or null."""

    name: str
    kind: Kind
    required: bool = True  # must be present in the frame
    nullable: bool = False


@dataclass(frozen=True)
class EntitySpec:
    """What a frame of one entity looks like and which rules its rows must pass."""

    entity: str
    columns: tuple[ColumnSpec, ...]
    key: str | None
    schema: pa.DataFrameSchema

    @property
    def names(self) -> list[str]:
        """Column names in landing order (raw last)."""
        return [c.name for c in self.columns] + ["raw"]


@dataclass(frozen=True)
class Split:
    """A frame split into the rows that land and the rows that are rejected (with reasons)."""

    valid: pl.DataFrame
    rejected: pl.DataFrame  # columns: record (Utf8, the raw JSON), reason (Utf8)

    @property
    def rejected_count(self) -> int:
        """How many rows were rejected."""
        return self.rejected.height


def _uuid_check() -> pa.Check:
    return pa.Check.str_matches(UUID_PATTERN, error="not a uuid")


def _json_object_check() -> pa.Check:
    # A cheap shape test here; DuckDB's json_valid at landing catches malformed insides.
    return pa.Check(
        lambda d: d.lazyframe.select(
            pl.col(d.key).str.starts_with("{") & pl.col(d.key).str.ends_with("}")
        ),
        error="raw is not a JSON object",
    )


def _uuid_list_check() -> pa.Check:
    return pa.Check(
        lambda d: d.lazyframe.select(
            pl.col(d.key).list.eval(pl.element().str.contains(UUID_PATTERN)).list.all()
        ),
        error="account_ids holds a non-uuid",
    )


def _in_zones(d: pa.PolarsData) -> pl.LazyFrame:  # the zones read when checked, not at import
    return d.lazyframe.select(pl.col(d.key).is_in(sorted(iana_zones() | {"UTC"})))


def conflicting_ids(entity: str | EntitySpec, frame: pl.DataFrame) -> list[str]:
    """Keys a frame holds more than once with differing content (an impostor under a real id).

    Identical copies (a page read twice, one id in two spellings) are no conflict: they are
    deduplicated silently. Cheap when every key is once (the usual case).
    """
    spec = ENTITIES[entity] if isinstance(entity, str) else entity
    key = spec.key
    if key is None or key not in frame.columns or frame.height < 2:
        return []
    repeated = frame.get_column(key).cast(pl.String).str.to_lowercase().is_duplicated()
    if not repeated.any():
        return []
    normal, _ = normalise(spec, frame.filter(repeated))
    pairs = normal.select(pl.col(key).alias("id"), _row_content(spec).alias("content"))
    conflicts = pairs.drop_nulls("id").group_by("id").agg(pl.col("content").n_unique().alias("n"))
    return sorted(conflicts.filter(pl.col("n") > 1).get_column("id").to_list())


def _row_content(spec: EntitySpec) -> pl.Expr:
    """A row's content as the warehouse sees it: every typed column (one spelling of a uuid)."""
    return pl.struct([c.name for c in spec.columns]).hash()


def _dedupe(spec: EntitySpec, normal: pl.DataFrame) -> tuple[pl.Series | None, pl.Series | None]:
    """Repeated keys of a normalised frame: (rows to keep, a reason per row), or Nones when
    every key is once.

    A later identical copy is dropped silently (page drift); every copy of a key sent with
    differing content is rejected, since which copy is the service's row cannot be told from
    the page (a row sent under its neighbour's id).
    """
    key = spec.key
    if key is None or normal.height < 2 or not normal.get_column(key).is_duplicated().any():
        return None, None
    pairs = normal.select(pl.col(key).alias("id"), _row_content(spec).alias("content"))
    keep = pairs.select(pl.struct("id", "content").is_first_distinct()).to_series()
    kept = pairs.filter(keep)
    conflicts = kept.filter(pl.col("id").is_duplicated()).get_column("id").unique().to_list()
    if not conflicts:
        return keep, None
    reason = pairs.select(
        pl.when(pl.col("id").is_in(conflicts))
        .then(
            pl.format(
                "{}: {} sent more than once with different content (every copy rejected; the "
                "service's own row is fetched by its id)",
                pl.lit(key),
                pl.col("id"),
            )
        )
        .otherwise(None)
    ).to_series()
    return keep, reason


def _column(spec: ColumnSpec, checks: list[pa.Check] | None = None) -> pa.Column:
    all_checks = list(checks or [])
    if spec.kind == "uuid":
        all_checks.insert(0, _uuid_check())
    if spec.kind == "uuid_list":
        all_checks.insert(0, _uuid_list_check())
    return pa.Column(_POLARS_TYPE[spec.kind], all_checks, nullable=spec.nullable)


def _entity(
    entity: str,
    columns: list[ColumnSpec],
    key: str | None,
    checks: dict[str, list[pa.Check]],
) -> EntitySpec:
    schema_columns = {c.name: _column(c, checks.get(c.name)) for c in columns}
    schema_columns["raw"] = pa.Column(pl.String, [_json_object_check()])
    # a repeated key is judged before pandera (`_dedupe`): identical copies drop, differing ones
    # are all rejected
    schema = pa.DataFrameSchema(schema_columns, strict=False, name=entity)
    return EntitySpec(entity, tuple(columns), key, schema)


def _money() -> list[pa.Check]:
    return [pa.Check.in_range(-MAX_AMOUNT, MAX_AMOUNT, error=f"outside +/-{MAX_AMOUNT}")]


def _text(max_len: int) -> list[pa.Check]:
    return [pa.Check.str_length(1, max_len, error=f"length not in 1..{max_len}")]


TRANSACTIONS = _entity(
    "transactions",
    [
        ColumnSpec("id", "uuid"),
        ColumnSpec("account_id", "uuid"),
        ColumnSpec("concept", "str"),
        ColumnSpec("amount", "int"),
        ColumnSpec("booked_at", "date"),
        ColumnSpec("type", "str"),
        ColumnSpec("category_id", "uuid", required=False, nullable=True),
        ColumnSpec("expense_goal_id", "uuid", required=False, nullable=True),
        ColumnSpec("created_at", "datetime", required=False, nullable=True),
        ColumnSpec("updated_at", "datetime", required=False, nullable=True),
    ],
    key="id",
    checks={
        "concept": _text(200),
        "amount": _money(),
        "booked_at": [pa.Check.in_range(MIN_DATE, MAX_DATE, error="not a plausible date")],
        "type": [pa.Check.isin(TRANSACTION_TYPES, error="not expense/income/transfer")],
    },
)

ACCOUNTS = _entity(
    "accounts",
    [
        ColumnSpec("id", "uuid"),
        ColumnSpec("name", "str"),
        ColumnSpec("type", "str"),
        ColumnSpec("subtype", "str", required=False, nullable=True),
        ColumnSpec("currency", "str"),
        ColumnSpec("balance", "int"),
        ColumnSpec("connection_id", "uuid", required=False, nullable=True),
        ColumnSpec("institution", "str", required=False, nullable=True),
        ColumnSpec("updated_at", "datetime", required=False, nullable=True),
    ],
    key="id",
    checks={
        "name": _text(500),
        "type": [pa.Check.isin(ACCOUNT_TYPES, error="not a known account type")],
        "currency": [pa.Check.str_matches(r"^[A-Z]{3}$", error="not an ISO 4217 code")],
        "balance": _money(),
    },
)

CONNECTIONS = _entity(
    "connections",
    [
        ColumnSpec("id", "uuid"),
        ColumnSpec("provider", "str"),
        ColumnSpec("institution", "str", required=False, nullable=True),
        ColumnSpec("status", "str"),
        ColumnSpec("last_synced_at", "datetime", required=False, nullable=True),
        ColumnSpec("account_ids", "uuid_list", required=False, nullable=True),
    ],
    key="id",
    checks={
        "provider": _text(200),
        "status": [pa.Check.isin(CONNECTION_STATUSES, error="not a known connection status")],
    },
)

SYNC_STATUS = _entity(
    "sync_status",
    [
        ColumnSpec("connection_id", "uuid"),
        ColumnSpec("provider", "str"),
        ColumnSpec("status", "str"),
        ColumnSpec("last_synced_at", "datetime", required=False, nullable=True),
        ColumnSpec("next_sync_at", "datetime", required=False, nullable=True),
    ],
    key="connection_id",
    checks={"provider": _text(200), "status": _text(100)},
)

SETTINGS = _entity(
    "settings",
    [
        ColumnSpec("timezone", "str"),
        ColumnSpec("currency", "str"),
        ColumnSpec("locale", "str", required=False, nullable=True),
        ColumnSpec("week_start", "str", required=False, nullable=True),
    ],
    key=None,
    checks={
        "timezone": [pa.Check(_in_zones, error="not an IANA timezone")],
        "currency": [pa.Check.str_matches(r"^[A-Z]{3}$", error="not an ISO 4217 code")],
    },
)

ENTITIES: dict[str, EntitySpec] = {
    e.entity: e for e in (TRANSACTIONS, ACCOUNTS, CONNECTIONS, SYNC_STATUS, SETTINGS)
}


def _parse(col: pl.Expr, kind: Kind, dtype: pl.DataType) -> pl.Expr:
    """An expression that turns a column of `dtype` into the kind's type (null when unreadable)."""
    target = _POLARS_TYPE[kind]
    if dtype == pl.Null:
        return col.cast(target)
    if kind == "int":
        if dtype.is_integer():
            return col.cast(pl.Int64, strict=False)
        if dtype == pl.String:
            return col.str.to_integer(strict=False).cast(pl.Int64, strict=False)
        # A float amount is a contract breach, not a rounding question: refuse the frame.
        raise FrameShapeError(f"money/int column {col.meta.output_name()} has type {dtype}")
    if kind == "date":
        if dtype == pl.Date:
            return col
        if dtype == pl.String:
            return col.str.to_date("%Y-%m-%d", strict=False)
        raise FrameShapeError(f"date column {col.meta.output_name()} has type {dtype}")
    if kind == "datetime":
        if isinstance(dtype, pl.Datetime):
            if dtype.time_zone is None:
                col = col.dt.replace_time_zone("UTC")  # the API's instants are UTC
            return col.dt.convert_time_zone("UTC").cast(target)
        if dtype == pl.String:
            return col.str.to_datetime(time_zone="UTC", strict=False).cast(target)
        raise FrameShapeError(f"timestamp column {col.meta.output_name()} has type {dtype}")
    if kind == "uuid_list":
        return col.cast(target, strict=False).list.eval(pl.element().str.to_lowercase())
    return col.cast(pl.String, strict=False)


def _nulls(height: int) -> pl.Series:
    """`height` null texts (`pl.repeat` plans a query: 0.22 ms, this 0.015; ~20 a refresh)."""
    return pl.Series("", [None], dtype=pl.String).new_from_index(0, height)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def normalise(spec: EntitySpec, frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Bring a frame to the entity's column types; return it and a per-row parse-failure reason.

    Optional columns that are absent become nulls (the server may drop extra fields); a missing
    required column raises `FrameShapeError`. `raw` is built from the frame when absent.
    """
    if frame.height == 0:
        # An empty read (a month the server no longer has) may come with no columns at all.
        empty = pl.DataFrame(
            schema={**{c.name: _POLARS_TYPE[c.kind] for c in spec.columns}, "raw": pl.String()}
        )
        return empty, pl.Series("parse_reason", [], dtype=pl.String)
    missing = [c.name for c in spec.columns if c.required and c.name not in frame.columns]
    if missing:
        raise FrameShapeError(f"{spec.entity} frame lacks required column(s): {missing}")
    if "raw" in frame.columns:
        raw = frame.get_column("raw").cast(pl.String)
    elif frame.width:
        raw = frame.select(pl.struct(pl.all()).struct.json_encode()).to_series()
    else:
        raw = pl.Series("raw", [], dtype=pl.String)
    exprs: list[pl.Expr] = []
    reasons: list[pl.Expr] = []
    unreadable: list[pl.Expr] = []
    for c in spec.columns:
        target = _POLARS_TYPE[c.kind]
        if c.name not in frame.columns:
            exprs.append(pl.lit(None, dtype=target).alias(c.name))
            continue
        dtype = frame.schema[c.name]
        src = pl.col(c.name)
        parsed = _parse(src, c.kind, dtype).alias(c.name)
        exprs.append(parsed)
        if dtype != target:
            # Why a row failed to parse is worth a reason of its own (pandera would only see null).
            unreadable.append(src.is_not_null() & parsed.is_null())
            reasons.append(
                pl.when(unreadable[-1])
                .then(
                    pl.format(
                        "{}: cannot read {} as {}",
                        pl.lit(c.name),
                        src.cast(pl.String),
                        pl.lit(c.kind),
                    )
                )
                .otherwise(None)
            )
    out = frame.select(exprs).with_columns(raw.alias("raw")) if exprs else frame
    # Two spellings of one uuid must collide here, in validation, not in the primary key. The
    # server sends lower case: only copy a column (1M rows: ~40 MB each) when it is not.
    uuids = [c.name for c in spec.columns if c.kind == "uuid"]
    upper: list[str] = []
    if uuids and out.height:
        found = out.select(pl.col(uuids).str.contains("[A-F]").any()).row(0)
        upper = [name for name, has in zip(uuids, found, strict=True) if has]
    if upper:
        out = out.with_columns(pl.col(upper).str.to_lowercase())
    # The reasons are text per row: only build them when some value was unreadable (a
    # millisecond timestamp, as the client sends, always differs from the target type).
    if reasons and frame.select(pl.any_horizontal(unreadable).any()).item():
        parse_reason = frame.select(
            pl.concat_str(reasons, separator="; ", ignore_nulls=True)
        ).to_series()
        parse_reason = parse_reason.replace("", None)
    else:
        parse_reason = _nulls(frame.height)
    return out, parse_reason.alias("parse_reason")


def _failure_reasons(spec: EntitySpec, frame: pl.DataFrame) -> pl.DataFrame:
    """Per failing row (index), the pandera failures as text; empty when every row passes."""
    empty = pl.DataFrame(schema={"index": pl.Int64, "column": pl.String, "reason": pl.String})
    if passes_every_check(spec.schema, frame):
        return empty
    try:
        spec.schema.validate(frame, lazy=True)
        return empty
    except SchemaErrors as exc:
        cases = exc.failure_cases
    except SchemaError as exc:  # a single structural error even with lazy=True
        raise FrameShapeError(f"{spec.entity} frame does not fit its schema: {exc}") from exc
    structural = cases.filter(pl.col("index").is_null())
    if structural.height:
        raise FrameShapeError(
            f"{spec.entity} frame does not fit its schema: {structural.select('column', 'check', 'failure_case').rows()}"
        )
    key = spec.key or ""
    # Frame-level checks (the duplicate key) report the schema's name and the whole row.
    frame_level = pl.col("schema_context") == "DataFrameSchema"
    column = pl.when(frame_level).then(pl.lit(key)).otherwise(pl.col("column"))
    return cases.select(
        pl.col("index").cast(pl.Int64),
        column.alias("column"),
        pl.when(frame_level)
        .then(pl.format("{}: {}", pl.lit(key), pl.col("check")))
        .otherwise(
            pl.format(
                "{}: {} (got {})",
                pl.col("column"),
                pl.col("check").fill_null("check"),
                pl.col("failure_case")
                .fill_null("null")
                .map_elements(_short, return_dtype=pl.String),
            )
        )
        .alias("reason"),
    )


def split_valid(entity: str | EntitySpec, frame: pl.DataFrame) -> Split:
    """Split a frame into rows that pass every rule (typed, ready to land) and rejected rows."""
    spec = ENTITIES[entity] if isinstance(entity, str) else entity
    normal, parse_reason = normalise(spec, frame)
    keep, conflict = _dedupe(spec, normal)
    if conflict is None:
        conflict = _nulls(normal.height)
    if keep is not None:
        normal, parse_reason, conflict = (
            normal.filter(keep),
            parse_reason.filter(keep),
            conflict.filter(keep),
        )
    failures = _failure_reasons(spec, normal)
    if (
        failures.height == 0
        and parse_reason.null_count() == parse_reason.len()
        and conflict.null_count() == conflict.len()
    ):
        # every row fits (the usual case): nothing to join or explain
        return Split(normal, pl.DataFrame(schema={"record": pl.String, "reason": pl.String}))
    parse_failed = (
        pl.DataFrame({"parse_reason": parse_reason})
        .with_row_index("index")
        .with_columns(pl.col("index").cast(pl.Int64))
        .filter(pl.col("parse_reason").is_not_null())
    )
    # A value that could not be parsed is also null to pandera: keep only the parse reason.
    parsed_cols = {
        c.name
        for c in spec.columns
        if c.name in frame.columns and frame.schema[c.name] != _POLARS_TYPE[c.kind]
    }
    if parsed_cols and parse_failed.height:
        failures = (
            failures.join(
                parse_failed.select("index").with_columns(pl.lit(True).alias("_pf")),
                on="index",
                how="left",
            )
            .filter(~(pl.col("_pf").fill_null(False) & pl.col("column").is_in(list(parsed_cols))))
            .drop("_pf")
        )
    conflicted = (
        pl.DataFrame({"reason": conflict})
        .with_row_index("index")
        .select(pl.col("index").cast(pl.Int64), "reason")
        .filter(pl.col("reason").is_not_null())
    )
    reasons = pl.concat(
        [
            parse_failed.select("index", pl.col("parse_reason").alias("reason")),
            failures.select("index", "reason"),
            conflicted,
        ]
    )
    if reasons.height == 0:
        return Split(normal, pl.DataFrame(schema={"record": pl.String, "reason": pl.String}))
    per_row = reasons.group_by("index").agg(
        pl.col("reason").unique(maintain_order=True).str.join("; ")
    )
    indexed = normal.with_row_index("index").with_columns(pl.col("index").cast(pl.Int64))
    valid = indexed.join(per_row, on="index", how="anti").drop("index")
    rejected = indexed.join(per_row, on="index", how="inner").sort("index")
    return Split(valid, rejected.select(pl.col("raw").alias("record"), "reason"))


def _count() -> list[pa.Check]:
    return [pa.Check.ge(0, error="negative count")]


def _group_by() -> list[pa.Check]:
    return [pa.Check.isin(["category", "merchant", "month"], error="not category/merchant/month")]


SERVER_TRANSACTIONS_SUMMARY = _entity(
    "server.transactions_summary",
    [
        ColumnSpec("scope", "str"),
        ColumnSpec("from", "date", required=False, nullable=True),
        ColumnSpec("to", "date", required=False, nullable=True),
        ColumnSpec("params", "str", required=False, nullable=True),
        ColumnSpec("count", "int"),
        ColumnSpec("income", "int", required=False, nullable=True),
        ColumnSpec("expense", "int", required=False, nullable=True),
        ColumnSpec("transfer", "int", required=False, nullable=True),
        ColumnSpec("net", "int", required=False, nullable=True),
    ],
    key=None,
    checks={
        "scope": [
            pa.Check.isin(["all", "year", "month", "window"], error="not all/year/month/window")
        ],
        "count": _count(),
    },
)

SERVER_SPENDING = _entity(
    "server.spending",
    [
        ColumnSpec("group_by", "str"),
        ColumnSpec("from", "date"),
        ColumnSpec("to", "date"),
        ColumnSpec("key", "str", required=False, nullable=True),
        ColumnSpec("label", "str", required=False, nullable=True),
        ColumnSpec("amount", "int"),
        ColumnSpec("count", "int", required=False, nullable=True),
    ],
    key=None,
    checks={"group_by": _group_by(), "count": _count()},
)

SERVER_ACCOUNTS_SUMMARY = _entity(
    "server.accounts_summary",
    [
        ColumnSpec("currency", "str", required=False, nullable=True),
        ColumnSpec("assets", "int", required=False, nullable=True),
        ColumnSpec("liabilities", "int", required=False, nullable=True),
        ColumnSpec("net_worth", "int", required=False, nullable=True),
        ColumnSpec("count", "int", required=False, nullable=True),
        ColumnSpec("by_type", "str", required=False, nullable=True),
    ],
    key=None,
    checks={"count": _count(), "assets": [pa.Check.ge(0)], "liabilities": [pa.Check.ge(0)]},
)

SERVER_NET_WORTH = _entity(
    "server.net_worth",
    [
        ColumnSpec("currency", "str", required=False, nullable=True),
        ColumnSpec("assets", "int", required=False, nullable=True),
        ColumnSpec("liabilities", "int", required=False, nullable=True),
        ColumnSpec("total", "int"),
        ColumnSpec("as_of", "datetime", required=False, nullable=True),
    ],
    key=None,
    checks={"assets": [pa.Check.ge(0)], "liabilities": [pa.Check.ge(0)]},
)

SERVER_SPENDING_TOTALS = _entity(
    "server.spending_totals",
    [
        ColumnSpec("group_by", "str"),
        ColumnSpec("from", "date"),
        ColumnSpec("to", "date"),
        ColumnSpec("currency", "str", required=False, nullable=True),
        ColumnSpec("total", "int"),
        ColumnSpec("row_count", "int"),
    ],
    key=None,
    checks={"group_by": _group_by()},
)

for _spec in (
    SERVER_TRANSACTIONS_SUMMARY,
    SERVER_SPENDING,
    SERVER_ACCOUNTS_SUMMARY,
    SERVER_NET_WORTH,
    SERVER_SPENDING_TOTALS,
):
    ENTITIES[_spec.entity] = _spec
