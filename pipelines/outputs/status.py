"""`centsync status`: what a warehouse holds, read from the file alone (no request)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from centsync.pipelines.outputs import report_path
from centsync.transform.contract import key_expires_soon
from centsync.warehouse import connect_readonly, reads
from centsync.warehouse.errors import NoWarehouseError
from centsync.warehouse.outbox import Outbox, outbox_path

# the tables an analyst asks about, in the order `status` lists them
TABLES = (
    "core.transactions",
    "core.accounts",
    "core.connections",
    "core.categories",
    "marts.spending_by_month_category",
    "marts.balance_daily",
    "marts.net_worth_daily",
    "recon.results",
)


def read_status(
    warehouse: Path,
    inbox: Path | None = None,
    outbox: Path | None = None,
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    """The documented `centsync status --json` object.

    `inbox` defaults to `inbox/` beside the warehouse and `outbox` to the outbox file beside
    it (the settings' own defaults); the CLI passes its settings' inbox. `now` decides the
    key-expiry warning (default: the current time).
    """
    if not warehouse.exists():
        raise NoWarehouseError(f"no warehouse at {warehouse}: run `centsync refresh` first")
    con = connect_readonly(warehouse)
    try:
        meta = reads.meta_values(con)
        last = reads.latest_refresh(con)
        succeeded = reads.latest_successful_refresh(con)
        span = reads.synced_range(con)
        verification = reads.verification_state(con)
        tables = reads.row_counts(con, TABLES)
        recon = reads.latest_reconciliation(con)
        from_refresh = reads.rejected_by_latest_refresh(con)
    finally:
        con.close()
    box = outbox or outbox_path(warehouse)
    expires = meta.get("key.expires_at")
    stale = _stale_report(warehouse, succeeded)
    last, succeeded, verification, recon = (
        _whole_seconds(x) for x in (last, succeeded, verification, recon)
    )
    return {
        "warehouse": str(warehouse),
        "size_mb": round(warehouse.stat().st_size / 2**20, 1),
        "source": _source(meta),
        "last_refresh": last,
        "last_success": succeeded,
        "synced_range": span if span["transactions"] else None,
        "verification": verification,
        "tables": tables,
        "reconciliation": recon,
        "outbox": _outbox(box, inbox or warehouse.absolute().parent / "inbox"),
        "rejected": rejected_entries(from_refresh, Outbox(box).unresolved()),
        "key_expires_at": expires,
        "warnings": _warnings(expires, last, now or dt.datetime.now(dt.UTC)) + stale,
    }


def _whole_seconds(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """The row with its times as ISO 8601 text to the second, as every `--json` prints them
    (the warehouse keeps microseconds; nobody reads them)."""
    if row is None:
        return None
    return {
        k: v.isoformat(timespec="seconds") if isinstance(v, dt.datetime) else v
        for k, v in row.items()
    }


def _source(meta: dict[str, str]) -> dict[str, Any] | None:
    """Where the warehouse's data comes from (None: not bound yet)."""
    if not meta.get("source.base_url"):
        return None
    keys = ("base_url", "account_id", "currency", "timezone", "bound_at")
    return {k: meta.get(f"source.{k}") for k in keys}


def _warnings(expires: str | None, last: dict[str, Any] | None, now: dt.datetime) -> list[str]:
    """What needs doing: a key that expires soon, a last refresh that did not succeed."""
    warnings = []
    if expires:
        at = dt.datetime.fromisoformat(expires)
        if key_expires_soon(at, now):
            left = at - now
            warnings.append(
                f"the API key expires in {max(0, left.days)} days ({expires[:10]}): create a new one"
            )
    if last and last["status"] not in ("succeeded", "running"):
        warnings.append(f"the last refresh {last['status']}: run `centsync refresh`")
    return warnings


def _stale_report(warehouse: Path, succeeded: dict[str, Any] | None) -> list[str]:
    """A report next to the warehouse older than the last successful refresh (a failed write,
    an older copy put back): it shows numbers the warehouse no longer holds."""
    path = report_path(warehouse)
    if succeeded is None or succeeded["finished_at"] is None or not path.exists():
        return []
    written = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC)
    finished = succeeded["finished_at"].astimezone(dt.UTC)
    if written >= finished:
        return []
    return [
        f"the report {path} is older than the last refresh ({succeeded['refresh_id']}, "
        f"{finished:%Y-%m-%d %H:%M} UTC): run `centsync report` to rewrite it"
    ]


def _outbox(outbox: Path, inbox: Path) -> dict[str, Any]:
    """The outbox file's rows per state (the truth, newer than the warehouse's copy)."""
    return {
        "path": str(outbox),
        "states": Outbox(outbox).counts(),
        "inbox": str(inbox),
        "inbox_files": len(list(inbox.glob("*.csv"))) if inbox.is_dir() else 0,
    }


def rejected(warehouse: Path, outbox: Path | None = None) -> list[dict[str, Any]]:
    """Every row set aside that still is (`rejected_entries`), read from the files alone:
    `centsync writeback --rejected` lists them, `centsync status` too."""
    from_refresh: list[dict[str, Any]] = []
    if warehouse.exists():
        con = connect_readonly(warehouse)
        try:
            from_refresh = reads.rejected_by_latest_refresh(con)
        finally:
            con.close()
    return rejected_entries(from_refresh, Outbox(outbox or outbox_path(warehouse)).unresolved())


def rejected_entries(
    from_refresh: list[dict[str, Any]], from_outbox: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One entry per row set aside: what the latest refresh rejected of what the service sent
    (the service's to fix), then the write-back's rows its checks rejected, the service refused
    or that need attention, not fixed since (the person's to fix); each with its source and
    reason."""
    out = [
        {
            "origin": "refresh",
            "state": "rejected",
            "source": f"the service's {r['entity']}"
            + (f" {r['record_id']}" if r["record_id"] else ""),
            "reason": r["reason"],
            "at": r["rejected_at"].isoformat(timespec="seconds"),
            "whose": "the service's data: report it; the next refresh lands it once fixed",
            "row": r["record"],
        }
        for r in from_refresh
    ]
    for r in from_outbox:
        line = "" if r["source_line"] is None else f":{r['source_line']}"
        out.append(
            {
                "origin": "writeback",
                "state": r["state"],
                "source": f"{r['source_name']}{line}",
                "reason": r["reason"] or "",
                "at": r["updated_at"].isoformat(timespec="seconds"),
                "whose": "yours: fix the row and drop it into the inbox again"
                if r["state"] == "rejected"
                else "yours: see the reason",
                "row": r["row_text"] or "",
            }
        )
    return out
