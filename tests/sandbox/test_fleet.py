"""One sandbox serving many owners: each key reaches its own household, limits and clock."""

from __future__ import annotations

import json
import os
import signal
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from centsync.sandbox import SandboxConfig
from centsync.sandbox.fleet import Fleet, key_variable
from centsync.sandbox.server import free_port, spawn_serve
from helpers import START


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return Fleet.build(3, SandboxConfig(seed=21, years=1, start=START, minute_limit=40))


@pytest.fixture(scope="module")
def client(fleet: Fleet) -> Iterator[TestClient]:
    with TestClient(fleet.app, base_url="http://fleet.test") as c:
        yield c


def _bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def test_each_key_reaches_its_own_household(fleet: Fleet, client: TestClient) -> None:
    owners = {}
    for name, keys in fleet.keys.items():
        me = client.get("/v1/me", headers=_bearer(keys["read_only"]))
        assert me.status_code == 200, me.text
        owners[name] = me.json()["account_id"]
        first = client.get(
            "/v1/transactions", params={"limit": 5}, headers=_bearer(keys["read_only"])
        )
        ledger = fleet.owners[name].service.ledger.rows
        assert {t["id"] for t in first.json()["data"]} <= {t.id for t in ledger}
    assert len(set(owners.values())) == 3
    assert fleet.seeds() == {"owner-001": 21, "owner-002": 22, "owner-003": 23}


def test_unknown_key_is_refused_with_the_fix(client: TestClient) -> None:
    r = client.get("/v1/me", headers=_bearer("pfd_live_" + "x" * 40))
    assert r.status_code == 401
    assert "keys file" in r.json()["error"]["message"]
    assert client.get("/v1/me").status_code == 401
    assert client.get("/openapi.json").status_code == 200


def test_allowances_are_per_key(fleet: Fleet, client: TestClient) -> None:
    first, second = list(fleet.keys.values())[:2]
    statuses = [
        client.get("/v1/settings", headers=_bearer(first["read_write"])).status_code
        for _ in range(45)
    ]
    assert 429 in statuses  # 40 a minute: the first owner's key ran out...
    other = client.get("/v1/settings", headers=_bearer(second["read_write"]))
    assert other.status_code == 200  # ...the second owner's allowance is its own
    assert int(other.headers["x-ratelimit-remaining-minute"]) >= 38


def test_admin_token_drives_only_its_owner_and_new_keys_route(
    fleet: Fleet, client: TestClient
) -> None:
    a, b = fleet.owners["owner-002"], fleet.owners["owner-003"]
    before_b = b.service.now_ms
    r = client.post(
        "/_sandbox/clock/advance", json={"hours": 5}, headers=_bearer(a.keys["admin_token"])
    )
    assert r.status_code == 200, r.text
    assert b.service.now_ms == before_b  # each owner its own clock
    made = client.post(
        "/_sandbox/keys", json={"scopes": ["data.read"]}, headers=_bearer(a.keys["admin_token"])
    )
    assert made.status_code == 201, made.text
    me = client.get("/v1/me", headers=_bearer(made.json()["key"]))
    assert me.status_code == 200
    own = client.get("/v1/me", headers=_bearer(a.keys["read_only"])).json()
    assert me.json()["account_id"] == own["account_id"] == a.service.owner


@pytest.mark.e2e
def test_serve_owners_writes_keys_owners_and_env_files(tmp_path: Path) -> None:
    keys_file, owners_file, env_file = tmp_path / "keys.json", tmp_path / "o.toml", tmp_path / "e"
    port = free_port()
    proc = spawn_serve(
        keys_file,
        "--owners", "2", "--years", "1", "--port", str(port),
        "--owners-file", str(owners_file), "--env-out", str(env_file),
        timeout=120,
    )  # fmt: skip
    try:
        keys = json.loads(keys_file.read_text())
        assert keys["base_url"] == f"http://127.0.0.1:{port}"
        assert set(keys["owners"]) == {"owner-001", "owner-002"}
        for path in (keys_file, env_file):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        config = tomllib.loads(owners_file.read_text())
        assert [o["key_env"] for o in config["owner"]] == [
            key_variable("owner-001"),
            "CENTSYNC_KEY_OWNER_002",
        ]
        assert "pfd_live_" not in owners_file.read_text()  # never a key in the owners file
        env = dict(
            line.removeprefix("export ").split("=", 1) for line in env_file.read_text().splitlines()
        )
        seen = set()
        for owner in config["owner"]:
            me = httpx.get(
                owner["base_url"] + "/v1/me", headers=_bearer(env[owner["key_env"]]), timeout=10
            )
            assert me.status_code == 200
            seen.add(me.json()["account_id"])
        assert len(seen) == 2
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
