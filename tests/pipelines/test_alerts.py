"""Alerts reach a local HTTP endpoint through Apprise: DIFFER, a key about to expire, a failed
run; never carrying the API key."""

from __future__ import annotations

import datetime as dt
import json

import dagster as dg
import pytest

from centsync.extract import KeyExpired
from centsync.pipelines import alerts, failures
from centsync.pipelines.cli import runner
from centsync.pipelines.defs.alerts import alert_on_failure, alert_on_findings
from centsync.pipelines.defs.failures import known_failures
from centsync.pipelines.results import RESULT_KEY
from centsync.pipelines.settings import Settings

from .alert_receiver import Receiver
from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def _report(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "verdict": "agree",
        "rows": {"rejected": 0},
        "key_expires_at": "2027-06-01T00:00:00+00:00",
        "warehouse": "/w.duckdb",
    }
    return {**base, **over}


def test_a_clean_result_calls_for_no_alert() -> None:
    now = dt.datetime(2026, 11, 25, tzinfo=dt.UTC)
    assert alerts.from_result(_report(), "r1", now) == []


def test_each_finding_is_its_own_alert() -> None:
    now = dt.datetime(2026, 11, 25, tzinfo=dt.UTC)
    found = alerts.from_result(
        _report(
            verdict="differ",
            reconciliation={"differ": 3},
            rows={"rejected": 2},
            key_expires_at="2026-12-05T00:00:00+00:00",
        ),
        "r1",
        now,
    )
    assert [a.kind for a in found] == ["differ", "rejected", "key_expiring"]
    assert "3 numbers differ" in found[0].body and "expires in 10 days" in found[2].title


def test_a_write_back_with_rejected_rows_alerts() -> None:
    found = alerts.from_result({"queued": 1, "rejected": 1, "needs_attention": 1}, "r1")
    assert [(a.kind, a.title) for a in found] == [
        ("rejected", "centsync: 2 write-back row(s) not posted")
    ]
    # whose it is and where to look, and no "warehouse ?" when none is known
    assert "yours to fix" in found[0].body and "`centsync writeback --rejected`" in found[0].body
    assert "warehouse" not in found[0].body.split("(Dagster run")[1]


def test_an_alert_never_carries_the_key() -> None:
    kind = failures.Kind(failures.AUTH, "the service refused the API key", "check the key.")
    failure = failures.Failure(kind, "Unauthenticated", "the key sk_live_123 was refused", "", "r1")
    alert = alerts.failed("refresh_job", failure)
    assert "sk_live_123" not in json.dumps(alerts.scrubbed(alert, ("sk_live_123",)).to_json())


def _differ(http_env: HttpEnv) -> None:
    http_env.refresh()
    (tid,) = http_env.sql("SELECT id FROM core.transactions ORDER BY booked_at LIMIT 1")[0]
    http_env.sql("UPDATE core.transactions SET amount = amount - 1234 WHERE id = ?", [tid])


