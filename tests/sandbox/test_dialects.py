"""The sandbox's dialects (`sandbox/dialects.py`), in-process over one shared state.

Every dialect serves the same `Service` as the contract dialect, so each not-shown surface is
compared number for number: the dialect's answer, read back by a reading written for the test
(`dialect_readings.py`), equals the contract's answer over the same state, while its shape
differs. The documented surfaces are the contract's in every dialect; 429s, rate-limit headers,
write statuses and the list's sort direction are checked per dialect against expectations
written here.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from centsync.extract import ConfigurationError
from centsync.pipelines.cli.main import main
from centsync.pipelines.settings import Settings
from centsync.sandbox import Sandbox
from centsync.sandbox.app import SandboxApp
from centsync.sandbox.dialects import DIALECTS
from centsync.sandbox.server import run_in_thread
from helpers import Api, make_sandbox

from .dialect_readings import DOCUMENTED_TX, READINGS

OTHERS = [name for name in DIALECTS if name != "contract"]
ASCENDING = {"keyed", "camel"}
# Status of a create and of a sync trigger, per dialect (the contract: 201 and 202)
WRITE_STATUS = {
    "contract": (201, 202),
    "keyed": (200, 200),
    "bare": (201, 204),
    "tagged": (200, 200),
    "camel": (200, 200),
    "enveloped": (201, 202),
    "result": (202, 200),
}
# Error codes per dialect: (400, 401, 404, 429 rate limited)
CODES = {
    "contract": ("invalid_request", "unauthenticated", "not_found", "rate_limited"),
    "keyed": (
        "bad_request.invalid_param",
        "unauthorized.bad_api_key",
        "not_found.resource",
        "too_many_requests",
    ),
    "bare": ("validation_failed", "bad_credentials", "resource_not_found", "rate_limit_exceeded"),
    "tagged": ("parameter_invalid", "invalid_api_key", "resource_missing", "rate_limit"),
    "camel": ("INVALID_ARGUMENT", "UNAUTHENTICATED", "NOT_FOUND", "RESOURCE_EXHAUSTED"),
    "enveloped": ("validation_error", "invalid_api_key", "resource_not_found", "too_many_requests"),
    "result": ("invalid_input", "authentication_error", "not_found", "throttled"),
}
# How a 429 `rate_limited` says when to come back: Retry-After, X-RateLimit-Reset, or neither
WAIT = {
    "contract": "retry_after",
    "keyed": "retry_after",
    "bare": "reset_epoch",
    "tagged": "none",
    "camel": "retry_after",
    "enveloped": "reset_seconds",
    "result": "none",
}
# The names of the rate-limit headers on every answer
LIMIT_HEADERS = {
    "contract": {
        "x-ratelimit-limit-minute",
        "x-ratelimit-remaining-minute",
        "x-ratelimit-limit-hour",
        "x-ratelimit-remaining-hour",
    },
    "keyed": set(),
    "bare": {
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-used",
        "x-ratelimit-reset",
        "x-ratelimit-resource",
    },
    "tagged": set(),
    "camel": {"ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "ratelimit-policy"},
    "enveloped": {"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"},
}
LIMIT_HEADERS["result"] = LIMIT_HEADERS["contract"]

READS = [
    ("transactions_summary", "/v1/transactions/summary", {}),
    (
        "transactions_summary",
        "/v1/transactions/summary",
        {"type": "expense", "from": "2026-03-01", "to": "2026-08-31"},
    ),
    ("accounts_summary", "/v1/accounts/summary", {}),
    ("connections", "/v1/connections", {}),
    ("net_worth", "/v1/analytics/net-worth", {}),
    ("spending", "/v1/analytics/spending", {}),
    ("spending", "/v1/analytics/spending", {"group_by": "month", "from": "2025-11-01"}),
    (
        "spending",
        "/v1/analytics/spending",
        {"group_by": "merchant", "from": "2026-01-01", "to": "2026-06-30"},
    ),
    ("settings", "/v1/settings", {}),
    ("sync_status", "/v1/sync/status", {}),
]
_INSTANT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


def norm(obj: Any) -> Any:
    """Instants to whole seconds (a dialect may send epoch seconds), everything else as it is."""
    if isinstance(obj, dict):
        return {k: norm(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [norm(v) for v in obj]
    if isinstance(obj, str) and _INSTANT.match(obj):
        return obj[:19]
    return obj


def shape(obj: Any) -> Any:
    """The key structure of an answer (names, nesting, list-or-object), not its values."""
    if isinstance(obj, dict):
        return {k: shape(v) for k, v in sorted(obj.items())}
    if isinstance(obj, list):
        return [shape(obj[0])] if obj else []
    return type(obj).__name__


def agrees(reading: dict[str, Any], contract: dict[str, Any]) -> None:
    """Every number the reading carries equals the contract's (and it carries some)."""
    assert reading, "the reading found nothing"
    assert norm(reading) == norm({k: contract[k] for k in reading})


