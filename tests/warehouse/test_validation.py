"""Validation: every rule rejects with a reason, nothing is dropped silently."""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl
import pytest

from centsync.warehouse import FrameShapeError, split_valid
from centsync.warehouse import validation as v

from .builders import transactions, with_raw


def _set(frame: pl.DataFrame, row: int, column: str, value: object) -> pl.DataFrame:
    values = frame.get_column(column).to_list()
    values[row] = value
    return frame.with_columns(pl.Series(column, values, dtype=frame.schema[column]))


def test_a_valid_frame_passes_whole() -> None:
    frame = transactions(50, months=["2024-01", "2024-02"])
    split = split_valid("transactions", frame)
    assert split.valid.height == 50
    assert split.rejected.height == 0


@pytest.mark.parametrize(
    ("column", "value", "needle"),
    [
        ("id", "not-a-uuid", "id: not a uuid"),
        ("account_id", "x", "account_id: not a uuid"),
        ("category_id", "123", "category_id: not a uuid"),
        ("type", "refund", "type: not expense/income/transfer"),
        ("amount", 10**12 + 1, "amount: outside"),
        ("amount", -(10**12) - 1, "amount: outside"),
        ("concept", "", "concept: length not in 1..200"),
        ("concept", "x" * 201, "concept: length not in 1..200"),
        ("booked_at", dt.date(1850, 1, 1), "booked_at: not a plausible date"),
        ("concept", None, "concept: not_nullable"),
    ],
)
def test_a_broken_rule_rejects_the_row_with_its_reason(
    column: str, value: object, needle: str
) -> None:
    frame = _set(transactions(5), 2, column, value)
    split = split_valid("transactions", frame)
    assert split.valid.height == 4
    assert split.rejected.height == 1
    assert needle in split.rejected.get_column("reason")[0]
    assert split.rejected.get_column("record")[0] == frame.get_column("raw")[2]


def test_every_failure_of_a_row_is_in_its_reason() -> None:
    frame = _set(_set(transactions(3), 0, "type", "x"), 0, "amount", 10**13)
    reason = split_valid("transactions", frame).rejected.get_column("reason")[0]
    assert "type:" in reason
    assert "amount:" in reason


def test_many_bad_rows_are_all_rejected() -> None:
    frame = transactions(500)
    frame = frame.with_columns(
        pl.when(pl.int_range(500) % 2 == 0)
        .then(pl.lit("bogus"))
        .otherwise(pl.col("type"))
        .alias("type")
    )
    split = split_valid("transactions", frame)
    assert split.rejected.height == 250
    assert split.valid.height == 250


def test_identical_copies_of_a_row_are_deduplicated_silently() -> None:
    frame = transactions(4)
    dup = pl.concat([frame, frame.slice(1, 1), frame.slice(1, 1)])
    split = split_valid("transactions", dup)
    assert split.valid.height == 4 and split.rejected.height == 0
    assert sorted(split.valid["id"].to_list()) == sorted(frame["id"].to_list())
    assert v.conflicting_ids("transactions", dup) == []


@pytest.mark.parametrize("impostor_first", [True, False])
def test_an_id_sent_twice_with_different_content_rejects_every_copy(impostor_first: bool) -> None:
    frame = transactions(4)
    real = frame.slice(1, 1)
    impostor = with_raw(
        frame.slice(2, 1).with_columns(pl.lit(real["id"][0]).alias("id")).drop("raw")
    )
    parts = [impostor, real] if impostor_first else [real, impostor]
    sent = pl.concat([frame.slice(0, 1), *parts, frame.slice(3, 1)], how="diagonal_relaxed")
    split = split_valid("transactions", sent)
    assert split.valid.height == 2
    assert real["id"][0] not in split.valid["id"].to_list()
    assert split.rejected.height == 2
    assert set(split.rejected["record"].to_list()) == {real["raw"][0], impostor["raw"][0]}
    assert all("different content" in r for r in split.rejected["reason"].to_list())
    assert v.conflicting_ids("transactions", sent) == [real["id"][0]]


