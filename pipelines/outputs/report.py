"""The reconciliation report: one self-contained HTML page (no network needed to view it).

The page is rendered from a Jinja2 template with autoescaping (every string from the service is
escaped) and charts as Vega-Lite specs built with Altair (`report_charts.py`), drawn by the Vega
runtime that vl-convert ships, inlined. Its tables of transactions are DataTables, from the
offline bundle itables ships, inlined too; what they hold is in `report_data.py` (aggregates of
every month, the rows of a bounded set of months), so a 1,000,000-row warehouse's page stays small.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from centsync.pipelines.outputs import report_data, report_path
from centsync.pipelines.outputs.report_charts import charts
from centsync.pipelines.outputs.verdict_words import VERDICT_WORDS
from centsync.transform import changes as change_words
from centsync.transform.money import cents_text
from centsync.warehouse import connect_readonly, history, reads, report_reads
from centsync.warehouse import marts as store

if TYPE_CHECKING:
    import jinja2

_SCRIPT_END = re.compile("</(script)", re.I)
MAX_DIFFERENCES = 200
MAX_UNPAIRED = 200


def default_path(warehouse: Path) -> Path:
    """The report's default place: next to the warehouse."""
    return report_path(warehouse)


def keep_current(
    warehouse: Path, asked: bool, warn: Callable[[str], None] | None = None
) -> Path | None:
    """After a refresh: write the report next to the warehouse when asked (`--report`) or when
    one is already there (the person has one: it must show this refresh, never an older one).
    None when neither. A rewrite nobody asked for that cannot be written is a warning (`warn`),
    not a failed refresh: the data is published, and `centsync status` says the page is old."""
    if asked:
        return write(warehouse)
    if not default_path(warehouse).exists():
        return None
    try:
        return write(warehouse)
    except OSError as exc:
        if warn:
            warn(
                f"the report {default_path(warehouse)} could not be rewritten ({exc.strerror or exc}): "
                "it shows an older refresh; `centsync report` rewrites it"
            )
        return None


def as_of(refresh_id: str, finished_at: dt.datetime | None) -> str:
    """Which refresh the page shows, in a person's words: "As of the refresh of 27 Nov 2026,
    10:32 UTC (id …)"."""
    if finished_at is None:
        return f"As of refresh {refresh_id} (its finish time is not recorded)"
    at = finished_at.astimezone(dt.UTC)
    return f"As of the refresh of {at.day} {at:%b %Y, %H:%M} UTC (refresh {refresh_id})"


# Bundled with the Vega runtime: hands vegaEmbed to the page's own script (report_page.js.j2),
# which draws each chart from the specs in the page once the transactions table is ready.
RENDER_SNIPPET = """
window.vegaEmbed = vegaEmbed;
"""


@cache
def _runtime(folder: Path) -> str:
    """The charts' runtime (Vega-Lite and vega-embed, bundled by vl-convert): about 1.4 s to
    build, so kept in `folder` (beside the warehouse) under a name of the versions it was built
    from (vl-convert's, and Altair's, which names the Vega-Lite version), and rebuilt only when
    one of them changes. Altair is imported only to build it."""
    from importlib.metadata import version

    name = f".centsync-report-runtime-{version('vl-convert-python')}-altair{version('altair')}.js"
    kept = folder / name
    try:
        return kept.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        pass
    import altair as alt
    import vl_convert

    vl_version = alt.SCHEMA_VERSION.lstrip("v")[:3]
    bundle = vl_convert.javascript_bundle(RENDER_SNIPPET, vl_version=vl_version)
    try:
        tmp = kept.with_name(kept.name + ".tmp")
        tmp.write_text(bundle, "utf-8")
        tmp.replace(kept)
    except OSError:
        pass  # a folder that cannot take it: built again next time, nothing else changes
    return bundle


def _asset(name: str) -> str:
    """A file of templates/ as text."""
    return resources.files("centsync.pipelines.outputs").joinpath(f"templates/{name}").read_text()


# itables' offline DataTables bundle (what its `options.dt_bundle` names), in its package
DT_BUNDLE = ("html", "dt_bundle.js")


@cache
def _tables_runtime() -> tuple[str, str]:
    """DataTables (JavaScript module, CSS) from itables' offline bundle (`connected=False`),
    found in itables' folder without importing it (its imports were 0.02 s of a refresh's page:
    docs/benchmarks.md; tests/pipelines/test_report_current.py checks the path is itables' own)."""
    import importlib.util

    spec = importlib.util.find_spec("itables")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("itables is not installed: `make setup` installs it")
    bundle = Path(next(iter(spec.submodule_search_locations)), *DT_BUNDLE)
    return bundle.read_text(encoding="utf-8"), bundle.with_suffix(".css").read_text("utf-8")


