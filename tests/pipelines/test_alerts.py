"""Alerts reach a local HTTP endpoint through Apprise: DIFFER, a key about to expire, a failed
run; never carrying the API key."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from centsync.pipelines import alerts

from .alert_receiver import Receiver
from .conftest import Env


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
    assert [(a.kind, a.title) for a in found] == [("rejected", "centsync: 2 rows rejected")]


def test_an_alert_never_carries_the_key() -> None:
    alert = alerts.failed("refresh_job", "r1", "the key sk_live_123 was refused")
    assert "sk_live_123" not in json.dumps(alerts.scrubbed(alert, ("sk_live_123",)).as_json())


def _differ(env: Env) -> None:
    env.refresh()
    (tid,) = env.sql("SELECT id FROM core.transactions ORDER BY booked_at LIMIT 1")[0]
    env.sql("UPDATE core.transactions SET amount = amount - 1234 WHERE id = ?", [tid])


def test_a_differ_verdict_reaches_the_endpoint(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    _differ(env)
    with Receiver() as inbox:
        monkeypatch.setenv("CENTSYNC_ALERT_URL", inbox.url)
        code, _ = env.reconcile()
        got = inbox.wait_for(1, timeout=10)
    assert code == 1
    assert [m["title"] for m in got] == ["centsync: the numbers DIFFER from the service's"]
    assert got[0]["type"] == "failure" and "numbers differ" in got[0]["message"]
    assert env.sb.keys["read_only"] not in json.dumps(got)


def test_no_alert_url_sends_nothing(env: Env) -> None:
    _differ(env)
    with Receiver() as inbox:
        code, _ = env.reconcile()  # no CENTSYNC_ALERT_URL in the environment
        assert code == 1 and inbox.wait_for(1, timeout=1) == []


def test_a_key_expiring_soon_and_a_failed_run_alert(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    soon = env.admin("POST", "/_sandbox/keys", {"scopes": ["data.read"], "expires_in_days": 10})
    monkeypatch.setenv("CENTSYNC_API_KEY", soon["key"])
    with Receiver() as inbox:
        monkeypatch.setenv("CENTSYNC_ALERT_URL", inbox.url)
        env.refresh()
        got = inbox.wait_for(1, timeout=10)
        # the days are counted on our clock, the expiry set on the sandbox's (which lags ours)
        assert [m["title"][:33] for m in got] == ["centsync: the API key expires in "]
        assert "create a new one" in got[0]["message"]
        monkeypatch.setenv("CENTSYNC_API_KEY", "not-a-key-but-secret-all-the-same")
        code, _ = env.cli("refresh")
        got = inbox.wait_for(2, timeout=10)
    assert code == 3
    assert got[1]["title"] == "centsync: refresh_job failed"
    assert "not-a-key-but-secret" not in json.dumps(got)
    assert soon["key"] not in json.dumps(got)