def test_an_impossible_date_as_text_is_rejected_not_coerced() -> None:
    frame = transactions(3).with_columns(pl.col("booked_at").cast(pl.String))
    frame = _set(frame, 1, "booked_at", "2025-02-30")
    split = split_valid("transactions", frame)
    assert split.valid.height == 2
    assert split.valid.schema["booked_at"] == pl.Date
    reason = split.rejected.get_column("reason")[0]
    assert "booked_at: cannot read '2025-02-30' as date" in reason or "2025-02-30" in reason


def test_missing_optional_columns_are_tolerated() -> None:
    frame = transactions(3).drop("created_at", "updated_at", "expense_goal_id")
    split = split_valid("transactions", frame)
    assert split.valid.height == 3
    assert split.valid.get_column("created_at").null_count() == 3


def test_missing_required_column_is_a_frame_error() -> None:
    with pytest.raises(FrameShapeError, match="amount"):
        split_valid("transactions", transactions(2).drop("amount"))


def test_a_float_amount_is_refused_outright() -> None:
    frame = transactions(2).with_columns(pl.col("amount").cast(pl.Float64))
    with pytest.raises(FrameShapeError, match="amount"):
        split_valid("transactions", frame)


def test_raw_is_built_from_the_row_when_absent() -> None:
    split = split_valid("transactions", transactions(2).drop("raw"))
    assert split.valid.get_column("raw")[0].startswith("{")


def test_naive_and_other_unit_timestamps_are_read_as_utc() -> None:
    frame = transactions(2).with_columns(
        pl.col("created_at").dt.replace_time_zone(None).cast(pl.Datetime("ns"))
    )
    split = split_valid("transactions", frame)
    assert split.valid.schema["created_at"] == pl.Datetime("us", "UTC")


def test_accounts_rules_apply() -> None:
    frame = pl.DataFrame(
        {
            "id": ["3fa85f64-5717-4562-b3fc-2c963f66afa6", "3fa85f64-5717-4562-b3fc-2c963f66afa7"],
            "name": ["Main", "Card"],
            "type": ["depository", "spaceship"],
            "subtype": [None, None],
            "currency": ["EUR", "eur"],
            "balance": [100, -5],
        }
    )
    split = split_valid("accounts", with_raw(frame))
    assert split.valid.height == 1
    reason = split.rejected.get_column("reason")[0]
    assert "type: not a known account type" in reason
    assert "currency: not an ISO 4217 code" in reason


def test_two_spellings_of_one_uuid_are_one_id() -> None:
    frame = transactions(2)
    upper = frame.slice(0, 1).with_columns(pl.col("id").str.to_uppercase())
    split = split_valid("transactions", pl.concat([frame, upper]))
    assert split.valid.height == 2
    assert split.valid.get_column("id").to_list() == frame.get_column("id").to_list()
    # the same row in two spellings is one row: deduplicated, nothing rejected
    assert split.rejected.height == 0


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("id", "not-a-uuid"),
        ("category_id", "123"),
        ("type", "refund"),
        ("amount", 10**12 + 1),
        ("concept", ""),
        ("booked_at", dt.date(1850, 1, 1)),
        ("concept", None),
        ("raw", "[1]"),
        ("id", None),
    ],
)
def test_the_fast_pass_sends_every_broken_rule_to_pandera(column: str, value: object) -> None:
    # The one-pass screen may skip pandera only for a frame pandera would pass whole.
    spec = v.TRANSACTIONS
    good, _ = v.normalise(spec, transactions(5))
    assert v.passes_every_check(spec.schema, good)
    bad, _ = v.normalise(spec, _set(transactions(5), 2, column, value))
    assert not v.passes_every_check(spec.schema, bad)


def test_the_fast_pass_agrees_with_pandera_on_other_entities() -> None:
    frame = pl.DataFrame(
        {
            "id": ["3fa85f64-5717-4562-b3fc-2c963f66afa6"],
            "name": ["Main"],
            "type": ["depository"],
            "currency": ["EUR"],
            "balance": [100],
        }
    )
    spec = v.ACCOUNTS
    good, _ = v.normalise(spec, with_raw(frame))
    assert v.passes_every_check(spec.schema, good)
    bad, _ = v.normalise(spec, with_raw(frame.with_columns(pl.lit("eur").alias("currency"))))
    assert not v.passes_every_check(spec.schema, bad)
    assert split_valid("accounts", with_raw(frame)).valid.height == 1


