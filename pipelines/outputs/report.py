"""The reconciliation report: one self-contained HTML page (no network needed to view it).

The page is rendered from a Jinja2 template with autoescaping (every string from the service is
escaped) and charts as Vega-Lite specs built with Altair, drawn by the Vega runtime that
vl-convert ships, inlined. Data is aggregated before charting, so the page stays small for a
1,000,000-row warehouse.
"""

from __future__ import annotations

import datetime as dt
import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import altair as alt
import jinja2
import polars as pl

from centsync.pipelines.outputs.verdict_words import VERDICT_WORDS
from centsync.transform.money import cents_text
from centsync.warehouse import connect_readonly, reads

REPORT_NAME = "centsync-report.html"
MAX_DIFFERENCES = 200
MAX_ROWS = 100


def default_path(warehouse: Path) -> Path:
    """The report's default place: next to the warehouse."""
    return warehouse.absolute().with_name(REPORT_NAME)


# Bundled with the Vega runtime: draws each chart from the specs in the page.
RENDER_SNIPPET = """
const specs = JSON.parse(document.getElementById("chart-specs").textContent);
for (const [id, spec] of Object.entries(specs)) {
  vegaEmbed("#" + id, spec, {actions: false, renderer: "svg"}).catch((e) => console.error(e));
}
"""


@cache
def _runtime() -> str:
    import vl_convert

    return vl_convert.javascript_bundle(
        RENDER_SNIPPET, vl_version=alt.SCHEMA_VERSION.lstrip("v")[:3]
    )


@cache
def _template() -> jinja2.Template:
    text = (
        resources.files("centsync.pipelines.outputs")
        .joinpath("templates/report.html.j2")
        .read_text()
    )
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(text)


def gather(warehouse: Path) -> dict[str, Any]:
    """Everything the page shows, read from the warehouse (read only), aggregated."""
    con = connect_readonly(warehouse)
    try:
        run = reads.latest_reconciliation(con)
        if run is None:
            raise LookupError("the warehouse has no reconciliation yet: run `centsync refresh`")
        return {
            "run": run,
            "meta": reads.meta_values(con),
            "refresh": reads.refresh_outcome(con, run["refresh_id"]) or ("unknown", "unknown"),
            "span": reads.synced_range(con),
            "results": reads.reconciliation_results(con, run["recon_id"]),
            "rows": reads.reconciliation_rows(con, run["recon_id"], MAX_ROWS),
            "categories": reads.spending_by_category_last_year(con),
            "worth": reads.net_worth_by_day(con),
            "snapshots": reads.net_worth_snapshot_points(con),
            "flow": reads.cash_flow_months(con),
        }
    finally:
        con.close()


def _spending_chart(results: pl.DataFrame) -> dict[str, Any]:
    """Monthly spending, local against the service's; months that differ as red points."""
    months = results.filter(pl.col("check") == "spending.month")
    spend = months.select(
        pl.col("scope").alias("month"),
        (pl.col("local_cents") / -100).alias("local"),
        (pl.col("server_cents") / -100).alias("service"),
        (pl.col("difference_cents") != 0).alias("differs"),
    ).sort("month")
    long = spend.unpivot(index=["month", "differs"], on=["local", "service"], variable_name="side")
    base = alt.Chart(alt.Data(values=long.to_dicts())).encode(
        x=alt.X("month:O", title=None), y=alt.Y("value:Q", title="spent")
    )
    chart = alt.layer(
        base.mark_line().encode(color=alt.Color("side:N", title=None)),
        base.transform_filter("datum.differs").mark_point(size=90, filled=True, color="#c53030"),
    ).properties(width=880, height=240)
    return chart.to_dict()


def _categories_chart(categories: pl.DataFrame) -> dict[str, Any]:
    """Spending by category over the last 12 months, most spent on top."""
    values = categories.select("category_name", (pl.col("amount_cents") / -100).alias("spent"))
    chart = (
        alt.Chart(alt.Data(values=values.to_dicts()))
        .mark_bar()
        .encode(
            y=alt.Y("category_name:N", sort="-x", title=None), x=alt.X("spent:Q", title="spent")
        )
        .properties(width=880, height=alt.Step(18))
    )
    return chart.to_dict()


