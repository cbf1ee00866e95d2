"""The OpenAPI 3.1 description of the v1 surface, served at /openapi.json.

It describes what `app.py` and `service.py` actually do (which is what API-CONTRACT.md fixes):
every /v1 path and method of the app's routing tables, the exact validation rules of every query
parameter and request body, the response shapes, the error envelope for every status an operation
can answer with, and the headers. The /_sandbox control surface is deliberately not described.

Everything is plain Python data built once per call; shared pieces (scalar schemas, parameters,
headers, error responses) are defined once and referenced with `$ref`.
"""

from __future__ import annotations

from typing import Any

from centsync.sandbox.openapi_schemas import (
    COUNT,
    DATE,
    GROUP_BY,
    SORTS,
    TX_TYPE,
    UUID,
    Schema,
    _ref,
    _schema,
    _schemas,
)

# ---- components: headers -------------------------------------------------------------------
RATE_LIMIT_HEADERS = (
    "X-RateLimit-Limit-Minute",
    "X-RateLimit-Remaining-Minute",
    "X-RateLimit-Limit-Hour",
    "X-RateLimit-Remaining-Hour",
)


def _headers() -> dict[str, Schema]:
    out: dict[str, Schema] = {
        "X-Request-Id": {
            "description": "Identifies the request; quote it when reporting a problem. On every response.",
            "required": True,
            "schema": UUID,
        },
        "Retry-After": {
            "description": "Whole seconds to wait before retrying.",
            "required": True,
            "schema": {"type": "integer", "minimum": 1},
        },
        "Idempotent-Replayed": {
            "description": "`true` when this is the stored answer to an earlier request with the same Idempotency-Key.",
            "required": False,
            "schema": {"type": "string", "enum": ["true"]},
        },
    }
    for name in RATE_LIMIT_HEADERS:
        out[name] = {
            "description": "The key's allowance in the current fixed UTC window; absent on 401 and when omitted.",
            "required": False,
            "schema": COUNT,
        }
    return out


def _response_headers(*, retry_after: bool = False, replayed: bool = False) -> dict[str, Schema]:
    names = ["X-Request-Id", *RATE_LIMIT_HEADERS]
    if retry_after:
        names.append("Retry-After")
    if replayed:
        names.append("Idempotent-Replayed")
    return {name: _ref("headers", name) for name in names}


# ---- components: responses -----------------------------------------------------------------
# name: (status, description, codes, carries Retry-After)
ERRORS: dict[str, tuple[int, str, list[str], bool]] = {
    "BadRequest": (
        400,
        "Invalid request: malformed JSON, wrong types, bad query values, unknown or missing fields, "
        "a string over its limit, a referenced id that does not exist.",
        ["invalid_request"],
        False,
    ),
    "Unauthenticated": (
        401,
        "Missing, malformed, unknown, revoked or expired key.",
        ["unauthenticated", "key_expired"],
        False,
    ),
    "InsufficientScope": (
        403,
        "The key lacks the scope; permanent, never retry.",
        ["insufficient_scope"],
        False,
    ),
    "NotFound": (404, "No transaction with this id for the key's owner.", ["not_found"], False),
    "IdempotencyConflict": (
        409,
        "A request with the same Idempotency-Key is still being processed.",
        ["idempotency_conflict"],
        True,
    ),
    "UnsupportedMediaType": (
        415,
        "The body's Content-Type is not application/json.",
        ["unsupported_media_type"],
        False,
    ),
    "IdempotencyKeyReused": (
        422,
        "The Idempotency-Key was used earlier by this owner with a different request.",
        ["idempotency_key_reused"],
        False,
    ),
    "RateLimited": (
        429,
        "The key's per-minute or per-hour allowance is used up.",
        ["rate_limited"],
        True,
    ),
    "SyncRateLimited": (
        429,
        "The key's allowance, or a provider's manual-sync quota (never retry that one in the same run), is used up.",
        ["rate_limited", "provider_quota_exhausted"],
        True,
    ),
    "InternalError": (500, "An unexpected fault.", ["internal_error"], False),
    "ServiceUnavailable": (503, "Outage; retry later.", ["service_unavailable"], True),
}


def _responses() -> dict[str, Schema]:
    out: dict[str, Schema] = {}
    for name, (_, description, codes, retry_after) in ERRORS.items():
        out[name] = {
            "description": description,
            "headers": _response_headers(retry_after=retry_after),
            "content": {
                "application/json": {
                    "schema": {
                        "allOf": [
                            _schema("Error"),
                            {"properties": {"error": {"properties": {"code": {"enum": codes}}}}},
                        ]
                    }
                }
            },
        }
    return out


# ---- components: parameters ----------------------------------------------------------------
def _query(name: str, schema: Schema, description: str) -> Schema:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema,
    }