def test_validated_is_pandera_for_any_schema_unique_strict_and_checks() -> None:
    """`validated` (the marts' and any schema's fast path) returns the frame untouched when it
    fits, and pandera's own error whenever pandera would raise: a duplicate of the unique
    key, an extra column of a strict schema, a failed check, a null, a wrong type."""
    import pandera.polars as pa
    from pandera.errors import SchemaError

    schema = pa.DataFrameSchema(
        {
            "month": pa.Column(pl.Date),
            "key": pa.Column(pl.String, nullable=True),
            "cents": pa.Column(pl.Int64, pa.Check.in_range(-100, 100)),
            "n": pa.Column(pl.Int64, pa.Check.ge(0)),
        },
        strict=True,
        unique=["month", "key"],
    )
    good = pl.DataFrame(
        {
            "month": [dt.date(2026, 1, 1), dt.date(2026, 1, 1), dt.date(2026, 2, 1)],
            "key": ["a", None, None],
            "cents": [5, -100, 100],
            "n": [1, 0, 3],
        }
    )
    assert v.passes_every_check(schema, good)
    assert v.validated(schema, good) is good
    broken = {
        "duplicate key": pl.concat([good, good.slice(1, 1)]),
        "extra column": good.with_columns(pl.lit(1).alias("extra")),
        "failed check": good.with_columns(pl.Series("cents", [5, -100, 101])),
        "null": good.with_columns(pl.Series("n", [1, None, 3], dtype=pl.Int64)),
        "wrong type": good.with_columns(pl.col("n").cast(pl.Int32)),
    }
    for why, frame in broken.items():
        assert not v.passes_every_check(schema, frame), why
        with pytest.raises(SchemaError):
            schema.validate(frame)
        with pytest.raises(SchemaError):
            v.validated(schema, frame)


def test_a_column_default_gets_pandera_s_answer() -> None:
    """A column `default` fills nulls in pandera: the screen refuses it, so `validated`
    returns pandera's frame ([1, 0]), never the frame as it came ([1, None])."""
    import pandera.polars as pa

    schema = pa.DataFrameSchema({"a": pa.Column(pl.Int64, nullable=True, default=0)})
    frame = pl.DataFrame({"a": [1, None]}, schema={"a": pl.Int64})
    assert not v.passes_every_check(schema, frame)
    assert v.validated(schema, frame).get_column("a").to_list() == [1, 0]
    assert v.validated(schema, frame).equals(schema.validate(frame))


def _refused_schemas() -> dict[str, Any]:
    import pandera.polars as pa
    from pandera.api.parsers import Parser  # not re-exported by pandera.polars

    def col(**kw: Any) -> Any:
        return pa.Column(pl.Int64, nullable=True, **kw)

    parser = Parser(lambda d: d.lazyframe.select(pl.col(d.key)))
    return {
        "default": pa.DataFrameSchema({"a": col(default=0)}),
        "column parsers": pa.DataFrameSchema({"a": col(parsers=[parser])}),
        "schema parsers": pa.DataFrameSchema({"a": col()}, parsers=[parser]),
        "column coerce": pa.DataFrameSchema({"a": col(coerce=True)}),
        "schema coerce": pa.DataFrameSchema({"a": col()}, coerce=True),
        "column drop_invalid_rows": pa.DataFrameSchema({"a": col(drop_invalid_rows=True)}),
        "schema drop_invalid_rows": pa.DataFrameSchema({"a": col()}, drop_invalid_rows=True),
        "unique_column_names": pa.DataFrameSchema({"a": col()}, unique_column_names=True),
        "ordered": pa.DataFrameSchema({"a": col()}, ordered=True),
        "add_missing_columns": pa.DataFrameSchema({"a": col()}, add_missing_columns=True),
        "strict filter": pa.DataFrameSchema({"a": col()}, strict="filter"),
        "regex column": pa.DataFrameSchema({"^a$": col(regex=True)}),
    }


