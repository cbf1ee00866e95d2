"""Alerts: a failed run, a DIFFER verdict, rejected rows or a key about to expire, sent through
Apprise to the one URL of `CENTSYNC_ALERT_URL` (e-mail, ntfy, Slack, Matrix, webhooks...).

Both kinds of run send them: the CLI's own runs (`cli/runner.py`, after the run) and the runs
Dagster starts, a schedule's or the sensor's (`defs/alerts.py`, a run-status sensor under the
daemon). Both read the run the same way (`recorded.alerts`), so the same failure gives the same
text. An alert is built from the run's recorded result or its classified failure, never from
the settings, and any text that would carry the API key is refused (`scrubbed`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from centsync.transform.contract import key_expires_soon

if TYPE_CHECKING:
    from centsync.pipelines.failures import Failure

# a run the CLI started carries this tag (`cli/runner.py`): the CLI alerts for it itself
CLI_TAG = "centsync/command"


@dataclass(frozen=True)
class Alert:
    """One notification: what happened (`kind`), a title, and a body that says what to do."""

    kind: str  # failed, differ, rejected, key_expiring
    title: str
    body: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "title": self.title, "body": self.body}


def from_result(
    result: dict[str, Any],
    run_id: str,
    now: dt.datetime | None = None,
    *,
    warehouse: str | None = None,
) -> list[Alert]:
    """The alerts a run's recorded result (`centsync/result`) calls for; none when all is well.
    `warehouse`: the run's warehouse (the settings'), named in each alert with the run."""
    report = result  # a refresh's, a reconciliation's or a write-back's `to_json()`
    where = _where(run_id, warehouse or report.get("warehouse"))
    alerts: list[Alert] = []
    if report.get("verdict") == "differ":
        n = report.get("reconciliation", report).get("differ", "some")
        alerts.append(
            Alert(
                "differ",
                "centsync: the numbers DIFFER from the service's",
                f"Reconciliation: {n} numbers differ from the service's own and nothing explains "
                f"them. Open the report (`centsync report --open`) or run `centsync reconcile` "
                f"to see which {where}.",
            )
        )
    alerts += _rejected_alerts(report, where)
    expires = report.get("key_expires_at")
    if expires:
        at = dt.datetime.fromisoformat(str(expires))
        now = now or dt.datetime.now(dt.UTC)
        if key_expires_soon(at, now):
            days = max(0, (at - now).days)
            alerts.append(
                Alert(
                    "key_expiring",
                    f"centsync: the API key expires in {days} days",
                    f"The API key expires on {str(expires)[:10]}: create a new one and set "
                    f"CENTSYNC_API_KEY before then, or scheduled refreshes will stop {where}.",
                )
            )
    return alerts


def _where(run_id: str, warehouse: Any) -> str:
    """Where an alert's run is: the Dagster run, and the warehouse when known."""
    return (
        f"(Dagster run {run_id}; warehouse {warehouse})" if warehouse else f"(Dagster run {run_id})"
    )


def _rejected_alerts(report: dict[str, Any], where: str) -> list[Alert]:
    """Rows set aside: by the refresh's validation (the service's data: the service's to fix)
    or by the write-back's checks or the service (the person's file: theirs to fix)."""
    rows = report.get("rows")
    if isinstance(rows, dict):
        n = int(rows.get("rejected") or 0)
        if not n:
            return []
        verdict = str(report.get("verdict") or "").upper()
        return [
            Alert(
                "rejected",
                f"centsync: the service sent {n} broken row(s); they were set aside",
                f"The refresh set aside {n} row(s) the service sent that break the API's "
                "documented rules (raw.rejected_rows); every other row landed"
                + (f" and the reconciliation says {verdict}" if verdict else "")
                + ". This is the service's data, not a bug in centsync: report the rows to the "
                "service; the next refresh lands them once they are fixed. `centsync status` "
                f"lists each row with its reason {where}.",
            )
        ]
    if "queued" not in report:
        return []
    keys = ("rejected", "rejected_by_service", "needs_attention")
    n = sum(int(report.get(k) or 0) for k in keys)
    if not n:
        return []
    return [
        Alert(
            "rejected",
            f"centsync: {n} write-back row(s) not posted",
            f"{n} write-back row(s) were not posted: rejected by centsync's checks or refused "
            "by the service, or they need attention. They are yours to fix: "
            "`centsync writeback --rejected` lists each row with its file, line and reason "
            f"(and each file's errors.csv names them too) {where}.",
        )
    ]


def failed(job: str, failure: Failure) -> Alert:
    """The alert for a run that failed: the failure's headline, its message and what to do,
    as the CLI prints them (`failures.classify` names it, whoever started the run)."""
    todo = failure.kind.todo
    advice = f" What to do: {todo}" if todo and todo not in failure.message else ""
    return Alert(
        "failed",
        f"centsync: {job} failed",
        f"{failure.kind.headline}: {failure.message.rstrip('.')}.{advice} "
        f"(Dagster run {failure.run_id}: `centsync ui` shows its log).",
    )


def scrubbed(alert: Alert, secrets: tuple[str, ...]) -> Alert:
    """The alert with any secret (the API key) cut out: an alert never carries the key."""
    title, body = alert.title, alert.body
    for secret in secrets:
        if secret:
            title, body = title.replace(secret, "[key]"), body.replace(secret, "[key]")
    return Alert(alert.kind, title, body)


def send(url: str, alerts: list[Alert], secrets: tuple[str, ...] = ()) -> int:
    """Send each alert to `url` (Apprise URLs, space-separated); how many were delivered.

    A notification service that is down must not fail the run that found the problem: a failed
    delivery is logged and counted, never raised.
    """
    if not url or not alerts:
        return 0
    import logging

    import apprise

    log = logging.getLogger("centsync.alerts")
    sender = apprise.Apprise()
    for one in url.split():
        if not sender.add(one):
            log.warning("CENTSYNC_ALERT_URL holds a URL Apprise does not know: no alert sent there")
    delivered = 0
    for alert in alerts:
        clean = scrubbed(alert, secrets)
        kind = apprise.NotifyType.SUCCESS if alert.kind == "ok" else apprise.NotifyType.FAILURE
        if alert.kind in ("key_expiring", "rejected"):
            kind = apprise.NotifyType.WARNING
        if sender.notify(body=clean.body, title=clean.title, notify_type=kind):
            delivered += 1
        else:
            log.warning("alert %r could not be delivered to CENTSYNC_ALERT_URL", clean.kind)
    return delivered
