"""`centsync doctor`'s contract section and `--contract-report FILE`: each API surface's state,
from the warehouse's ops.contract (010_contract.sql's schema, created here in the real DuckDB
file until the refresh that learns lands), and a report of shapes that holds no value, amount,
id, name or the key of the warehouse it was written over."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from centsync.pipelines.outputs.contract_report import NOTHING_LEARNED, SURFACES
from centsync.pipelines.results import json_schemas

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e

# migration 010_contract.sql's table, as issue 42 fixes it
CONTRACT_TABLE = """
CREATE TABLE IF NOT EXISTS ops.contract (
    surface VARCHAR PRIMARY KEY, state VARCHAR NOT NULL, mapping JSON, shape JSON,
    evidence VARCHAR, reason VARCHAR, learned_refresh BIGINT, checked_refresh BIGINT,
    changed_at TIMESTAMP);
CREATE TABLE IF NOT EXISTS raw.unread_answers (
    refresh_id VARCHAR NOT NULL, surface VARCHAR NOT NULL, body JSON, reason VARCHAR NOT NULL,
    received_at TIMESTAMPTZ NOT NULL)
"""


def _doctor(http_env: HttpEnv, *args: str) -> tuple[int, dict[str, Any]]:
    code, out = http_env.cli("doctor", "--json", *args)
    info = json.loads(out)
    jsonschema.validate(info, json_schemas()["doctor"])
    return code, info


def test_without_a_learned_contract_the_section_says_so(http_env: HttpEnv, tmp_path: Path) -> None:
    """Before any refresh (no warehouse, so no ops.contract): every surface of the API
    document, the documented ones as such, the rest not learned yet; a report all the same."""
    code, info = _doctor(http_env)
    contract = info["contract"]
    assert code == 0 and not contract["learned"] and contract["note"] == NOTHING_LEARNED
    states = {r["surface"]: r["state"] for r in contract["surfaces"]}
    assert list(states) == [s for s, _ in SURFACES]  # every endpoint of the API document
    assert states["GET /v1/transactions"] == states["GET /v1/me"] == "documented"
    assert states["GET /v1/transactions/summary"] == "not learned yet"
    assert states["POST /v1/transactions"] == "documented"  # found by its documented fields
    code, text = http_env.cli("doctor")
    assert code == 0 and f"Contract (each API surface): {NOTHING_LEARNED}" in text
    report = tmp_path / "contract.json"
    code, _ = http_env.cli("doctor", "--contract-report", str(report))
    doc = json.loads(report.read_text())
    assert code == 0 and doc["learned"] is False and doc["note"] == NOTHING_LEARNED
    assert [s["surface"] for s in doc["surfaces"]] == [s for s, _ in SURFACES]


def _learned_rows(http_env: HttpEnv) -> dict[str, Any]:
    """ops.contract rows as a refresh would store them, written carelessly on purpose: values in
    the evidence, the reason and the shape, which the report must never pass on."""
    account = http_env.sql("SELECT id::VARCHAR, name, balance FROM core.accounts LIMIT 1")[0]
    count = http_env.sql("SELECT count(*) FROM core.transactions")[0][0]
    tx = http_env.sql("SELECT id::VARCHAR, concept, amount FROM core.transactions LIMIT 1")[0]
    http_env.sql(CONTRACT_TABLE)
    rows = [
        (
            "GET /v1/transactions/summary",
            "learned",
            {"count": "totals.n", "income": "totals.in", "net": f"-rows[id={tx[0]}].sum"},
            {"totals": {"n": count, "in": 123456}, "currency": "EUR"},
            f"count {count} equals the list's total {count}; income 1234.56 on '{account[1]}'",
            None,
        ),
        (
            "GET /v1/analytics/net-worth",
            "unavailable",
            None,
            {account[0]: account[2], tx[1]: tx[2]},  # keyed by an id and a merchant name
            None,
            f"no field equals the balances' sum {account[2]} for account {account[0]}: "
            "costs 1 request a refresh",
        ),
        ("GET /v1/settings", "pinned", {"timezone": "prefs.tz"}, {"prefs": {"tz": "string"}}, "pinned in contract.toml", None),
    ]  # fmt: skip
    unread = {"result": [{"type": account[1], "total_cents": account[2], "id": account[0]}]}
    http_env.sql(
        "INSERT INTO raw.unread_answers VALUES ('r1', 'GET /v1/analytics/net-worth', ?, "
        "'no field equals the balances', now())",
        [orjson.dumps(unread).decode()],
    )
    for surface, state, mapping, shape, evidence, reason in rows:
        http_env.sql(
            "INSERT OR REPLACE INTO ops.contract VALUES (?, ?, ?, ?, ?, ?, 1, 1, now())",
            [surface, state, orjson.dumps(mapping).decode() if mapping else None,
             orjson.dumps(shape).decode(), evidence, reason],
        )  # fmt: skip
    return {"account": account, "count": count, "tx": tx}


def test_the_section_lists_learned_pinned_and_unavailable_surfaces(http_env: HttpEnv) -> None:
    http_env.refresh()
    _learned_rows(http_env)
    code, info = _doctor(http_env)
    states = {r["surface"]: r for r in info["contract"]["surfaces"]}
    assert code == 0 and info["contract"]["learned"] and info["contract"]["note"] == ""
    assert states["GET /v1/transactions/summary"]["state"] == "learned"
    assert states["GET /v1/transactions/summary"]["detail"].startswith("count ")
    assert states["GET /v1/analytics/net-worth"]["state"] == "unavailable"
    assert "costs 1 request" in states["GET /v1/analytics/net-worth"]["detail"]
    assert states["GET /v1/settings"]["state"] == "pinned"
    code, text = http_env.cli("doctor")
    assert re.search(r"GET /v1/transactions/summary\s+learned\s+count", text)


def test_the_report_holds_shapes_and_never_a_value_id_name_or_the_key(
    http_env: HttpEnv, tmp_path: Path
) -> None:
    http_env.refresh()
    known = _learned_rows(http_env)
    report = tmp_path / "bug" / "contract.json"
    report.parent.mkdir()
    code, info = _doctor(http_env, "--contract-report", str(report))
    assert code == 0
    assert {c["name"]: c["status"] for c in info["checks"]}["contract_report"] == "ok"
    text = report.read_text()
    doc = json.loads(text)
    by_surface = {s["surface"]: s for s in doc["surfaces"]}
    summary = by_surface["GET /v1/transactions/summary"]
    # the shapes: key names, JSON types and nesting
    assert summary["mapping"] == {
        "count": "totals.n",
        "income": "totals.in",
        "net": "-rows[id=<id>].sum",
    }
    assert summary["shape_learned"] == {
        "totals": {"n": "integer", "in": "integer"},
        "currency": "string",
    }
    assert by_surface["GET /v1/analytics/net-worth"]["shape_learned"] == {
        "<id>": "integer",
        "<name>": "integer",
    }
    assert by_surface["GET /v1/settings"]["shape_seen"]["body"]["timezone"] == "string"
    row = by_surface["GET /v1/transactions"]["shape_seen"]["data[]"]
    assert row["amount"] == "integer" and row["id"] == "string"
    assert row["category_id"] == "null|string"
    unread = by_surface["GET /v1/analytics/net-worth"]["shape_seen"]["unread answer"]
    assert unread == {"result": [{"type": "string", "total_cents": "integer", "id": "string"}]}
    assert doc["centsync_version"] and summary["evidence"] == (
        "count <n> equals the list's total <n>; income <n> on <text>"
    )
    # ...and never a value: no id, name, amount, currency, time zone or the key
    secrets = [http_env.sb.keys["read_only"], known["account"][0], known["account"][1]]
    secrets += [known["tx"][0], known["tx"][1], "EUR", http_env.sb.keys["admin_token"]]
    state = http_env.admin("GET", "/_sandbox/state")
    secrets += [a["id"] for a in state["accounts"]] + [a["name"] for a in state["accounts"]]
    secrets += [t["id"] for t in state["transactions"][:500]]
    secrets += [state["settings"]["timezone"]]
    secrets += [c["name"] for c in state["categories"]]
    leaks = [s for s in secrets if s and s.lower() in text.lower()]
    assert not leaks, leaks
    # not a single number but the version and the time it was written
    rest = {k: v for k, v in doc.items() if k not in ("centsync_version", "written_at")}
    words = json.dumps(rest).replace("/v1/", "/")
    assert not re.search(r"\d", words), words


def test_a_report_that_cannot_be_written_fails_with_exit_2(
    http_env: HttpEnv, tmp_path: Path
) -> None:
    code, info = _doctor(http_env, "--contract-report", str(tmp_path / "missing" / "c.json"))
    check = {c["name"]: c for c in info["checks"]}["contract_report"]
    assert code == 2 and check["status"] == "fail" and "folder you own" in check["detail"]