@cache
def _template(folder: Path | None = None) -> jinja2.Template:
    """The page's template; compiled once and kept in `folder` (beside the warehouse) by
    Jinja's own bytecode cache, which compiles it again when the template changes (0.05 s of
    a refresh, docs/benchmarks.md). Jinja is imported here: a refresh without a page to
    rewrite does not import it."""
    import jinja2

    cache = None
    if folder is not None and folder.is_dir():
        cache = jinja2.FileSystemBytecodeCache(str(folder), ".centsync-report-template-%s.cache")
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("centsync.pipelines.outputs", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        bytecode_cache=cache,
    )
    return env.get_template("report.html.j2")


def _script_text(text: str) -> str:
    """Text safe inside a <script> element: no `</script` can end it early (in JSON and in the
    runtimes' strings `<\\/` reads as `</`), nor can `<!--` start the parser's escaped mode."""
    return _SCRIPT_END.sub(r"<\\/\1", text).replace("<!--", "<\\u0021--")


def gather(warehouse: Path, since: int | None = None) -> dict[str, Any]:
    """Everything the page shows, read from the warehouse (read only), aggregated; the changes
    after refresh number `since` (None: what the last refresh changed)."""
    con = connect_readonly(warehouse)
    try:
        run = reads.latest_reconciliation(con)
        if run is None:
            raise LookupError("the warehouse has no reconciliation yet: run `centsync refresh`")
        return {
            "run": run,
            "meta": reads.meta_values(con),
            "refresh": reads.refresh_outcome(con, run["refresh_id"]) or ("unknown", "unknown"),
            "finished_at": reads.refresh_finished_at(con, run["refresh_id"]),
            "span": reads.synced_range(con),
            "results": reads.reconciliation_results(con, run["recon_id"]),
            "categories": reads.spending_by_category_last_year(con),
            "worth": reads.net_worth_by_day(con),
            "snapshots": reads.net_worth_snapshot_points(con),
            "flow": reads.cash_flow_months(con),
            "changes": _changes(con, since),
            **_workbench(con, run),
        }
    finally:
        con.close()


# the refresh a report shows, written into it, so the next one shows what changed since
_SHOWN = re.compile(r'<meta name="centsync-refresh-no" content="(\d+)">')
MAX_CHANGES = 200  # rows the page lists (`centsync changes` has them all)


def _changes(con: Any, since: int | None) -> dict[str, Any]:
    """What refreshes after `since` saw the service change, as the page lists it."""
    if not history.kept(con):
        return {"rows": [], "since": 0, "to": 0, "more": 0}
    last = history.latest_refresh_no(con)
    after = history.before_last_no(con) if since is None or since > last else since
    found = change_words.explain(
        history.changes_since(con, after), dict(store.categories(con).iter_rows())
    )
    rows = [
        {**c, "money": cents_text(c["effect_cents"])}
        for c in sorted(found, key=lambda c: (c["month"], c["category"]), reverse=True)
        if not change_words.touched_only(c)
    ]
    return {
        "rows": rows[:MAX_CHANGES],
        "since": after,
        "to": last,
        "more": len(rows) - MAX_CHANGES,
        "touched": len(found) - len(rows),
    }


def shown_refresh(page: Path) -> int | None:
    """The refresh number a report page showed (None: no page, or one written before 011)."""
    try:
        found = _SHOWN.search(page.read_text("utf-8", errors="replace"))
    except OSError:
        return None
    return int(found.group(1)) if found else None


def _workbench(con: Any, run: dict[str, Any]) -> dict[str, Any]:
    """What the workbench adds: the rows behind the differences, rejected rows, the outbox,
    merchants and the drill-down's rows."""
    results = reads.reconciliation_results(con, run["recon_id"])
    # months that differ: single-month scopes that do not agree, and the months of the rows
    # behind the differences (a whole-history scope names no month of its own)
    single = results.filter(
        ~pl.col("status").is_in(["agree", "unavailable"])
        & (pl.col("from_date").dt.strftime("%Y-%m") == pl.col("to_date").dt.strftime("%Y-%m"))
    )
    row_diffs = report_reads.row_differences(con, run["recon_id"], report_data.MAX_ROW_DIFFERENCES)
    differing = set(single["from_date"].dt.strftime("%Y-%m").to_list()) | {
        m for m in row_diffs["month"].to_list() if m
    }
    names = {**report_reads.category_names(con), **report_reads.account_names(con)}
    return {
        "row_diffs": report_data.readable_row_differences(row_diffs, names),
        "rejected": report_data.readable_rejected(
            report_reads.rejected_rows(con, run["refresh_id"], report_data.MAX_REJECTED)
        ),
        "outbox": report_reads.outbox_rows(con),
        "merchants": report_reads.merchants_last_year(con, 30),
        "analyst": {
            "series": report_reads.recurring_series(con),
            "routes": report_reads.transfer_routes(con),
            "unpaired": report_reads.unpaired_transfers(con, MAX_UNPAIRED),
            "goals": report_reads.expense_goals(con),
        },
        "drill": report_data.drill_block(con, run["recon_id"], differing),
    }


