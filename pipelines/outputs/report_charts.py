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


def _inline(spec: Any, found: list[Any]) -> Any:
    """The spec with each inline `values` list replaced by its number (the lists in `found`)."""
    if isinstance(spec, dict):
        out = {}
        for k, v in spec.items():
            if k == "values" and isinstance(v, list):
                out[k] = len(found)
                found.append(v)
            else:
                out[k] = _inline(v, found)
        return out
    if isinstance(spec, list):
        return [_inline(v, found) for v in spec]
    return spec


def _as_js(value: Any) -> Any:
    """A row's value as the compiler hands it back: JavaScript has one number type, so a whole
    float (a DuckDB sum, 14400.0) comes back as an int (14400)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _as_js(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_js(v) for v in value]
    return value


def _sources(vega: dict[str, Any]) -> list[dict[str, Any]]:
    """The compiled spec's data sets that hold inline values, in order (source_0, source_1...)."""
    return [d for d in vega.get("data", []) if isinstance(d, dict) and "values" in d]


def _compile(plain: dict[str, Any], version: str) -> dict[str, Any]:
    import vl_convert

    vega = vl_convert.vegalite_to_vega(plain, vl_version=version)
    vega.pop("$schema", None)  # a URL the page never fetches: left out
    # the card behind the chart shows through, light or dark (the page's dark theme
    # cannot override a background written into the spec)
    vega.pop("background", None)
    vega["padding"] = 10  # inside the card: its CSS padding would widen a "container" width
    return vega


def charts(data: dict[str, Any], folder: Path | None = None) -> dict[str, dict[str, Any]]:
    """The four charts as Vega specs (aggregated data inline), compiled from Vega-Lite here so
    the page does not compile them on every open (a quarter of its time to interactive).

    Compiling does not look at the inline rows, only at the spec around them, and a quiet day's
    specs are the day before's (the net-worth chart gains a point, its spec is the same): each
    compiled spec is kept in `folder` (beside the warehouse) under the SHA-256 of its Vega-Lite
    spec with the rows left out, and a chart whose spec is unchanged is the kept one with
    today's rows in it, not compiled again (vl-convert's first compile in a process starts its
    JavaScript engine: about 0.35 s; docs/benchmarks.md). A spec is kept only when its compiled
    data sets hold its rows as given."""
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
    kept, compiled, keep, missed = _kept(path), {}, {}, False
    for name, spec in specs.items():
        plain = json.loads(json.dumps(spec, default=float))  # (DuckDB sums come as Decimal)
        rows: list[Any] = []
        key = hashlib.sha256(json.dumps(_inline(plain, rows)).encode()).hexdigest()
        hit = kept.get(key)
        if isinstance(hit, dict) and len(_sources(hit)) == len(rows):
            for source, values in zip(_sources(hit), rows, strict=True):
                source["values"] = _as_js(values)
            compiled[name] = keep[key] = hit
            continue
        missed = True
        compiled[name] = _compile(plain, version)
        given = json.dumps([d["values"] for d in _sources(compiled[name])])
        if given == json.dumps(_as_js(rows)):  # its rows as given: kept
            keep[key] = compiled[name]
    if missed:  # the file holds this page's charts only
        _keep(path, keep)
    return compiled
