"""The one-pass pandera screen: the only module that reaches into pandera's internals.

pandera runs each check as its own query and builds failure cases even when nothing fails
(about 2.4 s of a 1,000,000-row first refresh; 85 ms for the marts of a household). The screen
runs pandera's own check functions in one parallel Polars pass and skips pandera only when
every row passes every rule, so every rule and every reason stays pandera's.

It judges a whitelist of schema features (dtypes, nullability, checks, uniqueness, strict
columns). A schema that uses anything else (a column `default`, `parsers`, `coerce`,
`drop_invalid_rows`, `report_duplicates`, `unique_column_names`, an ordered schema, missing
columns to add, or a feature this pandera version added) is never screened: pandera validates
it. What the screen relies on in pandera is pinned by tests/warehouse/test_validation.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandera.polars as pa
import polars as pl

# pandera registers its Polars check functions on first validation; the screen calls them
# before that, so it registers them here (the public hook pandera's schemas call themselves).
pa.DataFrameSchema.register_default_backends(pl.LazyFrame)

# Frames up to this many rows are screened on Polars' in-memory engine without plan
# optimisations (a household's every frame); larger ones keep Polars' defaults
SMALL_FRAME = 100_000

# Attributes (as `vars` names them, without a leading underscore) the screen judges itself.
_COLUMN_JUDGED = frozenset(
    {"dtype", "checks", "name", "title", "description", "metadata", "nullable", "unique"}
    | {"required", "regex"}
)
_SCHEMA_JUDGED = frozenset(
    {"dtype", "checks", "name", "title", "description", "metadata", "columns", "strict"}
    | {"unique", "index"}
)
# Attributes the screen accepts only at pandera's default, where they change nothing.
_COLUMN_DEFAULTS: Mapping[str, Any] = {
    "coerce": False,
    "parsers": [],
    "drop_invalid_rows": False,
    "report_duplicates": "all",
    "default": None,
}
_SCHEMA_DEFAULTS: Mapping[str, Any] = {
    "coerce": False,
    "parsers": [],
    "drop_invalid_rows": False,
    "report_duplicates": "all",
    "unique_column_names": False,
    "ordered": False,
    "add_missing_columns": False,
    "on_missing_columns": None,
    "dtype": None,
    "index": None,
}


def _only_judged(
    obj: object, judged: frozenset[str], defaults: Mapping[str, Any], rest: Mapping[str, Any]
) -> bool:
    """Whether `obj` uses no feature beyond `judged` plus `defaults` left at their value."""
    names = {name.lstrip("_") for name in vars(obj)}
    if names - judged - set(defaults):
        return False  # a feature this pandera version has and the screen does not know
    return all(rest.get(k, getattr(obj, k, None)) == v for k, v in defaults.items())


def screenable(schema: pa.DataFrameSchema) -> bool:
    """Whether the screen can give pandera's answer for `schema` (else pandera must run)."""
    # `coerce` of a schema reads its columns too; the schema's own flag is the one compared
    own = {"coerce": vars(schema).get("_coerce", getattr(schema, "coerce", False))}
    if not _only_judged(schema, _SCHEMA_JUDGED, _SCHEMA_DEFAULTS, own):
        return False
    if schema.strict not in (True, False):  # "filter" drops columns: a change to the frame
        return False
    return all(
        _only_judged(column, _COLUMN_JUDGED, _COLUMN_DEFAULTS, {}) and not column.regex
        for column in schema.columns.values()
    )


def check_function(check: pa.Check) -> Callable[..., Any] | None:
    """The function a check runs, with its arguments bound (None when it has none).

    pandera keeps both on the check as `_check_fn` and `_check_kwargs` (pandera 0.35, pinned;
    no public accessor): the screen runs exactly what pandera would.
    """
    fn = check._check_fn
    if fn is None:
        return None
    # as pandera's `Check.__call__`: a built-in check's function is looked up again by name,
    # so Polars signatures registered after the check was made are found
    name = getattr(fn, "__name__", None)
    if name is not None and check.is_builtin_check(name):
        fn = check.get_builtin_check_fn(name)
    kwargs = check._check_kwargs

    def bound(data: pa.PolarsData) -> Any:
        return fn(data, **kwargs)

    return bound


def passes_every_check(schema: pa.DataFrameSchema, frame: pl.DataFrame) -> bool:
    """True when every row passes every rule of a pandera schema, by one parallel Polars pass
    over pandera's own check functions; False means "ask pandera", which then names each
    failure.

    Only a frame that passes everything skips pandera; anything this does not model (a schema
    feature outside the whitelist of `screenable`, an element-wise or grouped check, missing
    columns) falls back to pandera.
    """
    if not screenable(schema):
        return False
    if schema.strict and set(frame.columns) - set(schema.columns):
        return False
    dtypes = frame.schema  # built anew on every access
    lf = frame.lazy()
    verdicts: list[pl.LazyFrame] = []

    def add(check: pa.Check, key: str) -> bool:
        fn = check_function(check)
        if check.element_wise or check.groupby is not None or fn is None:
            return False
        try:
            out = fn(pa.PolarsData(lf, key))
        except Exception:  # not a Polars check after all: pandera decides
            return False
        if isinstance(out, bool):
            return out
        if not isinstance(out, pl.LazyFrame) or len(out.collect_schema()) != 1:
            return False
        # as pandera's backend: a null outcome passes when the check ignores nulls
        ok = pl.first().fill_null(check.ignore_na)
        verdicts.append(out.select(ok.all().alias(f"v{len(verdicts)}")))
        return True

    def no_duplicates(columns: list[str]) -> None:
        # pandera's `unique`: no two rows equal on these columns (nulls equal to each other)
        dup = pl.struct(columns).is_duplicated().any()
        verdicts.append(lf.select((~dup).alias(f"v{len(verdicts)}")))

    for name, column in schema.columns.items():
        if name not in frame.columns:
            return False
        if dtypes[name] != column.dtype.type:
            return False
        if not column.nullable and frame.get_column(name).null_count():
            return False
        if not all(add(check, name) for check in column.checks):
            return False
        if column.unique:
            no_duplicates([name])
    if not all(add(check, "*") for check in schema.checks):
        return False
    if schema.unique:
        unique = [schema.unique] if isinstance(schema.unique, str) else list(schema.unique)
        if any(c not in frame.columns for c in unique):
            return False
        no_duplicates(unique)
    if not verdicts:
        return True
    if frame.height > SMALL_FRAME:
        return all(bool(v.item()) for v in pl.collect_all(verdicts))
    # a plan per check over a small frame: Polars' planning and its default engine's start-up
    # were most of the cost; the in-memory engine, unoptimised, gives the same verdicts in two
    # thirds of the time (a household refresh's 17 frames: 35 ms, then 22 ms)
    small = pl.collect_all(verdicts, engine="in-memory", optimizations=pl.QueryOptFlags.none())
    return all(bool(v.item()) for v in small)


def validated(schema: pa.DataFrameSchema, frame: pl.DataFrame) -> pl.DataFrame:
    """`schema.validate(frame)`, pandera's errors and all, skipping pandera's own pass when
    `passes_every_check` proves the frame already fits (then the frame is returned as is: the
    schema uses no feature that changes a frame, and the frame has its exact types, so pandera
    would have changed nothing)."""
    return frame if passes_every_check(schema, frame) else schema.validate(frame)
