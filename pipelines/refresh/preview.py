"""`centsync refresh --plan`: what a refresh would do and about how many requests it would
spend, from the warehouse read only and the fewest requests (the plan's own choices,
plan.py; the steps' cost-based plan, steps.history_plan)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from centsync.extract import ApiClient
from centsync.pipelines.contract_book import ContractBook, load_pins
from centsync.pipelines.refresh import learn, plan
from centsync.pipelines.refresh.read import RESUME_KEY, FirstSync
from centsync.pipelines.refresh.steps import history_plan
from centsync.pipelines.refresh.summary import RefreshOptions
from centsync.transform import shapes
from centsync.transform.calendar import month_key
from centsync.warehouse import connect_readonly
from centsync.warehouse import reads as warehouse_reads
from centsync.warehouse.contract import contract_rows


def preview(client: ApiClient, warehouse: Path, options: RefreshOptions) -> dict[str, Any]:
    """What a refresh with `options` would do and about how many requests it would spend
    (`refresh --plan`), from the warehouse read only and the fewest requests: settings and net
    worth (the service's timezone and today), and for a full read the ledger's row count.
    Writes nothing."""
    before = sum(e.requests for e in client.stats.endpoints.values())
    meta: dict[str, str] = {}
    months: list[tuple[str, int, dt.datetime | None]] = []
    stored: dict[str, dict[str, Any]] = {}
    if warehouse.exists():
        con = connect_readonly(warehouse)
        try:
            months = warehouse_reads.months_by_verification(con)
            meta = warehouse_reads.meta_values(
                con, ["verify.last_at", "timezone", "source.currency", RESUME_KEY]
            )
            stored = contract_rows(con)
        finally:
            con.close()
    book = ContractBook(stored, load_pins(options.contract_file))
    client.async_client.reading = book.reading
    started_with = learn.start(
        client, book, {"timezone": meta.get("timezone"), "currency": meta.get("source.currency")}
    )
    now, today = started_with.now, started_with.today
    hot_start = plan.hot_window_start(today, options.hot_months)
    previous = meta.get("timezone")
    mode, reason = plan.choose_mode(
        forced=options.months,
        requested=options.mode,
        timezone_changed=previous is not None and previous != started_with.timezone,
        previous_timezone=previous,
        timezone=started_with.timezone,
        has_local_rows=bool(months),
        resuming=FirstSync.from_json(meta.get(RESUME_KEY)) is not None,
    )
    local = sum(rows for _, rows, _ in months)
    out: dict[str, Any] = {
        "mode": mode,
        "reason": reason,
        "today": today.isoformat(),
        "hot_window_from": month_key(hot_start),
        "rows": local,
        "parts": [],
        "reread_everything": plan.full_read_requests(local),
    }
    if mode == "full":
        counted = learn.summary(client) if book.complete(shapes.TRANSACTIONS_SUMMARY) else None
        out["rows"] = counted.count if counted is not None else learn.list_total(client)
        out["estimate"] = plan.full_read_requests(out["rows"])
        out["reread_everything"] = out["estimate"]
    elif mode in ("hot", "months"):
        first, last = (
            options.months if options.months is not None else (month_key(hot_start), "9999-12")
        )
        rows = sum(r for m, r, _ in months if first <= m <= last)
        out["estimate"] = plan.FIXED_REQUESTS + 1 + max(1, -(-rows // plan.PAGE))
    else:
        history = history_plan(
            months, meta.get("verify.last_at"), options, hot_start=hot_start, now=now
        )
        out["estimate"] = history.estimate()
        out["parts"] = [plan.describe(p) for p in history.parts]
        out["hot_rows"] = history.hot_rows
        out["everything"] = history.everything
    out["requests_spent"] = sum(e.requests for e in client.stats.endpoints.values()) - before
    return out
