"""What a refresh is asked to do (`RefreshOptions`) and what it did (`RefreshSummary`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from centsync.pipelines.results import RefreshResult
from centsync.transform.contract import AskedMode, RefreshMode

if TYPE_CHECKING:
    import duckdb
    import polars as pl

# DuckDB's buffer pool for the refresh (it spills past it). At 1,000,000 rows 160 MB gave the
# same speed as 256 MB with 75 MB less peak RSS; 64 MB ran out of memory.
DEFAULT_DUCKDB_MEMORY = "160MB"


@dataclass
class RefreshOptions:
    """What a refresh should do."""

    # auto: fingerprint-checked; full: re-read all; hot: hot window only (months: set `months`)
    mode: AskedMode = "auto"
    months: tuple[str, str] | None = None  # force-read this month range ("YYYY-MM", inclusive)
    hot_months: int = 2  # the current month and the ones before it that are always re-read
    # (months, rows): rows after each batch staged (negative when a window is voided),
    # then the window's months ("YYYY-MM..YYYY-MM") with 0 once it is committed
    progress: Callable[[str, int], None] | None = None
    # rows the refresh now expects to read in all (called as soon as a count is known)
    expect: Callable[[int], None] | None = None
    reconcile: bool = True  # rebuild the marts and reconcile them before publishing
    # the source the warehouse is bound to: the base URL, or a stable name for a service whose
    # URL changes (the embedded sandbox); empty: the client's base URL
    source: str = ""
    rebind: bool = False  # a warehouse bound elsewhere is set aside (backup) instead of refused
    report: bool = False  # write the HTML report once published (rewritten anyway when one exists)
    # rolling verification (docs/refresh.md): an incremental refresh re-reads the months verified
    # longest ago, so every month is re-read at least once per `verify_days` of the service's
    # clock; `verify_pages` page requests per refresh at least, more when the ledger needs them
    # to keep that period; 0 days turns it off
    verify_days: float = 7.0
    verify_pages: int = 4
    # DuckDB's memory limit during the refresh (Settings.duckdb_memory, CENTSYNC_DUCKDB_MEMORY)
    duckdb_memory: str = DEFAULT_DUCKDB_MEMORY
    # the plan of an incremental refresh (docs/refresh.md, "The plan"): "cost" re-reads each
    # part of the history whose pages cost no more than proving it, "fingerprints" proves every
    # part (fewest pages; edits no aggregate sees wait for rolling verification)
    plan: str = "cost"
    # the contract file (TOML, Settings.contract_file): mappings pinned where the data cannot
    # decide (docs/api-contract.md, "Learned from the data"); None or missing: none pinned
    contract_file: Path | None = None
    # called with the working copy's connection once the refresh has everything (its marts and
    # reconciliation too), before it is published, and the mart frames it wrote (by table name;
    # empty without reconciliation): a shard run reads the owner's tables for the shared lake
    # here instead of opening the published file again (pipelines/fleet/shard.py)
    finished: Callable[[duckdb.DuckDBPyConnection, Mapping[str, pl.DataFrame]], None] | None = None


def verification_settings(days: float | None, pages: int | None, defaults: Any) -> dict[str, Any]:
    """``verify_days`` and ``verify_pages`` for RefreshOptions: the values given (a run's
    config), else the settings' (``defaults``: a `Settings`, read from the environment)."""
    from centsync.extract import ConfigurationError

    out: dict[str, Any] = {}
    for name, given, kind in (("verify_days", days, float), ("verify_pages", pages, int)):
        if given is not None and not given >= 0:  # also refuses nan
            raise ConfigurationError(
                f"{name}={given!r} is not a "
                f"{'number of days' if kind is float else 'whole number of pages'} >= 0: "
                "set it (0 turns rolling verification off), or unset it for the default"
            )
        out[name] = getattr(defaults, name) if given is None else given
    return out