_REFUSED = (
    "default",
    "column parsers",
    "schema parsers",
    "column coerce",
    "schema coerce",
    "column drop_invalid_rows",
    "schema drop_invalid_rows",
    "unique_column_names",
    "ordered",
    "add_missing_columns",
    "strict filter",
    "regex column",
)


@pytest.mark.filterwarnings("ignore::UserWarning")  # unique_column_names warns on Polars
@pytest.mark.parametrize("feature", _REFUSED)
def test_each_feature_the_screen_cannot_judge_goes_to_pandera(feature: str) -> None:
    schema = _refused_schemas()[feature]
    frame = pl.DataFrame({"a": [1, 2]}, schema={"a": pl.Int64})
    assert not v.passes_every_check(schema, frame), feature
    try:
        expected = schema.validate(frame)
    except Exception as exc:  # pandera's own error is the answer
        with pytest.raises(type(exc)):
            v.validated(schema, frame)
        return
    assert v.validated(schema, frame).equals(expected)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_report_duplicates_goes_to_pandera() -> None:
    import pandera.polars as pa

    for schema in (
        pa.DataFrameSchema({"a": pa.Column(pl.Int64, report_duplicates="exclude_first")}),
        pa.DataFrameSchema({"a": pa.Column(pl.Int64)}, report_duplicates="exclude_first"),
    ):
        assert not v.passes_every_check(schema, pl.DataFrame({"a": [1, 2]}))


def test_what_the_screen_relies_on_in_pandera() -> None:
    """The pandera internals the screen reads (pandera_screen.check_function): a check keeps
    its function and arguments, a built-in check runs on a `PolarsData` and answers with a
    one-column LazyFrame, and a schema's attributes are the ones the whitelist knows."""
    import pandera.polars as pa

    from centsync.warehouse import pandera_screen

    def fn(data: Any, *, limit: int) -> Any:
        return data.lazyframe.select(pl.col(data.key) < limit)

    check = pa.Check(fn, limit=3)
    assert check._check_fn is fn and check._check_kwargs == {"limit": 3}
    builtin = pa.Check.in_range(0, 4)
    assert pa.Check.is_builtin_check(builtin._check_fn.__name__)
    assert pa.Check.get_builtin_check_fn("in_range").__name__ == "in_range"
    lf = pl.LazyFrame({"a": [1, 5]})
    bound = pandera_screen.check_function(pa.Check.in_range(0, 4))
    assert bound is not None
    out = bound(pa.PolarsData(lf, "a"))
    assert isinstance(out, pl.LazyFrame) and out.collect().to_series().to_list() == [True, False]
    plain = pa.DataFrameSchema({"a": pa.Column(pl.Int64)})
    assert pandera_screen.screenable(plain)
    known = pandera_screen._SCHEMA_JUDGED | set(pandera_screen._SCHEMA_DEFAULTS)
    assert {k.lstrip("_") for k in vars(plain)} <= known
    known = pandera_screen._COLUMN_JUDGED | set(pandera_screen._COLUMN_DEFAULTS)
    assert {k.lstrip("_") for k in vars(plain.columns["a"])} <= known


def test_the_time_zones_are_listed_when_a_settings_frame_is_checked_not_on_import() -> None:
    """Listing the IANA zones walks the zone files (~10 ms): a process that imports the
    validation lists none; checking settings lists them once, and a name that is not one is
    rejected with its reason."""
    import subprocess
    import sys

    code = (
        "from centsync.transform.calendar import iana_zones\n"
        "import centsync.warehouse.validation\n"
        "assert iana_zones.cache_info().currsize == 0\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    raw = '{"timezone": "x"}'
    frame = pl.DataFrame(
        {
            "timezone": ["Europe/Madrid", "Mars/Olympus"],
            "currency": ["EUR", "EUR"],
            "raw": [raw, raw],
        }
    )
    split = split_valid("settings", frame)
    assert split.valid.get_column("timezone").to_list() == ["Europe/Madrid"]
    assert "not an IANA timezone" in split.rejected.get_column("reason")[0]