def known(obj: Any) -> Any:
    """Without the fields the `unknown_fields` fault adds (a dialect may keep or drop them)."""
    if isinstance(obj, dict):
        return {k: known(v) for k, v in obj.items() if not k.startswith("x_added")}
    if isinstance(obj, list):
        return [known(v) for v in obj]
    return obj


class Pair:
    """The contract and one dialect over the same service."""

    def __init__(self, sb: Sandbox, contract: Api, dialect: Api, name: str) -> None:
        self.sb, self.contract, self.dialect, self.name = sb, contract, dialect, name
        self.read = READINGS[name]


def _pair(sb: Sandbox, name: str) -> Iterator[Pair]:
    with (
        TestClient(sb.app, base_url="http://sandbox.test") as c,
        TestClient(SandboxApp(sb.service, name), base_url="http://sandbox.test") as d,
    ):
        yield Pair(sb, Api(sb, c), Api(sb, d), name)


@pytest.fixture(scope="module")
def shared() -> Sandbox:
    return make_sandbox(seed=5, rate_limit=False)


@pytest.fixture(params=OTHERS)
def pair(request: pytest.FixtureRequest, shared: Sandbox) -> Iterator[Pair]:
    yield from _pair(shared, request.param)


@pytest.fixture(params=OTHERS)
def fresh(request: pytest.FixtureRequest) -> Iterator[Pair]:
    """A pair over a sandbox of its own (writes, syncs and quotas do not leak)."""
    yield from _pair(make_sandbox(seed=5, years=1, rate_limit=False), request.param)


# ---- the registry ----------------------------------------------------------------------------
def test_the_registry_has_the_contract_and_at_least_five_others() -> None:
    assert next(iter(DIALECTS)) == "contract" and DIALECTS["contract"].is_contract
    assert len(OTHERS) >= 5
    for name, d in DIALECTS.items():
        assert d.name == name and d.description and "\n" not in d.description
        assert name == "contract" or not d.is_contract
    assert set(READINGS) == set(DIALECTS)


def test_an_unknown_dialect_is_refused_with_the_known_names() -> None:
    with pytest.raises(ValueError, match="known: contract, keyed"):
        make_sandbox(dialect="klingon", years=1)


# ---- not-shown surfaces: own shape, same numbers ---------------------------------------------
@pytest.mark.parametrize(("surface", "path", "params"), READS)
def test_each_read_carries_the_contract_numbers_in_its_own_shape(
    pair: Pair, surface: str, path: str, params: dict[str, str]
) -> None:
    theirs = pair.dialect.get(path, **params)
    ours = pair.contract.get(path, **params)
    assert theirs.status_code == ours.status_code == 200
    assert shape(theirs.json()) != shape(ours.json())
    agrees(pair.read[surface](theirs.json()), ours.json())


def test_the_single_transaction_read_carries_the_record(pair: Pair) -> None:
    for row in pair.contract.get("/v1/transactions", limit=5, page=3).json()["data"]:
        theirs = pair.dialect.get(f"/v1/transactions/{row['id']}")
        ours = pair.contract.get(f"/v1/transactions/{row['id']}").json()
        assert theirs.status_code == 200 and shape(theirs.json()) != shape(ours)
        agrees(pair.read["transaction"](theirs.json()), ours)


