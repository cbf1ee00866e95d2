"""The report's charts as Vega-Lite specs (built with Altair), aggregated data inline.

Month axes are temporal and labelled with the year ("Jun 2025"); every mark a person can click
carries `ym` (the month as `YYYY-MM`) or `category_name`, which the page's click listener turns
into a drill-down. Widths follow the container, so the charts fit a phone.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

MONTH_AXIS = alt.Axis(format="%b %Y", labelAngle=-40, labelOverlap=True, title=None)
RED = "#c53030"


# Altair checks each spec against the Vega-Lite JSON schema as it writes it (about 0.14 s of a
# refresh); the specs are ours and fixed in shape, so a refresh writes them unchecked and the
# tests check them (tests/pipelines/test_report_current.py sets this to True).
VALIDATE = False


def _month_x(field: str = "month") -> alt.X:
    # UTC: a date-only string is midnight UTC, so a local time unit would show the month
    # before it west of Greenwich
    return alt.X(f"{field}:T", timeUnit="utcyearmonth", axis=MONTH_AXIS)


def _month_tip(series: str) -> list[Any]:
    """A month chart's tooltip: the month (`ym`), the series the mark is of, its amount."""
    return [
        alt.Tooltip("ym:N", title="month"),
        f"{series}:N",
        alt.Tooltip("value:Q", format=",.2f"),
    ]


def spending_chart(results: pl.DataFrame) -> dict[str, Any]:
    """Monthly spending, local against the service's; months that differ as red points."""
    months = results.filter(pl.col("check") == "spending.month")
    spend = months.select(
        pl.col("scope").alias("ym"),
        (pl.col("scope") + "-01").alias("month"),
        (pl.col("local_cents") / -100).alias("local"),
        (pl.col("server_cents") / -100).alias("service"),
        (pl.col("difference_cents") != 0).alias("differs"),
    ).sort("month")
    long = spend.unpivot(
        index=["ym", "month", "differs"], on=["local", "service"], variable_name="side"
    )
    base = alt.Chart(alt.Data(values=long.to_dicts())).encode(
        x=_month_x(), y=alt.Y("value:Q", title="spent")
    )
    tip = _month_tip("side")
    layers = [
        base.mark_line(point=True, cursor="pointer").encode(
            color=alt.Color("side:N", title=None), tooltip=tip
        )
    ]
    if spend["differs"].any():  # (an empty layer makes Vega warn of an infinite extent)
        layers.append(
            base.transform_filter("datum.differs")
            .mark_point(size=140, filled=True, color=RED, cursor="pointer")
            .encode(tooltip=tip)
        )
    chart = alt.layer(*layers).properties(width="container", height=240)
    return chart.to_dict(validate=VALIDATE)


