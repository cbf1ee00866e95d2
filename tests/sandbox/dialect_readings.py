"""Test-side readings of each sandbox dialect: its answer read back into the contract's names.

Written for the tests, independently of `sandbox/dialects.py` (never calling it): each reading
says where this dialect puts each number, and the tests compare the reading with the contract
dialect's answer over the same state. A reading holds only what the dialect carries (a terser
dialect carries less); numbers a dialect leaves to be summed (rows without a total) are summed
here, as a client would.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Reading = Callable[[Any], Any]
DOCUMENTED_TX = (
    "id",
    "account_id",
    "concept",
    "amount",
    "booked_at",
    "type",
    "category_id",
    "expense_goal_id",
)
CURRENCY = "EUR"  # the test household's


def back(obj: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """`obj` with this dialect's names turned back into the contract's (`names`: theirs -> ours)."""
    return {names.get(k, k): v for k, v in obj.items()}


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def month(key: Any) -> Any:
    """`2025-03-01` -> `2025-03` (a month key written as a date); anything else as it is."""
    return key[:7] if isinstance(key, str) and len(key) == 10 and key.endswith("-01") else key


def documented(rec: dict[str, Any]) -> dict[str, Any]:
    """The Transaction's documented fields, and `notes` when the record carries it."""
    out = {k: rec[k] for k in DOCUMENTED_TX}
    if "notes" in rec:
        out["notes"] = rec["notes"]
    return out


def seconds_of(iso_ms: str) -> str:
    return iso_ms[:19]


# ---- keyed ----------------------------------------------------------------------------------
def _keyed_tx(rec: dict[str, Any]) -> dict[str, Any]:
    assert rec["currency"] == CURRENCY
    out = documented(rec)
    out["created_at"] = rec["created"]
    return out


KEYED: dict[str, Reading] = {
    "transactions_summary": lambda b: back(
        b["summary"], {"spending": "expense", "transfers": "transfer"}
    ),
    "transaction": lambda b: _keyed_tx(b["transaction"]),
    "accounts_summary": lambda b: back(
        b["balance"], {"total_balance": "net_worth", "accounts": "count"}
    ),
    "connections": lambda b: {
        "data": [back(c, {"last_synced": "last_synced_at"}) for c in b["connections"]]
    },
    "net_worth": lambda b: b["net_worth"],
    "spending": lambda b: {
        **{k: v for k, v in b["spending"].items() if k != "groups"},
        "data": [back(r, {"group": "key", "name": "label"}) for r in b["spending"]["groups"]],
    },
    "settings": lambda b: back(b["settings"], {"time_zone": "timezone"}),
    "sync_status": lambda b: {"data": b["sync_status"]},
    "sync": lambda b: {"providers": b["sync"]["providers"], "sync_id": b["sync"]["id"]},
    "list_row": _keyed_tx,
}


# ---- bare -----------------------------------------------------------------------------------
def _bare_tx(rec: dict[str, Any]) -> dict[str, Any]:
    assert rec["url"] == f"/v1/transactions/{rec['id']}"
    return {**documented(rec), "created_at": rec["created_at"]}


def _bare_spending(rows: list[dict[str, Any]]) -> dict[str, Any]:
    data = [
        {"key": r["name"], "label": r["label"], "amount": r["spent"], "count": r["n"]} for r in rows
    ]
    for r in data:  # a month key is a date here; category and merchant keys are as they are
        r["key"] = (
            month(r["key"]) if r["key"] is not None and r["label"] == month(r["key"]) else r["key"]
        )
    return {"total": sum(r["amount"] for r in data), "data": data}


BARE: dict[str, Reading] = {
    "transactions_summary": lambda b: back(
        b,
        {
            "total_count": "count",
            "income_cents": "income",
            "expense_cents": "expense",
            "transfer_cents": "transfer",
            "net_cents": "net",
        },
    ),
    "transaction": _bare_tx,
    "accounts_summary": lambda b: back(
        b,
        {
            "debts": "liabilities",
            "net": "net_worth",
            "account_count": "count",
            "balances_by_type": "by_type",
        },
    ),
    "connections": lambda b: {"data": b},
    "net_worth": lambda b: back(b, {"debts": "liabilities", "net_worth": "total"}),
    "spending": _bare_spending,
    "settings": lambda b: back(b, {"tz": "timezone"}),
    "sync_status": lambda b: {"data": [{"connection_id": k, **v} for k, v in b.items()]},
    "sync": lambda b: {},
    "list_row": _bare_tx,
}


# ---- tagged ---------------------------------------------------------------------------------
def _tagged_tx(rec: dict[str, Any]) -> dict[str, Any]:
    assert rec["object"] == "transaction" and "created_at" not in rec
    return {**documented(rec), "created_at": iso(rec["created"])}