def test_writes_answer_their_status_and_shape_with_the_stored_record(fresh: Pair) -> None:
    state = fresh.contract.state()
    account = state["accounts"][0]["id"]
    goal = state["expenses"][0]["id"]
    body = {
        "account_id": account,
        "amount": -1234,
        "concept": "Dialect test",
        "booked_at": "2026-10-02",
        "notes": "cash",
    }
    created = fresh.dialect.post("/v1/transactions", body, headers={"Idempotency-Key": "d-1"})
    assert created.status_code == WRITE_STATUS[fresh.name][0]
    contract_created = fresh.contract.post("/v1/transactions", {**body, "concept": "Twin"})
    assert shape(created.json()) != shape(contract_created.json())
    reading = fresh.read["create"](created.json())
    stored = fresh.contract.get(f"/v1/transactions/{reading['id']}").json()
    agrees(reading, stored)
    assert stored["notes"] == "cash" and stored["amount"] == -1234
    again = fresh.dialect.post("/v1/transactions", body, headers={"Idempotency-Key": "d-1"})
    assert again.status_code == created.status_code and again.json() == created.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert (
        fresh.contract.get("/v1/transactions/summary", search="dialect test").json()["count"] == 1
    )
    tx = f"/v1/transactions/{reading['id']}"
    updated = fresh.dialect.patch(tx, {"concept": "Dialect test, edited"})
    assert updated.status_code == 200
    agrees(fresh.read["update"](updated.json()), fresh.contract.get(tx).json())
    assigned = fresh.dialect.post(f"{tx}/expense", {"expense_goal_id": goal})
    assert assigned.status_code == 200
    agrees(fresh.read["assign"](assigned.json()), fresh.contract.get(tx).json())
    assert fresh.contract.get(tx).json()["expense_goal_id"] == goal


def test_the_sync_trigger_answers_its_status_and_names_the_providers(fresh: Pair) -> None:
    providers = sorted(
        {c["provider"] for c in fresh.contract.get("/v1/connections").json()["data"]}
    )
    r = fresh.dialect.post("/v1/sync", {})
    assert r.status_code == WRITE_STATUS[fresh.name][1]
    if r.status_code == 204:
        assert r.content == b""
    else:
        reading = fresh.read["sync"](r.json())
        assert sorted(reading["providers"]) == providers and reading["sync_id"]
    status = fresh.contract.get("/v1/sync/status").json()["data"]
    assert all(s["last_synced_at"] == fresh.contract.state()["now"] for s in status)


@pytest.mark.parametrize(
    "faults", [{"unknown_fields": True}, {"drop_extra_fields": True}], ids=["unknown", "dropped"]
)
def test_the_fields_faults_still_answer_the_same_numbers(
    fresh: Pair, faults: dict[str, bool]
) -> None:
    """The sandbox's field faults (extra unknown fields, no extra fields) under each dialect."""
    fresh.contract.admin("PUT", "/_sandbox/faults", faults)
    for surface, path, params in READS:
        theirs = fresh.dialect.get(path, **params)
        assert theirs.status_code == 200
        reading = known(fresh.read[surface](theirs.json()))
        agrees(reading, known(fresh.contract.get(path, **params).json()))
    row = fresh.dialect.get("/v1/transactions", limit=1).json()["data"][0]
    ours = fresh.contract.get(f"/v1/transactions/{row['id']}").json()
    assert {k: row[k] for k in DOCUMENTED_TX} == {k: ours[k] for k in DOCUMENTED_TX}


# ---- documented surfaces: as documented, in every dialect ------------------------------------
def _me(api: Api) -> dict[str, Any]:
    me = api.get("/v1/me").json()
    me["rate_limit"] = {k: v for k, v in me["rate_limit"].items() if k.endswith("_limit")}
    return me


