"""The sandbox's dialects: `DIALECTS`, name -> `Dialect` (the mechanism is `dialect.py`).

`contract` is today's guesses, byte for byte (docs/api-contract.md). Every other dialect answers
each surface the API document leaves "not shown" in its own way, over the same state and with
the same numbers, imitating a style of real API (docs/api-contract.md, "Dialects"). They are
written to differ from the contract and from each other in names, wrappers, nesting,
list-or-object, error codes and rate-limit headers, write statuses, sort direction and the
transaction's extra fields.
"""

from __future__ import annotations

from typing import Any

from centsync.sandbox.dialect import Ctx, Dialect, month_day, renamed, without
from centsync.sandbox.dialects_more import CAMEL, ENVELOPED, RESULT, TAGGED

CONTRACT = Dialect(
    "contract",
    "Today's guesses (docs/api-contract.md sections 1-8), the default.",
    "the project's own contract",
)


# ---- keyed: Monzo's style --------------------------------------------------------------------
def _keyed_tx(rec: dict[str, Any], ctx: Ctx, in_list: bool) -> dict[str, Any]:
    out = renamed(rec, {"created_at": "created", "updated_at": "updated"})
    if in_list and "notes" not in out:
        out["notes"] = ctx.notes(rec["id"])
    out["currency"] = ctx.service.currency
    return out


def _keyed_spending(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    rows = [renamed(r, {"key": "group", "label": "name"}) for r in b["data"]]
    return {"spending": {**without(b, "data"), "groups": rows}}


def _keyed_summary(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    return {"summary": renamed(b, {"expense": "spending", "transfer": "transfers"})}


def _keyed_balance(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    return {"balance": renamed(b, {"net_worth": "total_balance", "count": "accounts"})}


def _keyed_connections(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    return {"connections": [renamed(c, {"last_synced_at": "last_synced"}) for c in b["data"]]}


KEYED = Dialect(
    "keyed",
    "Answers under their resource's name, oldest first, creates 200, currency on each transaction.",
    'Monzo: `{"transaction": {...}}`, lists ascending, `created`, notes everywhere',
    ascending=True,
    tx=_keyed_tx,
    shapes={
        "transactions_summary": _keyed_summary,
        "transaction": lambda b, ctx: {"transaction": b},
        "create": lambda b, ctx: {"transaction": b},
        "update": lambda b, ctx: {"transaction": b},
        "assign": lambda b, ctx: {"transaction": b},
        "accounts_summary": _keyed_balance,
        "connections": _keyed_connections,
        "net_worth": lambda b, ctx: {"net_worth": b},
        "spending": _keyed_spending,
        "settings": lambda b, ctx: {"settings": renamed(b, {"timezone": "time_zone"})},
        "sync_status": lambda b, ctx: {"sync_status": b["data"]},
        "sync": lambda b, ctx: {"sync": renamed(b, {"sync_id": "id"})},
    },
    statuses={"create": 200, "sync": 200},
    codes={
        "invalid_request": "bad_request.invalid_param",
        "unauthenticated": "unauthorized.bad_api_key",
        "key_expired": "unauthorized.expired_api_key",
        "not_found": "not_found.resource",
        "rate_limited": "too_many_requests",
        "idempotency_key_reused": "bad_request.idempotency_key_reused",
    },
    limit_headers="none",
    wait="retry_after",
)


# ---- bare: GitHub's style --------------------------------------------------------------------
def _bare_tx(rec: dict[str, Any], ctx: Ctx, in_list: bool) -> dict[str, Any]:
    return {**rec, "url": f"/v1/transactions/{rec['id']}"}


def _bare_summary(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    names = {t: f"{t}_cents" for t in ("income", "expense", "transfer", "net")}
    return renamed(b, {**names, "count": "total_count"})


def _bare_spending(b: dict[str, Any], ctx: Ctx) -> list[dict[str, Any]]:
    return [
        {
            "name": month_day(r["key"], b["group_by"]),
            "label": r["label"],
            "spent": r["amount"],
            "n": r["count"],
        }
        for r in b["data"]
    ]


def _bare_sync_status(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    return {r["connection_id"]: without(r, "connection_id") for r in b["data"]}


BARE = Dialect(
    "bare",
    "Bare answers (arrays, objects keyed by id), GitHub's rate-limit headers, sync 204.",
    "GitHub REST: no wrappers, `total_count`, `url` fields, `X-RateLimit-Reset` epoch seconds",
    tx=_bare_tx,
    shapes={
        "transactions_summary": _bare_summary,
        "accounts_summary": lambda b, ctx: renamed(
            b,
            {
                "liabilities": "debts",
                "net_worth": "net",
                "count": "account_count",
                "by_type": "balances_by_type",
            },
        ),
        "connections": lambda b, ctx: b["data"],
        "net_worth": lambda b, ctx: renamed(b, {"liabilities": "debts", "total": "net_worth"}),
        "spending": _bare_spending,
        "settings": lambda b, ctx: renamed(b, {"timezone": "tz"}),
        "sync_status": _bare_sync_status,
    },
    statuses={"sync": 204},
    codes={
        "invalid_request": "validation_failed",
        "unauthenticated": "bad_credentials",
        "key_expired": "bad_credentials",
        "not_found": "resource_not_found",
        "rate_limited": "rate_limit_exceeded",
    },
    limit_headers="github",
    wait="reset_epoch",
)

DIALECTS: dict[str, Dialect] = {
    d.name: d for d in (CONTRACT, KEYED, BARE, TAGGED, CAMEL, ENVELOPED, RESULT)
}


def dialect(name: str) -> Dialect:
    """The dialect called `name`; a ValueError names the known ones."""
    found = DIALECTS.get(name)
    if found is None:
        raise ValueError(f"unknown sandbox dialect {name!r}; known: {', '.join(DIALECTS)}")
    return found