def _net_worth_chart(daily: pl.DataFrame, snapshots: pl.DataFrame) -> dict[str, Any]:
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
    chart = alt.layer(
        alt.Chart(alt.Data(values=worth.to_dicts()))
        .mark_line()
        .encode(x=alt.X("date:T", title=None), y=alt.Y("net worth:Q")),
        alt.Chart(alt.Data(values=snaps.to_dicts()))
        .mark_point(size=80, filled=True, color="#1f8a4c")
        .encode(x="date:T", y="net worth:Q", tooltip=["date:T", "net worth:Q"]),
    ).properties(width=880, height=240)
    return chart.to_dict()


def _cash_flow_chart(flow: pl.DataFrame) -> dict[str, Any]:
    """Income, spending and net per month, side by side."""
    long = flow.select(
        pl.col("month").cast(pl.String).str.slice(0, 7).alias("month"),
        (pl.col("income_cents") / 100).alias("income"),
        (pl.col("spending_cents") / 100).alias("spending"),
        (pl.col("net_cents") / 100).alias("net"),
    ).unpivot(index="month", variable_name="kind")
    chart = (
        alt.Chart(alt.Data(values=long.to_dicts()))
        .mark_bar()
        .encode(
            x=alt.X("month:O", title=None),
            y=alt.Y("value:Q", title=None),
            color=alt.Color("kind:N", title=None),
            xOffset="kind:N",
        )
        .properties(width=880, height=240)
    )
    return chart.to_dict()


def _charts(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The four charts as Vega-Lite specs (aggregated data inline)."""
    specs = {
        "chart-spending-month": _spending_chart(data["results"]),
        "chart-categories": _categories_chart(data["categories"]),
        "chart-net-worth": _net_worth_chart(data["worth"], data["snapshots"]),
        "chart-cash-flow": _cash_flow_chart(data["flow"]),
    }
    for spec in specs.values():
        spec.pop("$schema", None)  # a URL the page never fetches: left out
    return specs


def _money_row(row: dict[str, Any]) -> dict[str, Any]:
    """A comparison for the page: its three amounts as money text, every other field as is."""
    return {
        **row,
        "local": cents_text(row["local_cents"]),
        "server": cents_text(row["server_cents"]),
        "difference": cents_text(row["difference_cents"]),
    }


def render(warehouse: Path) -> str:
    """The page for the warehouse's latest reconciliation."""
    from centsync.transform.reconcile import narrowest_first

    data = gather(warehouse)
    run, meta, span, results = data["run"], data["meta"], data["span"], data["results"]
    diffs = narrowest_first(results)
    months = (
        results.filter(pl.col("check") == "spending.month")
        .sort("scope")
        .with_columns(pl.col("scope").alias("month"))
    )
    specs = json.dumps(_charts(data), default=str).replace("</", "<\\/")
    return _template().render(
        verdict=run["verdict"],
        verdict_words=VERDICT_WORDS[run["verdict"]],
        checked=run["checked"],
        explained=run["explained"],
        differ=run["differ"],
        refresh_id=run["refresh_id"],
        refresh_status=data["refresh"][0],
        refresh_mode=data["refresh"][1],
        ran_at=f"{run['ran_at']:%Y-%m-%d %H:%M:%S %Z}",
        source_kind=run["source"],
        base_url=meta.get("source.base_url", "not bound"),
        owner=meta.get("source.account_id", ""),
        timezone=meta.get("source.timezone", ""),
        currency=meta.get("source.currency", ""),
        first_day=span["first"],
        last_day=span["last"],
        transactions=f"{span['transactions']:,}",
        differences=[_money_row(d) for d in diffs.head(MAX_DIFFERENCES).to_dicts()],
        more_differences=max(0, diffs.height - MAX_DIFFERENCES),
        rows=data["rows"].to_dicts(),
        months=[_money_row(m) for m in months.to_dicts()],
        warehouse=str(warehouse.absolute()),
        generated_at=f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M:%S UTC}",
        specs_json=specs,
        runtime=_runtime(),
    )


def write(warehouse: Path, out: Path | None = None) -> Path:
    """Write the report (atomically) and return its absolute path."""
    target = (out or default_path(warehouse)).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(render(warehouse), encoding="utf-8")
    tmp.replace(target)
    return target