@dataclass
class RefreshSummary:
    """What a refresh did and spent: the CLI prints it, Dagster shows it as metadata."""

    refresh_id: str = ""
    asked: AskedMode = "auto"  # what it was asked (`months` when a range was forced)
    mode: RefreshMode = "incremental"  # what it did (plan.choose_mode)
    reason: str = ""
    rows_landed: int = 0
    rows_changed: int = 0  # rows of every entity (accounts, settings, aggregates too)
    rows_rejected: int = 0
    transactions: int = 0
    # the transactions this refresh found new, altered, and gone from the service
    transactions_new: int = 0
    transactions_updated: int = 0
    transactions_removed: int = 0
    requests: dict[str, int] = field(default_factory=dict)
    requests_total: int = 0
    rereads: int = 0
    retries: int = 0
    floor: int = 0  # ceil(rows read / 200): the fewest list requests that could have read them
    months_checked: int = 0
    months_reread: list[dict[str, Any]] = field(default_factory=list)
    # rolling verification: months re-read because they were verified longest ago, and the
    # oldest verification left after this refresh (ISO date on the service's clock)
    months_verified: int = 0
    oldest_verified: str | None = None
    seconds: float = 0.0  # the steps alone (reading and loading)
    # the refresh as ops.refreshes records it (what `status` shows): from its start to its data,
    # marts and reconciliation ready to publish
    took: float = 0.0
    warnings: list[str] = field(default_factory=list)
    timezone: str = ""
    owner: str = ""  # the account id of GET /v1/me: whose data the warehouse holds
    source: str = ""  # the base URL (or the embedded sandbox's name) it is bound to
    key_expires_at: str | None = None
    backup: str | None = None  # where --rebind kept the old warehouse
    # marts and reconciliation (pipelines/reconcile.py), once the ledger and aggregates landed
    verdict: str = ""  # agree, explained or differ
    recon_id: str = ""
    recon_checked: int = 0
    recon_explained: int = 0
    recon_differ: int = 0
    recon_seconds: float = 0.0
    marts: dict[str, int] = field(default_factory=dict)
    # the first differences, narrowest first
    differences: list[dict[str, Any]] = field(default_factory=list)
    # per reconciliation check (spending.month, accounts.by_type, ...): checked, explained,
    # differ and its first differences
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    # write-back: outbox rows this refresh saw on the service, and the outbox per state after it
    outbox_confirmed: int = 0
    outbox: dict[str, int] | None = None
    # the "not shown" answers (issue 42): each unavailable one with why and what doing without
    # it costs, and the shapes that changed or were re-learned (ops.contract has the rest)
    contract: dict[str, Any] = field(default_factory=dict)
    # reconciliation's checks whose service side could not be read (never counted as agreeing)
    recon_unavailable: int = 0

    def result(self, report_path: str | None = None) -> RefreshResult:
        """What this refresh returns across the Dagster boundary and prints."""
        s = self
        status = "differ" if s.verdict == "differ" else "rejected" if s.rows_rejected else "ok"
        recon = {"recon_id": s.recon_id or None, "checked": s.recon_checked}
        recon |= {"explained": s.recon_explained, "differ": s.recon_differ}
        recon |= {"unavailable": s.recon_unavailable}
        return RefreshResult.model_validate(
            {
                "status": status,
                "asked": s.asked,
                "mode": s.mode,
                "reason": s.reason,
                "refresh_id": s.refresh_id,
                "source": {"base_url": s.source, "owner": s.owner},
                "rows": {"total": s.transactions, "changed": s.rows_changed}
                | {"rejected": s.rows_rejected, "landed": s.rows_landed}
                | {"new": s.transactions_new, "updated": s.transactions_updated}
                | {"removed": s.transactions_removed},
                "requests": {"total": s.requests_total, "floor": s.floor, "retries": s.retries}
                | {"by_endpoint": dict(sorted(s.requests.items()))},
                "months_checked": s.months_checked,
                "months_reread": s.months_reread,
                "verification": {"months": s.months_verified, "oldest_verified": s.oldest_verified},
                "rereads": s.rereads,
                "durations": {
                    "refresh_seconds": round(s.seconds, 3),
                    "reconcile_seconds": round(s.recon_seconds, 3),
                    "seconds": round(s.took, 2),
                },
                "verdict": s.verdict or None,
                "reconciliation": recon | {"differences": s.differences},
                "outbox": {"confirmed": s.outbox_confirmed, "states": s.outbox},
                "contract": {
                    "unavailable": dict(s.contract.get("unavailable", {})),
                    "notes": list(s.contract.get("notes", [])),
                },
                "warnings": list(s.warnings),
                "key_expires_at": s.key_expires_at,
                "backup": s.backup,
                "report_path": report_path,
            }
        )