def categories_chart(categories: pl.DataFrame) -> dict[str, Any]:
    """Spending by category over the last 12 months, most spent on top (click: its rows)."""
    values = categories.select("category_name", (pl.col("amount_cents") / -100).alias("spent"))
    chart = (
        alt.Chart(alt.Data(values=values.to_dicts()))
        .mark_bar(cursor="pointer")
        .encode(
            y=alt.Y("category_name:N", sort="-x", title=None),
            x=alt.X("spent:Q", title="spent"),
            tooltip=["category_name:N", alt.Tooltip("spent:Q", format=",.2f")],
        )
        .properties(width="container", height=alt.Step(18))
        .properties(autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
    )
    return chart.to_dict(validate=VALIDATE)


def net_worth_chart(daily: pl.DataFrame, snapshots: pl.DataFrame) -> dict[str, Any]:
    """The reconstructed net-worth curve, with each refresh's snapshot as a point."""
    # the daily curve at month ends keeps a 10-year history to ~120 points per series
    worth = (
        daily.group_by_dynamic("date", every="1mo")
        .agg(pl.col("net_worth_cents").last())
        .select(
            pl.col("date").cast(pl.String), (pl.col("net_worth_cents") / 100).alias("net worth")
        )
    )
    snaps = snapshots.select(
        pl.col("snapshot_at").dt.date().cast(pl.String).alias("date"),
        (pl.col("net_worth_cents") / 100).alias("net worth"),
    )
    x = alt.X("date:T", axis=MONTH_AXIS, scale=alt.Scale(type="utc"))
    chart = alt.layer(
        alt.Chart(alt.Data(values=worth.to_dicts())).mark_line().encode(x=x, y="net worth:Q"),
        alt.Chart(alt.Data(values=snaps.to_dicts()))
        .mark_point(size=80, filled=True, color="#1f8a4c")
        .encode(x=x, y="net worth:Q", tooltip=["date:T", "net worth:Q"]),
    ).properties(width="container", height=240)
    return chart.to_dict(validate=VALIDATE)


def cash_flow_chart(flow: pl.DataFrame) -> dict[str, Any]:
    """Income, spending and net per month, side by side (click: the month's rows); the month
    still running (marts' `partial`) is pale, and its axis label and tooltip say "so far"."""
    partial = flow["partial"] if "partial" in flow.columns else pl.repeat(False, flow.height)
    long = (
        flow.with_columns(partial.alias("partial"))
        .select(
            pl.col("month").cast(pl.String).str.slice(0, 7).alias("ym"),  # what a click drills into
            (
                pl.col("month").cast(pl.String).str.slice(0, 7)
                + pl.when(pl.col("partial")).then(pl.lit(" so far")).otherwise(pl.lit(""))
            ).alias("axis"),
            pl.col("month").cast(pl.String).alias("month"),
            pl.when(pl.col("partial"))
            .then(pl.lit("so far: the month is still running"))
            .otherwise(pl.lit("whole month"))
            .alias("state"),
            (pl.col("income_cents") / 100).alias("income"),
            (pl.col("spending_cents") / 100).alias("spending"),
            (pl.col("net_cents") / 100).alias("net"),
        )
        .unpivot(index=["ym", "axis", "month", "state"], variable_name="kind")
    )
    chart = (
        alt.Chart(alt.Data(values=long.to_dicts()))
        .mark_bar(cursor="pointer")
        .encode(
            x=alt.X(
                "axis:O",
                axis=alt.Axis(
                    labelExpr="utcFormat(toDate(slice(datum.value, 0, 7) + '-01'), '%b %Y')"
                    " + (length(datum.value) > 7 ? ' (so far)' : '')",
                    labelAngle=-40,
                    labelOverlap=True,
                    title=None,
                ),
            ),
            y=alt.Y("value:Q", title=None),
            color=alt.Color("kind:N", title=None),
            xOffset="kind:N",
            opacity=alt.condition("datum.state == 'whole month'", alt.value(1.0), alt.value(0.4)),
            tooltip=[*_month_tip("kind"), alt.Tooltip("state:N", title="counted")],
        )
        .properties(width="container", height=240)
    )
    return chart.to_dict(validate=VALIDATE)


def _kept(path: Path | None) -> dict[str, Any]:
    """The compiled specs kept by the last page written beside the warehouse ({} when none)."""
    if path is None:
        return {}
    try:
        kept = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def _keep(path: Path | None, compiled: dict[str, Any]) -> None:
    if path is None:
        return
    try:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(compiled), "utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a folder that cannot take it: compiled again next time, nothing else changes


def charts(data: dict[str, Any], folder: Path | None = None) -> dict[str, dict[str, Any]]:
    """The four charts as Vega specs (aggregated data inline), compiled from Vega-Lite here so
    the page does not compile them on every open (a quarter of its time to interactive).

    Compiling is deterministic, and a quiet day's charts are the day before's: each compiled
    spec is kept in `folder` (beside the warehouse) under the SHA-256 of its Vega-Lite spec,
    and a chart whose spec is unchanged is taken from there, not compiled again (vl-convert's
    first compile in a process starts its JavaScript engine: about 0.3 s; docs/benchmarks.md)."""
    from importlib.metadata import version as installed

    specs = {
        "chart-spending-month": spending_chart(data["results"]),
        "chart-categories": categories_chart(data["categories"]),
        "chart-net-worth": net_worth_chart(data["worth"], data["snapshots"]),
        "chart-cash-flow": cash_flow_chart(data["flow"]),
    }
    version = alt.SCHEMA_VERSION.lstrip("v")[:3]
    path = None
    if folder is not None:
        path = folder / f".centsync-report-charts-{installed('vl-convert-python')}-vl{version}.json"
    kept, compiled, keys = _kept(path), {}, {}
    for name, spec in specs.items():
        text = json.dumps(spec, default=float)  # (DuckDB sums come as Decimal)
        key = keys[name] = hashlib.sha256(text.encode()).hexdigest()
        if isinstance(kept.get(key), dict):
            compiled[name] = kept[key]
            continue
        import vl_convert

        vega = vl_convert.vegalite_to_vega(json.loads(text), vl_version=version)
        vega.pop("$schema", None)  # a URL the page never fetches: left out
        # the card behind the chart shows through, light or dark (the page's dark theme
        # cannot override a background written into the spec)
        vega.pop("background", None)
        vega["padding"] = 10  # inside the card: its CSS padding would widen a "container" width
        compiled[name] = vega
    if any(key not in kept for key in keys.values()):
        _keep(path, {keys[name]: vega for name, vega in compiled.items()})
    return compiled