def test_documented_surfaces_are_the_contract(pair: Pair) -> None:
    assert pair.dialect.get("/v1/accounts").content == pair.contract.get("/v1/accounts").content
    assert _me(pair.dialect) == _me(pair.contract)
    theirs = pair.dialect.get("/v1/transactions", limit=40, page=2, type="expense").json()
    ours = pair.contract.get("/v1/transactions", limit=40, page=2, type="expense").json()
    assert {k: theirs[k] for k in ("total", "page", "pages")} == {
        k: ours[k] for k in ("total", "page", "pages")
    }
    assert list(theirs) == list(ours) == ["data", "total", "page", "pages"]
    # each row keeps the documented fields (the dialect may add others, and reorder the list)
    by_id = {r["id"]: r for r in pair.contract.all_transactions(type="expense")}
    for row in theirs["data"]:
        agrees(
            pair.read["list_row"](row), pair.contract.get(f"/v1/transactions/{row['id']}").json()
        )
        assert {k: row[k] for k in by_id[row["id"]] if k in row} == {
            k: by_id[row["id"]][k] for k in by_id[row["id"]] if k in row
        }


def test_documented_errors_are_the_contract(fresh: Pair) -> None:
    scope = fresh.dialect.post("/v1/transactions", {}, key="read_only")
    assert scope.status_code == 403
    assert scope.json() == fresh.contract.post("/v1/transactions", {}, key="read_only").json()
    assert scope.json()["error"]["code"] == "insufficient_scope"
    provider = fresh.contract.get("/v1/connections").json()["data"][0]["provider"]
    codes = [fresh.dialect.post("/v1/sync", {"provider": provider}).status_code for _ in range(5)]
    quota = fresh.dialect.post("/v1/sync", {"provider": provider})
    assert codes[-1] == quota.status_code == 429
    assert quota.json()["error"]["code"] == "provider_quota_exhausted"
    tx = fresh.contract.get("/v1/transactions", limit=1).json()["data"][0]["id"]
    empty = fresh.dialect.patch(f"/v1/transactions/{tx}", {})
    assert empty.status_code == 400 and set(empty.json()) == {"error"}
    assert {"code", "message"} <= set(empty.json()["error"])


def test_other_errors_carry_the_dialect_codes_in_the_documented_envelope(pair: Pair) -> None:
    bad, unauth, missing, _ = CODES[pair.name]
    r400 = pair.dialect.get("/v1/transactions", limit=0)
    r401 = pair.dialect.get("/v1/me", key="pfd_live_" + "x" * 40)
    r404 = pair.dialect.get("/v1/transactions/00000000-0000-4000-8000-000000000000")
    for r, status, code in ((r400, 400, bad), (r401, 401, unauth), (r404, 404, missing)):
        assert r.status_code == status
        assert set(r.json()) == {"error"} and {"code", "message"} <= set(r.json()["error"])
        assert r.json()["error"]["code"] == code and r.json()["error"]["message"]


# ---- rate limits -------------------------------------------------------------------------------
def _rate_limited(name: str, minute_limit: int = 2) -> tuple[Any, Any, float]:
    """An answer within the allowance, and the 429 past it, from a key of `minute_limit`."""
    sb = make_sandbox(dialect=name, years=1)
    with TestClient(sb.app, base_url="http://sandbox.test") as c:
        api = Api(sb, c)
        key = api.admin("POST", "/_sandbox/keys", {"scopes": ["data.read"], "minute_limit": 2})
        within = api.get("/v1/settings", key=key["key"])
        if within.status_code == 429:  # the minute turned between the two: once more
            within = api.get("/v1/settings", key=key["key"])
        api.get("/v1/settings", key=key["key"])
        wall = time.time()
        return within, api.get("/v1/settings", key=key["key"]), wall


@pytest.mark.parametrize("name", list(DIALECTS))
def test_429_past_the_allowance_says_when_to_come_back_its_own_way(name: str) -> None:
    within, limited, wall = _rate_limited(name)
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == CODES[name][3]
    seconds_left = 60 - wall % 60
    wait = WAIT[name]
    assert ("retry-after" in limited.headers) == (wait == "retry_after")
    if wait == "retry_after":
        assert 0 < int(limited.headers["retry-after"]) <= math.ceil(seconds_left) + 1
    reset = limited.headers.get("x-ratelimit-reset")
    if wait == "reset_epoch":
        assert wall < int(reset) <= wall + seconds_left + 2
    elif wait == "reset_seconds":
        assert 0 < int(reset) <= math.ceil(seconds_left) + 1
    elif wait == "none":
        assert reset is None and "ratelimit-reset" not in limited.headers
    names = {h for h in within.headers if "ratelimit" in h}
    assert names == LIMIT_HEADERS[name]