def _writeback(outbox: pl.DataFrame) -> dict[str, Any]:
    """The write-back section: requests by state, and the ones a person should look at."""
    if outbox.is_empty():
        return {"states": [], "attention": [], "total": 0}
    states = outbox.group_by("state").len().sort("state")
    attention = outbox.filter(pl.col("state").is_in(["rejected", "needs_attention", "pending"]))
    return {
        "states": states.rows(),
        "attention": [
            {**r, "money": cents_text(r["amount"])}
            for r in attention.sort("state", "id").head(500).to_dicts()
        ],
        "total": outbox.height,
    }


def _analyst(frames: dict[str, pl.DataFrame]) -> dict[str, list[dict[str, Any]]]:
    """The analysts' marts for the page: every `*_cents` as money text (in units; the page
    names the currency), dates as text."""

    def rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
        return [
            {
                k.removesuffix("_cents"): cents_text(v) if k.endswith("_cents") else v
                for k, v in r.items()
            }
            for r in frame.to_dicts()
        ]

    return {name: rows(frame) for name, frame in frames.items()}


def _money_row(row: dict[str, Any]) -> dict[str, Any]:
    """A comparison for the page: its three amounts as money text, every other field as is."""
    return {
        **row,
        "local": cents_text(row["local_cents"]),
        "server": cents_text(row["server_cents"]),
        "difference": cents_text(row["difference_cents"]),
    }


def _tables(data: dict[str, Any]) -> dict[str, Any]:
    """The page's tables: differences (cause, command), months, categories, merchants."""
    from centsync.transform.reconcile import narrowest_first

    results, drill = data["results"], data["drill"]
    diffs = narrowest_first(results)
    months = (
        results.filter(pl.col("check") == "spending.month")
        .sort("scope")
        .with_columns(pl.col("scope").alias("month"))
    )
    embedded = set(drill["embedded"])
    flow = data["flow"]
    running = (
        {str(m)[:7] for m in flow.filter(pl.col("partial"))["month"].to_list()}
        if "partial" in flow.columns
        else set()
    )
    return {
        "partial_months": sorted(running),
        "differences": report_data.difference_rows(
            diffs.head(MAX_DIFFERENCES).to_dicts(),
            sorted(
                {
                    r["month"]
                    for r in data["row_diffs"]
                    if r["entity"] == "transactions" and r["month"]
                }
            ),
        ),
        "more_differences": max(0, diffs.height - MAX_DIFFERENCES),
        "months": [
            {**_money_row(m), "embedded": m["month"] in embedded, "partial": m["month"] in running}
            for m in months.to_dicts()
        ],
        "categories": [
            {"name": c["category_name"], "spent": cents_text(-c["amount_cents"])}
            for c in data["categories"].to_dicts()
        ],
        "merchants": [
            {
                "name": m["merchant"],
                "label": m["merchant_name"],
                "spent": cents_text(-m["amount_cents"]),
                "n": m["transactions"],
            }
            for m in data["merchants"].to_dicts()
        ],
        "analyst": _analyst(data["analyst"]),
        "row_diffs": data["row_diffs"],
        "rejected": data["rejected"],
        "writeback": _writeback(data["outbox"]),
        "embedded_rows": f"{len(drill['rows']):,}",
        "embedded_months": len(drill["embedded"]),
        "all_months": len(drill["month_rows"]),
    }


def render(warehouse: Path, since: int | None = None) -> str:
    """The page for the warehouse's latest reconciliation (and what changed after refresh
    number `since`)."""
    data = gather(warehouse, since)
    run, meta, span = data["run"], data["meta"], data["span"]
    dt_js, dt_css = _tables_runtime()
    return _template(warehouse.absolute().parent).render(
        verdict=run["verdict"],
        verdict_words=VERDICT_WORDS[run["verdict"]],
        checked=run["checked"],
        explained=run["explained"],
        differ=run["differ"],
        refresh_id=run["refresh_id"],
        as_of=as_of(run["refresh_id"], data["finished_at"]),
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
        warehouse=str(warehouse.absolute()),
        generated_at=f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M:%S UTC}",
        specs_json=_script_text(json.dumps(charts(data, warehouse.absolute().parent), default=str)),
        drill_json=_script_text(json.dumps(data["drill"], default=str, separators=(",", ":"))),
        runtime=_script_text(_runtime(warehouse.absolute().parent)),
        tables_js=_script_text(dt_js),
        tables_css=re.sub("</(style)", r"<\\/\1", dt_css, flags=re.I),
        style=_asset("report_style.css.j2"),
        page_js=_asset("report_page.js.j2"),
        changes=data["changes"],
        **_tables(data),
    )


def write(warehouse: Path, out: Path | None = None) -> Path:
    """Write the report (atomically) and return its absolute path."""
    target = (out or default_path(warehouse)).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(render(warehouse, shown_refresh(target)), encoding="utf-8")
    tmp.replace(target)
    return target
