"""The report's charts as Vega-Lite specs (built with Altair), aggregated data inline.

Month axes are temporal and labelled with the year ("Jun 2025"); every mark a person can click
carries `ym` (the month as `YYYY-MM`) or `category_name`, which the page's click listener turns
into a drill-down. Widths follow the container, so the charts fit a phone.

Each chart is two halves: its rows (Polars: `*_rows`) and its spec around them (Altair:
`*_spec`). A quiet day's page needs only the first (`charts`): Altair, its JSON-schema and
narwhals imports (about 0.17 s of a refresh, docs/benchmarks.md) are paid only when a chart must
be compiled again.
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import version as installed
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    import altair as alt

RED = "#c53030"
# a chart's rows: the inline data sets its spec holds, in the order its `*_spec` takes them,
# and what else shapes the spec (the spending chart's red layer is there only when a month differs)
Rows = tuple[list[list[dict[str, Any]]], tuple[Any, ...]]


# Altair checks each spec against the Vega-Lite JSON schema as it writes it (about 0.14 s of a
# refresh); the specs are ours and fixed in shape, so a refresh writes them unchecked and the
# tests check them (tests/pipelines/test_report_current.py sets this to True).
VALIDATE = False


def _month_axis() -> alt.Axis:
    import altair as alt

    return alt.Axis(format="%b %Y", labelAngle=-40, labelOverlap=True, title=None)


def _month_x(field: str = "month") -> alt.X:
    import altair as alt

    # UTC: a date-only string is midnight UTC, so a local time unit would show the month
    # before it west of Greenwich
    return alt.X(f"{field}:T", timeUnit="utcyearmonth", axis=_month_axis())


def _month_tip(series: str) -> list[Any]:
    """A month chart's tooltip: the month (`ym`), the series the mark is of, its amount."""
    import altair as alt

    return [
        alt.Tooltip("ym:N", title="month"),
        f"{series}:N",
        alt.Tooltip("value:Q", format=",.2f"),
    ]


def spending_rows(results: pl.DataFrame) -> Rows:
    """Monthly spending, local against the service's, and whether any month differs."""
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
    return [long.to_dicts()], (bool(spend["differs"].any()),)


def spending_spec(rows: Rows) -> dict[str, Any]:
    """Monthly spending, local against the service's; months that differ as red points."""
    import altair as alt

    (values,), (differs,) = rows
    base = alt.Chart(alt.Data(values=values)).encode(
        x=_month_x(), y=alt.Y("value:Q", title="spent")
    )
    tip = _month_tip("side")
    layers = [
        base.mark_line(point=True, cursor="pointer").encode(
            color=alt.Color("side:N", title=None), tooltip=tip
        )
    ]
    if differs:  # (an empty layer makes Vega warn of an infinite extent)
        layers.append(
            base.transform_filter("datum.differs")
            .mark_point(size=140, filled=True, color=RED, cursor="pointer")
            .encode(tooltip=tip)
        )
    chart = alt.layer(*layers).properties(width="container", height=240)
    return chart.to_dict(validate=VALIDATE)


def categories_rows(categories: pl.DataFrame) -> Rows:
    """Spending by category over the last 12 months."""
    values = categories.select("category_name", (pl.col("amount_cents") / -100).alias("spent"))
    return [values.to_dicts()], ()