def _parameters() -> dict[str, Schema]:
    return {
        "TransactionId": {
            "name": "id",
            "in": "path",
            "required": True,
            "description": "A transaction uuid (another owner's transaction is a 404).",
            "schema": UUID,
        },
        "IdempotencyKey": {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "description": (
                "1 to 255 printable ASCII characters, kept per owner for 24 hours. Same key and same body: "
                "the original answer again with `Idempotent-Replayed: true`. Only 2xx answers are kept. "
                "Derive it from the originating event."
            ),
            "schema": {
                "type": "string",
                "minLength": 1,
                "maxLength": 255,
                "pattern": "^[\\x20-\\x7E]+$",
            },
        },
        "Page": _query(
            "page",
            {"type": "integer", "minimum": 1, "maximum": 999_999_999, "default": 1},
            "Page number. A page past `pages` returns `data: []`.",
        ),
        "Limit": _query(
            "limit", {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}, "Page size."
        ),
        "Sort": _query(
            "sort",
            {"type": "string", "enum": SORTS, "default": "booked_at"},
            "Newest first by `booked_at` (then `created_at`, then `id`) or by `created_at` (then `id`).",
        ),
        "Type": _query("type", TX_TYPE, "Only this transaction type."),
        "AccountId": _query("account_id", UUID, "Only this account (must be a visible account)."),
        "CategoryId": _query("category_id", UUID, "Only this category (must exist)."),
        "ExpenseGoalId": _query(
            "expense_goal_id", UUID, "Only transactions assigned to this Expense (must exist)."
        ),
        "Search": _query(
            "search",
            {"type": "string", "maxLength": 200},
            "Case-insensitive substring of `concept`.",
        ),
        "From": _query(
            "from", DATE, "Inclusive lower bound on `booked_at`; must not be after `to`."
        ),
        "To": _query("to", DATE, "Inclusive upper bound on `booked_at`."),
        "SpendingFrom": _query(
            "from",
            DATE,
            "Inclusive; default the first day of the current month (settings timezone); must not be after `to`.",
        ),
        "SpendingTo": _query(
            "to", DATE, "Inclusive; default the last day of the current month (settings timezone)."
        ),
        "GroupBy": _query(
            "group_by",
            {"type": "string", "enum": GROUP_BY, "default": "category"},
            "How spending is grouped.",
        ),
    }


FILTERS = ["Type", "AccountId", "CategoryId", "ExpenseGoalId", "Search", "From", "To"]
PAGING = ["Page", "Limit", "Sort"]


# ---- operations ----------------------------------------------------------------------------
COMMON_ERRORS = [
    "Unauthenticated",
    "InsufficientScope",
    "RateLimited",
    "InternalError",
    "ServiceUnavailable",
]
WRITE_ERRORS = ["BadRequest", "IdempotencyConflict", "UnsupportedMediaType", "IdempotencyKeyReused"]


def _operation(
    op_id: str,
    summary: str,
    tag: str,
    *,
    write: bool = False,
    status: int = 200,
    result: str,
    params: list[str] | None = None,
    body: str | None = None,
    errors: list[str] | None = None,
) -> Schema:
    scope = "data.write" if write else "data.read"
    op: Schema = {
        "operationId": op_id,
        "summary": summary,
        "tags": [tag],
        "description": f"Needs scope `{scope}`.",
        "x-required-scope": scope,
    }
    names = list(params or [])
    if body is not None:
        names.append("IdempotencyKey")
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _schema(body)}},
        }
    if names:
        op["parameters"] = [_ref("parameters", n) for n in names]
    responses: dict[str, Schema] = {
        str(status): {
            "description": summary,
            "headers": _response_headers(replayed=body is not None),
            "content": {"application/json": {"schema": _schema(result)}},
        }
    }
    specific = list(errors or [])
    if body is not None:
        specific = [*WRITE_ERRORS, *specific]
    # An operation with its own 429 (the sync's provider quota) replaces the common one.
    common = [e for e in COMMON_ERRORS if ERRORS[e][0] not in {ERRORS[n][0] for n in specific}]
    for name in dict.fromkeys([*specific, *common]):
        responses[str(ERRORS[name][0])] = _ref("responses", name)
    op["responses"] = dict(sorted(responses.items()))
    return op


def _identity_paths() -> dict[str, Schema]:
    """The identity path."""
    return {
        "/v1/me": {
            "get": _operation(
                "getMe", "The identity record of the calling key", "identity", result="Me"
            )
        },
    }


