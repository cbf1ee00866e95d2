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

from centsync.transform.money import cents_text
from centsync.warehouse import connect_readonly

REPORT_NAME = "centsync-report.html"
MAX_DIFFERENCES = 200
MAX_ROWS = 100
VERDICT_WORDS = {
    "agree": "every number agrees with the service's own, to the cent",
    "explained": "every difference from the service's own numbers is explained",
    "differ": "some differences from the service's own numbers are not explained",
}


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


def _df(con: Any, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
    frame = pl.from_arrow(con.sql(sql, params=params or None).to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


def gather(warehouse: Path) -> dict[str, Any]:
    """Everything the page shows, read from the warehouse (read only), aggregated."""
    con = connect_readonly(warehouse)
    try:
        run = con.execute(
            "SELECT recon_id, refresh_id, ran_at, source, verdict, checked, explained, differ "
            "FROM recon.runs ORDER BY ran_at DESC LIMIT 1"
        ).fetchall()
        if not run:
            raise LookupError("the warehouse has no reconciliation yet: run `centsync refresh`")
        recon_id, refresh_id, ran_at, source, verdict, checked, explained, differ = run[0]
        meta = dict(con.execute("SELECT key, value FROM ops.meta").fetchall())
        refresh = con.execute(
            "SELECT status, mode FROM ops.refreshes WHERE refresh_id = ?", [refresh_id]
        ).fetchall()
        span = con.execute(
            "SELECT min(booked_at), max(booked_at), count(*) FROM core.transactions"
        ).fetchall()[0]
        results = _df(
            con,
            """
            SELECT "check", scope, from_date, to_date, local_cents, server_cents,
                   difference_cents, local_count, server_count, status, explanation
            FROM recon.results WHERE recon_id = ?
            """,
            [recon_id],
        )
        rows = _df(
            con,
            """
            SELECT kind, entity, id::VARCHAR AS id, strftime(month, '%Y-%m') AS month, fields,
                   "local"::VARCHAR AS local, server::VARCHAR AS server
            FROM recon.row_differences WHERE recon_id = ? ORDER BY month, id LIMIT ?
            """,
            [recon_id, MAX_ROWS],
        )
        categories = _df(
            con,
            """
            SELECT category_name, sum(amount_cents) AS amount_cents FROM marts.spending_by_month_category
            WHERE month > (SELECT max(month) FROM marts.spending_by_month_category) - INTERVAL 12 MONTH
            GROUP BY 1 ORDER BY 2
            """,
        )
        worth = _df(
            con,
            "SELECT date, net_worth_cents, assets_cents, liabilities_cents FROM marts.net_worth_daily ORDER BY date",
        )
        snapshots = _df(
            con, "SELECT snapshot_at, net_worth_cents FROM marts.net_worth_snapshots ORDER BY 1"
        )
        flow = _df(
            con,
            "SELECT month, income_cents, spending_cents, net_cents FROM marts.cash_flow_by_month ORDER BY month",
        )
    finally:
        con.close()
    return {
        "run": {
            "recon_id": recon_id,
            "refresh_id": refresh_id,
            "ran_at": ran_at,
            "source": source,
            "verdict": verdict,
            "checked": checked,
            "explained": explained,
            "differ": differ,
        },
        "meta": meta,
        "refresh": refresh[0] if refresh else ("unknown", "unknown"),
        "span": span,
        "results": results,
        "rows": rows,
        "categories": categories,
        "worth": worth,
        "snapshots": snapshots,
        "flow": flow,
    }


def _charts(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The four charts as Vega-Lite specs (aggregated data inline)."""
    months = data["results"].filter(pl.col("check") == "spending.month")
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
    spending = alt.layer(
        base.mark_line().encode(color=alt.Color("side:N", title=None)),
        base.transform_filter("datum.differs").mark_point(size=90, filled=True, color="#c53030"),
    ).properties(width=880, height=240)
    cats = (
        alt.Chart(
            alt.Data(
                values=data["categories"]
                .select("category_name", (pl.col("amount_cents") / -100).alias("spent"))
                .to_dicts()
            )
        )
        .mark_bar()
        .encode(
            y=alt.Y("category_name:N", sort="-x", title=None), x=alt.X("spent:Q", title="spent")
        )
        .properties(width=880, height=alt.Step(18))
    )
    # the daily curve at month ends keeps a 10-year history to ~120 points per series
    worth = (
        data["worth"]
        .group_by_dynamic("date", every="1mo")
        .agg(pl.col("net_worth_cents").last())
        .select(
            pl.col("date").cast(pl.String), (pl.col("net_worth_cents") / 100).alias("net worth")
        )
    )
    snaps = data["snapshots"].select(
        pl.col("snapshot_at").dt.date().cast(pl.String).alias("date"),
        (pl.col("net_worth_cents") / 100).alias("net worth"),
    )
    net_worth = alt.layer(
        alt.Chart(alt.Data(values=worth.to_dicts()))
        .mark_line()
        .encode(x=alt.X("date:T", title=None), y=alt.Y("net worth:Q")),
        alt.Chart(alt.Data(values=snaps.to_dicts()))
        .mark_point(size=80, filled=True, color="#1f8a4c")
        .encode(x="date:T", y="net worth:Q", tooltip=["date:T", "net worth:Q"]),
    ).properties(width=880, height=240)
    flow = (
        data["flow"]
        .select(
            pl.col("month").cast(pl.String).str.slice(0, 7).alias("month"),
            (pl.col("income_cents") / 100).alias("income"),
            (pl.col("spending_cents") / 100).alias("spending"),
            (pl.col("net_cents") / 100).alias("net"),
        )
        .unpivot(index="month", variable_name="kind")
    )
    cash = (
        alt.Chart(alt.Data(values=flow.to_dicts()))
        .mark_bar()
        .encode(
            x=alt.X("month:O", title=None),
            y=alt.Y("value:Q", title=None),
            color=alt.Color("kind:N", title=None),
            xOffset="kind:N",
        )
        .properties(width=880, height=240)
    )
    specs = {
        "chart-spending-month": spending.to_dict(),
        "chart-categories": cats.to_dict(),
        "chart-net-worth": net_worth.to_dict(),
        "chart-cash-flow": cash.to_dict(),
    }
    for spec in specs.values():
        spec.pop("$schema", None)  # a URL the page never fetches: left out
    return specs


def render(warehouse: Path) -> str:
    """The page for the warehouse's latest reconciliation."""
    data = gather(warehouse)
    run, meta, results = data["run"], data["meta"], data["results"]
    from centsync.transform.reconcile import narrowest_first

    diffs = narrowest_first(results)
    months = (
        results.filter(pl.col("check") == "spending.month")
        .sort("scope")
        .select(
            "scope",
            "local_count",
            "server_count",
            "local_cents",
            "server_cents",
            "difference_cents",
            "status",
        )
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
        first_day=data["span"][0],
        last_day=data["span"][1],
        transactions=f"{data['span'][2]:,}",
        differences=[
            {
                "status": d["status"],
                "check": d["check"],
                "scope": d["scope"],
                "local": cents_text(d["local_cents"]),
                "server": cents_text(d["server_cents"]),
                "difference": cents_text(d["difference_cents"]),
                "explanation": d["explanation"],
            }
            for d in diffs.head(MAX_DIFFERENCES).to_dicts()
        ],
        more_differences=max(0, diffs.height - MAX_DIFFERENCES),
        rows=data["rows"].to_dicts(),
        months=[
            {
                "month": m["scope"],
                "local_count": m["local_count"],
                "server_count": m["server_count"],
                "local": cents_text(m["local_cents"]),
                "server": cents_text(m["server_cents"]),
                "difference": cents_text(m["difference_cents"]),
                "status": m["status"],
            }
            for m in months.to_dicts()
        ],
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
