"""Four more dialects (the registry is `dialects.py`): Stripe's, Google's, a `data` envelope's
and Cloudflare's styles of answering the surfaces the API document leaves "not shown"."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import orjson

from centsync.sandbox.dialect import Ctx, Dialect, epoch, month_day, renamed, without


# ---- tagged: Stripe's style ------------------------------------------------------------------
def _tagged_tx(rec: dict[str, Any], ctx: Ctx, in_list: bool) -> dict[str, Any]:
    out = {"object": "transaction", **without(rec, "created_at", "updated_at")}
    if "created_at" in rec:  # (not with the `drop_extra_fields` fault)
        out["created"] = epoch(rec["created_at"])
    return {**out, "livemode": False, "metadata": {}}


def _stripe_list(url: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"object": "list", "url": url, "has_more": False, "data": rows}


def _tagged_balances(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    counts = Counter(a.type for a in ctx.service.visible_accounts())
    rows = [
        {"object": "balance_total", "type": t, "amount": amount, "accounts": counts[t]}
        for t, amount in b["by_type"].items()
    ]
    return _stripe_list("/v1/accounts/summary", rows)


def _tagged_connections(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    rows = [
        {
            "object": "connection",
            **without(c, "last_synced_at", "account_ids"),
            "last_synced": epoch(c["last_synced_at"]),
            "accounts": c["account_ids"],
        }
        for c in b["data"]
    ]
    return _stripe_list("/v1/connections", rows)


def _tagged_sync_status(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    rows = [
        {
            "object": "sync_status",
            "connection": r["connection_id"],
            "provider": r["provider"],
            "status": r["status"],
            "last_synced": epoch(r["last_synced_at"]),
            "next_sync": epoch(r["next_sync_at"]),
        }
        for r in b["data"]
    ]
    return _stripe_list("/v1/sync/status", rows)


def _tagged_spending(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    rows = [
        {
            "object": "spending_group",
            "id": r["key"],
            "name": r["label"],
            **without(r, "key", "label"),
        }
        for r in b["data"]
    ]
    return _stripe_list("/v1/analytics/spending", rows)


TAGGED = Dialect(
    "tagged",
    "Objects tagged with `object`, other lists as `{object: list, data}`, unix times, creates 200.",
    "Stripe: `object`/`livemode`/`created` epoch seconds, `resource_missing`, no rate-limit headers",
    tx=_tagged_tx,
    shapes={
        "transactions_summary": lambda b, ctx: {
            "object": "transaction_summary",
            "count": b["count"],
            "net": b["net"],
        },
        "accounts_summary": _tagged_balances,
        "connections": _tagged_connections,
        "net_worth": lambda b, ctx: {
            "object": "net_worth",
            **renamed(without(b, "as_of"), {"total": "net"}),
            "as_of": epoch(b["as_of"]),
        },
        "spending": _tagged_spending,
        "settings": lambda b, ctx: {
            "object": "settings",
            **renamed(b, {"currency": "default_currency"}),
        },
        "sync_status": _tagged_sync_status,
        "sync": lambda b, ctx: {
            "object": "sync",
            "id": b["sync_id"],
            "status": "pending",
            "providers": b["providers"],
        },
    },
    statuses={"create": 200, "sync": 200},
    codes={
        "invalid_request": "parameter_invalid",
        "unauthenticated": "invalid_api_key",
        "key_expired": "api_key_expired",
        "not_found": "resource_missing",
        "rate_limited": "rate_limit",
        "idempotency_conflict": "idempotency_key_in_use",
        "idempotency_key_reused": "idempotency_error",
    },
    limit_headers="none",
    wait="none",
)


# ---- camel: Google's style -------------------------------------------------------------------
def _etag(rec: dict[str, Any]) -> str:
    return '"' + hashlib.sha256(orjson.dumps(rec)).hexdigest()[:16] + '"'


def _camel_tx(rec: dict[str, Any], ctx: Ctx, in_list: bool) -> dict[str, Any]:
    out = renamed(rec, {"created_at": "createTime", "updated_at": "updateTime"})
    return {"kind": "centsync#transaction", "etag": _etag(rec), **out}


def _camel_spending(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    rows = [
        {
            "key": month_day(r["key"], b["group_by"]),
            "label": r["label"],
            "amountCents": r["amount"],
            "count": r["count"],
        }
        for r in b["data"]
    ]
    return {
        "kind": "centsync#spending",
        "startDate": b["from"],
        "endDate": b["to"],
        "groupBy": b["group_by"],
        "currencyCode": b["currency"],
        "totalCents": b["total"],
        "items": rows,
    }


def _camel_list(kind: str, rows: list[dict[str, Any]], names: dict[str, str]) -> dict[str, Any]:
    return {"kind": f"centsync#{kind}List", "items": [renamed(r, names) for r in rows]}


_CAMEL_CONNECTION = {"last_synced_at": "lastSyncTime", "account_ids": "accountIds"}
_CAMEL_SYNC = {
    "connection_id": "connectionId",
    "last_synced_at": "lastSyncTime",
    "next_sync_at": "nextSyncTime",
}

CAMEL = Dialect(
    "camel",
    "camelCase names, `kind`/`items` lists, oldest first, creates 200, sync as an Operation.",
    "Google (Calendar/Drive v3 and AIP): `timeZone`, `items`, `createTime`, `RESOURCE_EXHAUSTED`",
    ascending=True,
    tx=_camel_tx,
    shapes={
        "transactions_summary": lambda b, ctx: {
            "kind": "centsync#transactionTotals",
            "count": b["count"],
            "incomeCents": b["income"],
            "expenseCents": b["expense"],
            "transferCents": b["transfer"],
            "netCents": b["net"],
        },
        "accounts_summary": lambda b, ctx: {
            "kind": "centsync#accountTotals",
            **renamed(
                b,
                {
                    "currency": "currencyCode",
                    "net_worth": "netWorth",
                    "count": "accountCount",
                    "by_type": "byType",
                },
            ),
        },
        "connections": lambda b, ctx: _camel_list("connection", b["data"], _CAMEL_CONNECTION),
        "net_worth": lambda b, ctx: {
            "kind": "centsync#netWorth",
            **renamed(b, {"currency": "currencyCode", "total": "netWorth", "as_of": "asOf"}),
        },
        "spending": _camel_spending,
        "settings": lambda b, ctx: {
            "kind": "centsync#settings",
            **renamed(
                b, {"timezone": "timeZone", "currency": "currencyCode", "week_start": "weekStart"}
            ),
        },
        "sync_status": lambda b, ctx: _camel_list("syncStatus", b["data"], _CAMEL_SYNC),
        "sync": lambda b, ctx: {
            "name": f"operations/{b['sync_id']}",
            "done": False,
            "metadata": {"@type": "centsync.SyncRequest", "providers": b["providers"]},
        },
    },
    statuses={"create": 200, "sync": 200},
    codes={
        "invalid_request": "INVALID_ARGUMENT",
        "unauthenticated": "UNAUTHENTICATED",
        "key_expired": "UNAUTHENTICATED",
        "not_found": "NOT_FOUND",
        "method_not_allowed": "UNIMPLEMENTED",
        "rate_limited": "RESOURCE_EXHAUSTED",
        "idempotency_conflict": "ABORTED",
        "idempotency_key_reused": "FAILED_PRECONDITION",
        "unsupported_media_type": "INVALID_ARGUMENT",
        "internal_error": "INTERNAL",
        "service_unavailable": "UNAVAILABLE",
    },
    limit_headers="ietf",
    wait="retry_after",
)


# ---- enveloped: a `data` envelope everywhere -------------------------------------------------
def _enveloped_spending(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    rows = [
        {
            "group": month_day(r["key"], b["group_by"]),
            "label": r["label"],
            "total_cents": r["amount"],
            "count": r["count"],
        }
        for r in b["data"]
    ]
    head = renamed(without(b, "data"), {"total": "total_cents"})
    return {"data": {**head, "groups": rows}}


_ENVELOPED_SYNC = {
    "connection_id": "connection",
    "status": "state",
    "last_synced_at": "last_sync",
    "next_sync_at": "next_sync",
}

ENVELOPED = Dialect(
    "enveloped",
    "Every answer under `data`, totals nested by type, creates 201 and sync 202 wrapped.",
    'Coinbase v2 / JSON:API-lite: `{"data": ...}`, `pagination`, `X-RateLimit-Reset` in seconds',
    shapes={
        "transactions_summary": lambda b, ctx: {
            "data": {
                "count": b["count"],
                "totals": {
                    "by_type": {t: b[t] for t in ("income", "expense", "transfer")},
                    "net": b["net"],
                },
            }
        },
        "transaction": lambda b, ctx: {"data": b},
        "create": lambda b, ctx: {"data": b},
        "update": lambda b, ctx: {"data": b},
        "assign": lambda b, ctx: {"data": b},
        "accounts_summary": lambda b, ctx: {"data": b},
        "connections": lambda b, ctx: {**b, "pagination": {"next_uri": None}},
        "net_worth": lambda b, ctx: {
            "data": {
                "net_worth": {k: b[k] for k in ("assets", "liabilities", "total")},
                "currency": b["currency"],
                "as_of": b["as_of"],
            }
        },
        "spending": _enveloped_spending,
        "settings": lambda b, ctx: {
            "data": renamed(b, {"timezone": "time_zone", "currency": "default_currency"})
        },
        "sync_status": lambda b, ctx: {"data": [renamed(r, _ENVELOPED_SYNC) for r in b["data"]]},
        "sync": lambda b, ctx: {"data": renamed(b, {"sync_id": "id"})},
    },
    codes={
        "invalid_request": "validation_error",
        "unauthenticated": "invalid_api_key",
        "key_expired": "expired_api_key",
        "not_found": "resource_not_found",
        "rate_limited": "too_many_requests",
    },
    limit_headers="delta",
    wait="reset_seconds",
)


# ---- result: Cloudflare's style --------------------------------------------------------------
def _result(value: Any, **more: Any) -> dict[str, Any]:
    return {"result": value, "success": True, "errors": [], "messages": [], **more}


def _result_list(rows: list[Any]) -> dict[str, Any]:
    return _result(rows, result_info={"count": len(rows), "total_count": len(rows)})


def _result_tx(rec: dict[str, Any], ctx: Ctx, in_list: bool) -> dict[str, Any]:
    return {**without(rec, "created_at", "updated_at"), "currency": ctx.service.currency}


def _result_balances(b: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    counts = Counter(a.type for a in ctx.service.visible_accounts())
    return _result_list(
        [
            {"type": t, "total_cents": amount, "accounts": counts[t]}
            for t, amount in b["by_type"].items()
        ]
    )


_RESULT_SYNC = {"last_synced_at": "last_sync", "next_sync_at": "next_sync"}

RESULT = Dialect(
    "result",
    "Every answer under `result` with `success`, less in the totals, creates 202, `throttled`.",
    'Cloudflare v4: `{"result", "success", "errors", "messages", "result_info"}`',
    tx=_result_tx,
    shapes={
        "transactions_summary": lambda b, ctx: _result(renamed(b, {"count": "n"})),
        "transaction": lambda b, ctx: _result(b),
        "create": lambda b, ctx: _result(b),
        "update": lambda b, ctx: _result(b),
        "assign": lambda b, ctx: _result(b),
        "accounts_summary": _result_balances,
        "connections": lambda b, ctx: _result_list(b["data"]),
        "net_worth": lambda b, ctx: _result(
            {
                "assets": b["assets"],
                "debts": b["liabilities"],
                "net": b["total"],
                "currency": b["currency"],
            }
        ),
        "spending": lambda b, ctx: _result_list(
            [renamed(r, {"amount": "total_cents"}) for r in b["data"]]
        ),
        "settings": lambda b, ctx: _result(renamed(b, {"currency": "primary_currency"})),
        "sync_status": lambda b, ctx: _result_list([renamed(r, _RESULT_SYNC) for r in b["data"]]),
        "sync": lambda b, ctx: _result({"id": b["sync_id"], "providers": b["providers"]}),
    },
    statuses={"create": 202, "sync": 200},
    codes={
        "invalid_request": "invalid_input",
        "unauthenticated": "authentication_error",
        "key_expired": "authentication_error",
        "rate_limited": "throttled",
    },
    wait="none",
)