def categories_spec(rows: Rows) -> dict[str, Any]:
    """Spending by category over the last 12 months, most spent on top (click: its rows)."""
    import altair as alt

    (values,), () = rows
    chart = (
        alt.Chart(alt.Data(values=values))
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


def net_worth_rows(daily: pl.DataFrame, snapshots: pl.DataFrame) -> Rows:
    """The reconstructed net-worth curve at month ends, and each refresh's snapshot."""
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
    return [worth.to_dicts(), snaps.to_dicts()], ()


def net_worth_spec(rows: Rows) -> dict[str, Any]:
    """The reconstructed net-worth curve, with each refresh's snapshot as a point."""
    import altair as alt

    (worth, snaps), () = rows
    x = alt.X("date:T", axis=_month_axis(), scale=alt.Scale(type="utc"))
    chart = alt.layer(
        alt.Chart(alt.Data(values=worth)).mark_line().encode(x=x, y="net worth:Q"),
        alt.Chart(alt.Data(values=snaps))
        .mark_point(size=80, filled=True, color="#1f8a4c")
        .encode(x=x, y="net worth:Q", tooltip=["date:T", "net worth:Q"]),
    ).properties(width="container", height=240)
    return chart.to_dict(validate=VALIDATE)


def cash_flow_rows(flow: pl.DataFrame) -> Rows:
    """Income, spending and net per month; the month still running (marts' `partial`) so
    marked."""
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
    return [long.to_dicts()], ()


def cash_flow_spec(rows: Rows) -> dict[str, Any]:
    """Income, spending and net per month, side by side (click: the month's rows); the month
    still running is pale, and its axis label and tooltip say "so far"."""
    import altair as alt

    (values,), () = rows
    chart = (
        alt.Chart(alt.Data(values=values))
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


SPECS = {
    "chart-spending-month": spending_spec,
    "chart-categories": categories_spec,
    "chart-net-worth": net_worth_spec,
    "chart-cash-flow": cash_flow_spec,
}


def _all_rows(data: dict[str, Any]) -> dict[str, Rows]:
    return {
        "chart-spending-month": spending_rows(data["results"]),
        "chart-categories": categories_rows(data["categories"]),
        "chart-net-worth": net_worth_rows(data["worth"], data["snapshots"]),
        "chart-cash-flow": cash_flow_rows(data["flow"]),
    }


def _recipe(name: str, shape: tuple[Any, ...]) -> str | None:
    """What a chart's spec is made of but its rows: the chart, its shape, this module's code
    and Altair's version (None when the code cannot be read: then nothing is kept)."""
    try:
        code = Path(__file__).read_bytes()
    except OSError:
        return None
    made = [name, list(shape), hashlib.sha256(code).hexdigest(), installed("altair")]
    return hashlib.sha256(json.dumps(made, default=str).encode()).hexdigest()


def _layout(found: list[Any], given: list[Any]) -> list[int] | None:
    """Which of the chart's data sets (`given`) each inline `values` list of its spec (`found`)
    is; None when one is not exactly one of them (then the compile is not kept)."""
    layout = []
    for values in found:
        same = [i for i, rows in enumerate(given) if rows == values]
        if len(same) != 1:
            return None
        layout.append(same[0])
    return layout


def _from_kept(hit: Any, given: list[Any]) -> dict[str, Any] | None:
    """A kept compile with today's rows put in (None when the entry does not fit them)."""
    if not isinstance(hit, dict) or not isinstance(hit.get("vega"), dict):
        return None
    vega, layout = hit["vega"], hit.get("layout")
    sources = _sources(vega)
    if not isinstance(layout, list) or len(layout) != len(sources):
        return None
    if not all(isinstance(i, int) and 0 <= i < len(given) for i in layout):
        return None
    for source, i in zip(sources, layout, strict=True):
        source["values"] = _as_js(given[i])
    return vega


def _compiled_now(name: str, rows: Rows, given: list[Any]) -> tuple[dict[str, Any], Any]:
    """The chart compiled from its Vega-Lite spec (Altair and vl-convert), and what to keep of
    it (None when the compile does not hold its rows as given)."""
    import altair as alt

    spec = SPECS[name](rows)
    plain = json.loads(json.dumps(spec, default=float))  # (DuckDB sums come as Decimal)
    found: list[Any] = []
    _inline(plain, found)
    vega = _compile(plain, alt.SCHEMA_VERSION.lstrip("v")[:3])
    layout = _layout(found, given)
    held = json.dumps([d["values"] for d in _sources(vega)])
    if layout is None or held != json.dumps(_as_js(found)):
        return vega, None
    return vega, {"vega": vega, "layout": layout}


def charts(data: dict[str, Any], folder: Path | None = None) -> dict[str, dict[str, Any]]:
    """The four charts as Vega specs (aggregated data inline), compiled from Vega-Lite here so
    the page does not compile them on every open (a quarter of its time to interactive).

    Compiling does not look at the inline rows, only at the spec around them, and a quiet day's
    specs are the day before's (the net-worth chart gains a point, its spec is the same): each
    compiled spec is kept in `folder` (beside the warehouse) under what makes its spec but the
    rows (`_recipe`: the chart, its shape, this module's code, Altair's version), with which of
    the chart's data sets each of its inline lists is. A chart whose recipe is kept is the kept
    compile with today's rows put in: neither Altair nor vl-convert is imported (vl-convert's
    first compile in a process starts its JavaScript engine: about 0.35 s; Altair's imports
    0.17 s; docs/benchmarks.md). A compile is kept only when its data sets hold its rows as
    given and each is exactly one of the chart's data sets."""
    path = None
    if folder is not None:
        name = (
            f".centsync-report-charts-{installed('vl-convert-python')}-altair{installed('altair')}"
        )
        path = folder / f"{name}.json"
    kept, compiled, keep, missed = _kept(path), {}, {}, False
    for name, rows in _all_rows(data).items():
        given = json.loads(json.dumps(rows[0], default=float))
        key = _recipe(name, rows[1])
        hit = _from_kept(kept.get(key), given) if key is not None else None
        if key is not None and hit is not None:
            compiled[name] = hit
            keep[key] = kept[key]
            continue
        missed = True
        compiled[name], kept_now = _compiled_now(name, rows, given)
        if key is not None and kept_now is not None:
            keep[key] = kept_now
    if missed:  # the file holds this page's charts only
        _keep(path, keep)
    return compiled