def _tagged_list(b: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    assert b["object"] == "list" and not b["has_more"]
    assert all(r["object"] == kind for r in b["data"])
    return [{k: v for k, v in r.items() if k != "object"} for r in b["data"]]


def _tagged_balances(b: dict[str, Any]) -> dict[str, Any]:
    rows = _tagged_list(b, "balance_total")
    return {
        "by_type": {r["type"]: r["amount"] for r in rows},
        "count": sum(r["accounts"] for r in rows),
        "net_worth": sum(r["amount"] for r in rows),
    }


def _tagged_times(r: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    out = back(r, names)
    for ours in ("last_synced_at", "next_sync_at"):
        if ours in out:
            out[ours] = iso(out[ours])
    return out


TAGGED: dict[str, Reading] = {
    "transactions_summary": lambda b: {"count": b["count"], "net": b["net"]},
    "transaction": _tagged_tx,
    "accounts_summary": _tagged_balances,
    "connections": lambda b: {
        "data": [
            _tagged_times(c, {"last_synced": "last_synced_at", "accounts": "account_ids"})
            for c in _tagged_list(b, "connection")
        ]
    },
    "net_worth": lambda b: {
        "currency": b["currency"],
        "assets": b["assets"],
        "liabilities": b["liabilities"],
        "total": b["net"],
        "as_of": iso(b["as_of"]),
    },
    "spending": lambda b: {
        "data": [back(r, {"id": "key", "name": "label"}) for r in _tagged_list(b, "spending_group")]
    },
    "settings": lambda b: back(
        {k: v for k, v in b.items() if k != "object"}, {"default_currency": "currency"}
    ),
    "sync_status": lambda b: {
        "data": [
            _tagged_times(
                r,
                {
                    "connection": "connection_id",
                    "last_synced": "last_synced_at",
                    "next_sync": "next_sync_at",
                },
            )
            for r in _tagged_list(b, "sync_status")
        ]
    },
    "sync": lambda b: {"providers": b["providers"], "sync_id": b["id"]},
    "list_row": _tagged_tx,
}


# ---- camel ----------------------------------------------------------------------------------
def _camel_tx(rec: dict[str, Any]) -> dict[str, Any]:
    assert rec["kind"] == "centsync#transaction" and rec["etag"].startswith('"')
    return {**documented(rec), "created_at": rec["createTime"]}


def _camel_items(b: dict[str, Any], kind: str, names: dict[str, str]) -> dict[str, Any]:
    assert b["kind"] == f"centsync#{kind}List"
    return {"data": [back(r, names) for r in b["items"]]}


def _camel_spending(b: dict[str, Any]) -> dict[str, Any]:
    assert b["kind"] == "centsync#spending"
    rows = [
        {
            "key": month(r["key"]),
            "label": r["label"],
            "amount": r["amountCents"],
            "count": r["count"],
        }
        for r in b["items"]
    ]
    return {
        "from": b["startDate"],
        "to": b["endDate"],
        "group_by": b["groupBy"],
        "currency": b["currencyCode"],
        "total": b["totalCents"],
        "data": rows,
    }


CAMEL: dict[str, Reading] = {
    "transactions_summary": lambda b: {
        "count": b["count"],
        "income": b["incomeCents"],
        "expense": b["expenseCents"],
        "transfer": b["transferCents"],
        "net": b["netCents"],
    },
    "transaction": _camel_tx,
    "accounts_summary": lambda b: back(
        {k: v for k, v in b.items() if k != "kind"},
        {
            "currencyCode": "currency",
            "netWorth": "net_worth",
            "accountCount": "count",
            "byType": "by_type",
        },
    ),
    "connections": lambda b: _camel_items(
        b, "connection", {"lastSyncTime": "last_synced_at", "accountIds": "account_ids"}
    ),
    "net_worth": lambda b: back(
        {k: v for k, v in b.items() if k != "kind"},
        {"currencyCode": "currency", "netWorth": "total", "asOf": "as_of"},
    ),
    "spending": _camel_spending,
    "settings": lambda b: back(
        {k: v for k, v in b.items() if k != "kind"},
        {"timeZone": "timezone", "currencyCode": "currency", "weekStart": "week_start"},
    ),
    "sync_status": lambda b: _camel_items(
        b,
        "syncStatus",
        {
            "connectionId": "connection_id",
            "lastSyncTime": "last_synced_at",
            "nextSyncTime": "next_sync_at",
        },
    ),
    "sync": lambda b: {
        "providers": b["metadata"]["providers"],
        "sync_id": b["name"].removeprefix("operations/"),
    },
    "list_row": _camel_tx,
}


# ---- enveloped ------------------------------------------------------------------------------
def _enveloped_spending(b: dict[str, Any]) -> dict[str, Any]:
    d = b["data"]
    rows = [
        {
            "key": month(r["group"]),
            "label": r["label"],
            "amount": r["total_cents"],
            "count": r["count"],
        }
        for r in d["groups"]
    ]
    head = {k: v for k, v in d.items() if k not in ("groups", "total_cents")}
    return {**head, "total": d["total_cents"], "data": rows}


ENVELOPED: dict[str, Reading] = {
    "transactions_summary": lambda b: {
        "count": b["data"]["count"],
        **b["data"]["totals"]["by_type"],
        "net": b["data"]["totals"]["net"],
    },
    "transaction": lambda b: {**documented(b["data"]), "created_at": b["data"]["created_at"]},
    "accounts_summary": lambda b: b["data"],
    "connections": lambda b: {"data": b["data"]},
    "net_worth": lambda b: {
        **b["data"]["net_worth"],
        "currency": b["data"]["currency"],
        "as_of": b["data"]["as_of"],
    },
    "spending": _enveloped_spending,
    "settings": lambda b: back(
        b["data"], {"time_zone": "timezone", "default_currency": "currency"}
    ),
    "sync_status": lambda b: {
        "data": [
            back(
                r,
                {
                    "connection": "connection_id",
                    "state": "status",
                    "last_sync": "last_synced_at",
                    "next_sync": "next_sync_at",
                },
            )
            for r in b["data"]
        ]
    },
    "sync": lambda b: {"providers": b["data"]["providers"], "sync_id": b["data"]["id"]},
    "list_row": lambda r: {**documented(r), "created_at": r["created_at"]},
}


# ---- result ---------------------------------------------------------------------------------
def _result(b: dict[str, Any]) -> Any:
    assert b["success"] is True and b["errors"] == [] and b["messages"] == []
    if isinstance(b["result"], list):
        assert b["result_info"]["count"] == len(b["result"])
    return b["result"]


def _result_tx(rec: dict[str, Any]) -> dict[str, Any]:
    assert rec["currency"] == CURRENCY and "created_at" not in rec and "updated_at" not in rec
    return documented(rec)


def _result_balances(b: dict[str, Any]) -> dict[str, Any]:
    rows = _result(b)
    return {
        "by_type": {r["type"]: r["total_cents"] for r in rows},
        "count": sum(r["accounts"] for r in rows),
        "net_worth": sum(r["total_cents"] for r in rows),
    }


def _result_spending(b: dict[str, Any]) -> dict[str, Any]:
    rows = [back(r, {"total_cents": "amount"}) for r in _result(b)]
    return {"total": sum(r["amount"] for r in rows), "data": rows}


RESULT: dict[str, Reading] = {
    "transactions_summary": lambda b: back(_result(b), {"n": "count"}),
    "transaction": lambda b: _result_tx(_result(b)),
    "accounts_summary": _result_balances,
    "connections": lambda b: {"data": _result(b)},
    "net_worth": lambda b: back(_result(b), {"debts": "liabilities", "net": "total"}),
    "spending": _result_spending,
    "settings": lambda b: back(_result(b), {"primary_currency": "currency"}),
    "sync_status": lambda b: {
        "data": [
            back(r, {"last_sync": "last_synced_at", "next_sync": "next_sync_at"})
            for r in _result(b)
        ]
    },
    "sync": lambda b: {"providers": _result(b)["providers"], "sync_id": _result(b)["id"]},
    "list_row": _result_tx,
}


CONTRACT: dict[str, Reading] = {
    "transactions_summary": lambda b: b,
    "transaction": lambda b: {**documented(b), "created_at": b["created_at"]},
    "accounts_summary": lambda b: b,
    "connections": lambda b: b,
    "net_worth": lambda b: b,
    "spending": lambda b: b,
    "settings": lambda b: b,
    "sync_status": lambda b: b,
    "sync": lambda b: {"providers": b["providers"], "sync_id": b["sync_id"]},
    "list_row": lambda r: {**documented(r), "created_at": r["created_at"]},
}

READINGS: dict[str, dict[str, Reading]] = {
    "contract": CONTRACT,
    "keyed": KEYED,
    "bare": BARE,
    "tagged": TAGGED,
    "camel": CAMEL,
    "enveloped": ENVELOPED,
    "result": RESULT,
}
# Write answers are read like the single-transaction read
for _reading in READINGS.values():
    for _write in ("create", "update", "assign"):
        _reading[_write] = _reading["transaction"]