def test_rate_limit_headers_report_the_allowance_truthfully() -> None:
    """GitHub's headers (bare) and the IETF draft's (camel) carry the minute window's numbers."""
    for name, limit, left in (
        ("bare", "x-ratelimit-limit", "x-ratelimit-remaining"),
        ("camel", "ratelimit-limit", "ratelimit-remaining"),
        ("enveloped", "x-ratelimit-limit", "x-ratelimit-remaining"),
    ):
        sb = make_sandbox(dialect=name, years=1, minute_limit=50)
        with TestClient(sb.app, base_url="http://sandbox.test") as c:
            api = Api(sb, c)
            r = api.get("/v1/me")
            me = r.json()["rate_limit"]
        assert int(r.headers[limit]) == me["minute_limit"] == 50
        assert int(r.headers[left]) == me["minute_remaining"]


# ---- sort direction ----------------------------------------------------------------------------
@pytest.mark.parametrize("sort", ["booked_at", "created_at"])
@pytest.mark.parametrize("filters", [{"from": "2026-05-01"}, {"type": "income"}])
def test_the_list_order_is_the_dialects_direction(
    pair: Pair, sort: str, filters: dict[str, str]
) -> None:
    ours = [r["id"] for r in _pages(pair.contract, sort=sort, **filters)]
    theirs = [r["id"] for r in _pages(pair.dialect, sort=sort, **filters)]
    assert len(ours) > 37 and sorted(theirs) == sorted(ours)
    assert theirs == (ours[::-1] if pair.name in ASCENDING else ours)


def _pages(api: Api, **params: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    page = 1
    while True:
        body = api.get("/v1/transactions", limit=37, page=page, **params).json()
        rows += body["data"]
        if page >= body["pages"]:
            assert len(rows) == body["total"]
            return rows
        page += 1


# ---- over loopback HTTP, and how a user picks one --------------------------------------------
def test_a_dialect_over_loopback_http() -> None:
    """A real server (uvicorn) sends a dialect's 204, its headers and its shapes."""
    sb = make_sandbox(dialect="bare", years=1)
    with (
        run_in_thread(sb) as base_url,
        httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {sb.keys['read_write']}"}
        ) as c,
    ):
        assert "tz" in c.get("/v1/settings").json()
        synced = c.post("/v1/sync", json={})
        assert synced.status_code == 204 and synced.content == b""
        assert int(synced.headers["x-ratelimit-reset"]) > time.time()
        assert isinstance(c.get("/v1/connections").json(), list)


def test_serve_and_the_setting_name_the_known_dialects_when_given_another() -> None:
    result = CliRunner().invoke(main, ["sandbox", "serve", "--dialect", "klingon"])
    assert result.exit_code == 2
    assert "'klingon' is not a dialect; use one of contract, keyed" in result.output
    with pytest.raises(ConfigurationError, match="CENTSYNC_SANDBOX_DIALECT='klingon'"):
        Settings.from_env({"CENTSYNC_SANDBOX_DIALECT": "klingon"})
    assert Settings.from_env({"CENTSYNC_SANDBOX_DIALECT": "Tagged"}).sandbox_dialect == "tagged"
    assert Settings.from_env({}).sandbox_dialect == "contract"


def test_the_embedded_sandbox_speaks_the_dialect_the_setting_names(tmp_path: Path) -> None:
    try:  # where the embedded sandbox's lifecycle lives (it is moving out of the CLI)
        from centsync.pipelines.embedded import embedded_api
    except ImportError:
        from centsync.pipelines.cli.sandbox import embedded_api
    settings = Settings.from_env(
        {"CENTSYNC_WAREHOUSE": str(tmp_path / "w.duckdb"), "CENTSYNC_SANDBOX_DIALECT": "camel"}
    )
    with (
        embedded_api(settings) as run,
        httpx.Client(
            base_url=run.api_base_url, headers={"Authorization": f"Bearer {run.api_key}"}
        ) as c,
    ):
        assert c.get("/v1/settings").json()["kind"] == "centsync#settings"
        assert c.get("/v1/nowhere").json()["error"]["code"] == "NOT_FOUND"