def test_a_differ_verdict_reaches_the_endpoint(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    _differ(http_env)
    with Receiver() as inbox:
        monkeypatch.setenv("CENTSYNC_ALERT_URL", inbox.url)
        code, _ = http_env.reconcile()
        got = inbox.wait_for(1, timeout=10)
    assert code == 1
    assert [m["title"] for m in got] == ["centsync: the numbers DIFFER from the service's"]
    assert got[0]["type"] == "failure" and "numbers differ" in got[0]["message"]
    assert http_env.sb.keys["read_only"] not in json.dumps(got)


def test_no_alert_url_sends_nothing(http_env: HttpEnv) -> None:
    _differ(http_env)
    with Receiver() as inbox:
        code, _ = http_env.reconcile()  # no CENTSYNC_ALERT_URL in the environment
        assert code == 1 and inbox.received == []


def test_a_key_expiring_soon_and_a_failed_run_alert(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    soon = http_env.admin(
        "POST", "/_sandbox/keys", {"scopes": ["data.read"], "expires_in_days": 10}
    )
    monkeypatch.setenv("CENTSYNC_API_KEY", soon["key"])
    with Receiver() as inbox:
        monkeypatch.setenv("CENTSYNC_ALERT_URL", inbox.url)
        http_env.refresh()
        got = inbox.wait_for(1, timeout=10)
        # the days are counted on our clock, the expiry set on the sandbox's (which lags ours)
        assert [m["title"][:33] for m in got] == ["centsync: the API key expires in "]
        assert "create a new one" in got[0]["message"]
        monkeypatch.setenv("CENTSYNC_API_KEY", "not-a-key-but-secret-all-the-same")
        code, _ = http_env.cli("refresh")
        got = inbox.wait_for(2, timeout=10)
    assert code == 3
    assert got[1]["title"] == "centsync: refresh_job failed"
    assert "not-a-key-but-secret" not in json.dumps(got)
    assert soon["key"] not in json.dumps(got)


# --- one reader, one text: a run Dagster started alerts as a run the CLI started ---


def _run(
    op: dg.OpDefinition, tags: dict[str, str] | None = None
) -> tuple[dg.DagsterInstance, dg.ExecuteInProcessResult]:
    """`op` run as `refresh_job` in a real (in-memory) instance, as a schedule would start it."""
    job = dg.GraphDefinition(name="refresh_job", node_defs=[op]).to_job()
    instance = dg.DagsterInstance.ephemeral()
    run = job.execute_in_process(instance=instance, raise_on_error=False, tags=tags)
    return instance, run


def _sensor_context(
    name: str, instance: dg.DagsterInstance, run: dg.ExecuteInProcessResult, settings: Settings
) -> dg.RunStatusSensorContext:
    event = run.get_run_success_event() if run.success else run.get_run_failure_event()
    return dg.build_run_status_sensor_context(
        sensor_name=name,
        dagster_event=event,
        dagster_instance=instance,
        dagster_run=run.dagster_run,
        resources={"settings": settings},
    )


@dg.op(name="transactions")
def _key_expired() -> None:
    with known_failures():
        raise KeyExpired(
            status=401, code="key_expired", message="expired", method="GET", path="/v1/me"
        )


@dg.op(name="reconciliation")
def _records_a_difference() -> dg.Output[None]:
    result = {"verdict": "differ", "differ": 3, "warehouse": "/w.duckdb"}
    yield dg.AssetMaterialization("reconciliation", metadata={RESULT_KEY: result})
    yield dg.Output(None)


def test_a_scheduled_failure_alerts_with_the_cli_s_headline_and_what_to_do() -> None:
    instance, run = _run(_key_expired)
    assert not run.success
    with Receiver() as inbox:
        settings = Settings(alert_url=inbox.url)
        assert runner.alert(settings, "refresh_job", run) == 1  # as the CLI sends it
        context = _sensor_context("alert_on_failure", instance, run, settings)
        alert_on_failure(context.for_run_failure())  # as the daemon's sensor sends it
        cli, sensor = inbox.wait_for(2, timeout=10)
    assert cli == sensor
    assert cli["title"] == "centsync: refresh_job failed"
    # the classified failure: its headline, the error's message, what to do, the run
    assert cli["message"].startswith("the API key has expired: GET /v1/me -> 401 key_expired")
    assert "What to do: create a new key and set CENTSYNC_API_KEY." in cli["message"]
    assert run.run_id in cli["message"]


def test_a_scheduled_run_s_findings_alert_as_the_cli_s_and_a_cli_run_is_left_to_the_cli() -> None:
    instance, run = _run(_records_a_difference)
    assert run.success
    with Receiver() as inbox:
        settings = Settings(alert_url=inbox.url)
        assert runner.alert(settings, "refresh_job", run) == 1
        alert_on_findings(_sensor_context("alert_on_findings", instance, run, settings))
        cli, sensor = inbox.wait_for(2, timeout=10)
        # a run the CLI started carries its tag: the sensors leave it to the CLI
        instance, tagged = _run(_records_a_difference, tags={alerts.CLI_TAG: "reconcile"})
        alert_on_findings(_sensor_context("alert_on_findings", instance, tagged, settings))
        assert inbox.received == [cli, sensor]
    assert cli == sensor and cli["title"] == "centsync: the numbers DIFFER from the service's"


def test_a_stop_asked_for_sends_no_alert() -> None:
    @dg.op(name="transactions")
    def stopped() -> None:
        raise KeyboardInterrupt

    instance, run = _run(stopped)
    with Receiver() as inbox:
        settings = Settings(alert_url=inbox.url)
        assert runner.alert(settings, "refresh_job", run) == 0
        alert_on_failure(
            _sensor_context("alert_on_failure", instance, run, settings).for_run_failure()
        )
        assert inbox.received == []
