"""Reconciliation's row differences: rows only local, only in a reference, or different."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

ROW_DIFF_SCHEMA: dict[str, pl.DataType] = {
    "entity": pl.String(),  # transactions or accounts
    "id": pl.String(),
    "kind": pl.String(),  # only_local, only_server, different
    "month": pl.Date(),
    "category_id": pl.String(),
    "fields": pl.String(),  # the differing fields, comma-separated ("" for only_* rows)
    "local": pl.String(),  # the local row as JSON (null when only on the server)
    "server": pl.String(),  # the reference row as JSON (null when only local)
    "source": pl.String(),  # received (what the service sent, raw.*) or server (read now)
}
TX_FIELDS = ("account_id", "concept", "amount", "booked_at", "type", "category_id")
ACCOUNT_FIELDS = ("name", "type", "balance")


def diff_rows(
    local: pl.DataFrame,
    reference: pl.DataFrame,
    *,
    entity: str,
    fields: Iterable[str],
    source: str,
) -> pl.DataFrame:
    """The rows that are only local, only in the reference, or different (by `id`).

    Both frames have `id` and the `fields`; transactions also `booked_at` and `category_id`
    (which name the month and category a differing row belongs to).
    """
    fields = [f for f in fields if f in local.columns and f in reference.columns]
    cols = ["id", *fields]
    joined = local.select(cols).join(
        reference.select(cols), on="id", how="full", coalesce=True, suffix="_ref"
    )
    only_local = joined.filter(pl.all_horizontal([pl.col(f"{f}_ref").is_null() for f in fields]))
    only_ref = joined.filter(pl.all_horizontal([pl.col(f).is_null() for f in fields]))
    both = joined.filter(
        ~pl.all_horizontal([pl.col(f"{f}_ref").is_null() for f in fields])
        & ~pl.all_horizontal([pl.col(f).is_null() for f in fields])
    )
    changed = [
        pl.when(pl.col(f).ne_missing(pl.col(f"{f}_ref"))).then(pl.lit(f)).otherwise(None)
        for f in fields
    ]
    both = both.with_columns(
        fields_differing=pl.concat_str(changed, separator=",", ignore_nulls=True)
    )
    both = both.filter(pl.col("fields_differing") != "")
    date_field = "booked_at" if "booked_at" in fields else None

    def as_json(suffix: str) -> pl.Expr:
        return pl.struct([pl.col(f + suffix).alias(f) for f in fields]).struct.json_encode()

    def shape(
        frame: pl.DataFrame, kind: str, suffix_for_month: str, differing: pl.Expr
    ) -> pl.DataFrame:
        return frame.select(
            pl.lit(entity).alias("entity"),
            pl.col("id").cast(pl.String),
            pl.lit(kind).alias("kind"),
            (
                pl.col(date_field + suffix_for_month).dt.truncate("1mo")
                if date_field
                else pl.lit(None, pl.Date)
            ).alias("month"),
            (
                pl.col("category_id" + suffix_for_month)
                if "category_id" in fields
                else pl.lit(None, pl.String)
            ).alias("category_id"),
            differing.alias("fields"),
            (as_json("") if kind != "only_server" else pl.lit(None, pl.String)).alias("local"),
            (as_json("_ref") if kind != "only_local" else pl.lit(None, pl.String)).alias("server"),
            pl.lit(source).alias("source"),
        )

    parts = [
        shape(only_local, "only_local", "", pl.lit("")),
        shape(only_ref, "only_server", "_ref", pl.lit("")),
        shape(both, "different", "", pl.col("fields_differing")),
    ]
    return (
        pl.concat(parts, how="vertical_relaxed")
        .cast(pl.Schema(ROW_DIFF_SCHEMA))
        .sort("month", "id")
    )