def _transaction_paths() -> dict[str, Schema]:
    """The transaction list, summary, detail and write paths."""
    tx_id = ["TransactionId"]
    return {
        "/v1/transactions": {
            "get": _operation(
                "listTransactions",
                "A page of transactions, newest first",
                "transactions",
                result="TransactionPage",
                params=[*PAGING, *FILTERS],
                errors=["BadRequest"],
            ),
            "post": _operation(
                "createTransaction",
                "Create a manual transaction",
                "transactions",
                write=True,
                status=201,
                result="TransactionDetail",
                body="TransactionCreate",
            ),
        },
        "/v1/transactions/summary": {
            "get": _operation(
                "summarizeTransactions",
                "Totals over the list's filters (page, limit and sort are validated and ignored)",
                "transactions",
                result="TransactionSummary",
                params=[*PAGING, *FILTERS],
                errors=["BadRequest"],
            )
        },
        "/v1/transactions/{id}": {
            "get": _operation(
                "getTransaction",
                "One transaction",
                "transactions",
                result="TransactionDetail",
                params=tx_id,
                errors=["BadRequest", "NotFound"],
            ),
            "patch": _operation(
                "updateTransaction",
                "Change fields of a transaction",
                "transactions",
                write=True,
                result="TransactionDetail",
                params=tx_id,
                body="TransactionPatch",
                errors=["NotFound"],
            ),
        },
        "/v1/transactions/{id}/expense": {
            "post": _operation(
                "assignExpense",
                "Assign an expense transaction to an Expense, or clear the assignment",
                "transactions",
                write=True,
                result="TransactionDetail",
                params=tx_id,
                body="ExpenseAssignment",
                errors=["NotFound"],
            )
        },
    }


def _account_paths() -> dict[str, Schema]:
    """The account, account summary and connection paths."""
    return {
        "/v1/accounts": {
            "get": _operation(
                "listAccounts", "Every visible account", "accounts", result="AccountList"
            )
        },
        "/v1/accounts/summary": {
            "get": _operation(
                "summarizeAccounts",
                "Balance rollups across all accounts",
                "accounts",
                result="AccountsSummary",
            )
        },
        "/v1/connections": {
            "get": _operation(
                "listConnections",
                "The bank connections and their sync state",
                "accounts",
                result="ConnectionList",
            )
        },
    }


def _analytics_and_settings_paths() -> dict[str, Schema]:
    """The analytics and settings paths."""
    return {
        "/v1/analytics/net-worth": {
            "get": _operation(
                "getNetWorth", "Assets, liabilities and net worth", "analytics", result="NetWorth"
            )
        },
        "/v1/analytics/spending": {
            "get": _operation(
                "getSpending",
                "Spending (expense transactions, refunds included) grouped by category, merchant or month",
                "analytics",
                result="Spending",
                params=["SpendingFrom", "SpendingTo", "GroupBy"],
                errors=["BadRequest"],
            )
        },
        "/v1/settings": {
            "get": _operation("getSettings", "Account settings", "settings", result="Settings")
        },
    }


def _sync_paths() -> dict[str, Schema]:
    """The sync status and trigger paths."""
    return {
        "/v1/sync/status": {
            "get": _operation(
                "getSyncStatus",
                "When each connection last synced and is next due",
                "sync",
                result="SyncStatus",
            )
        },
        "/v1/sync": {
            "post": _operation(
                "triggerSync",
                "Ask connected providers for new transactions",
                "sync",
                write=True,
                status=202,
                result="SyncAccepted",
                body="SyncRequest",
                errors=["SyncRateLimited"],
            )
        },
    }


def _paths() -> dict[str, Schema]:
    """Every /v1 path, in the order the document lists them."""
    return {
        **_identity_paths(),
        **_transaction_paths(),
        **_account_paths(),
        **_analytics_and_settings_paths(),
        **_sync_paths(),
    }


def openapi_document() -> dict[str, Any]:
    """The whole /v1 surface as an OpenAPI 3.1 document (a fresh dict on every call)."""
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "Personal Finance Data API",
            "version": "v1",
            "description": (
                "Money amounts are integers in cents (spending negative, income positive); dates are "
                "`YYYY-MM-DD`; identifiers are UUIDs; bodies are JSON. Every error body is "
                '`{"error": {"code", "message", "details"?}}`. Every response carries `X-Request-Id`; '
                "/v1 responses to an authenticated key carry the `X-RateLimit-*` headers unless omitted. "
                "An unknown /v1 path answers 404 `not_found`; a known path with a method it does not "
                "have answers 405 `method_not_allowed`."
            ),
        },
        "tags": [
            {"name": name}
            for name in ("identity", "transactions", "accounts", "analytics", "settings", "sync")
        ],
        "security": [{"bearerAuth": []}],
        "paths": _paths(),
        "components": {
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key: `pfd_live_` and 40 characters of [A-Za-z0-9]. Read-only keys hold `data.read`; read and write keys also `data.write`.",
                }
            },
            "schemas": _schemas(),
            "parameters": _parameters(),
            "headers": _headers(),
            "responses": _responses(),
        },
    }
