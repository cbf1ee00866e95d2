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

Schema = dict[str, Any]

MAX_AMOUNT = 10**12
TX_TYPES = ["expense", "income", "transfer"]
ACCOUNT_TYPES = ["depository", "credit", "investment", "loan", "unclassified"]
CONNECTION_STATUSES = ["active", "reauth_required", "error"]
SCOPES = ["data.read", "data.write"]
GROUP_BY = ["category", "merchant", "month"]
SORTS = ["booked_at", "created_at"]


def _ref(kind: str, name: str) -> Schema:
    return {"$ref": f"#/components/{kind}/{name}"}


def _schema(name: str) -> Schema:
    return _ref("schemas", name)


# ---- scalar schemas ------------------------------------------------------------------------
UUID: Schema = {"type": "string", "format": "uuid"}
NULLABLE_UUID: Schema = {"type": ["string", "null"], "format": "uuid"}
DATE: Schema = {
    "type": "string",
    "format": "date",
    "pattern": "^(19|2[0-9])[0-9]{2}-[0-9]{2}-[0-9]{2}$",
    "description": "A calendar date, `YYYY-MM-DD`, in the years 1900 to 2999.",
}
TIMESTAMP: Schema = {
    "type": "string",
    "format": "date-time",
    "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$",
    "description": "ISO 8601 UTC timestamp with milliseconds, e.g. `2025-03-01T12:00:00.000Z`.",
}
CENTS: Schema = {"type": "integer", "description": "Money in cents."}
NON_NEGATIVE_CENTS: Schema = {
    "type": "integer",
    "minimum": 0,
    "description": "Money in cents, a magnitude.",
}
BOUNDED_CENTS: Schema = {
    "type": "integer",
    "minimum": -MAX_AMOUNT,
    "maximum": MAX_AMOUNT,
    "description": (
        "Money in cents within +/- 10^12; negative for spending. A JSON integer: a number written "
        "with a fraction or an exponent (`100.0`, `1e2`) is refused with 400 even when its value is whole."
    ),
}
COUNT: Schema = {"type": "integer", "minimum": 0}
CURRENCY: Schema = {"type": "string", "pattern": "^[A-Z]{3}$", "description": "ISO 4217 code."}
CONCEPT: Schema = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "Merchant or description.",
}
NOTES: Schema = {
    "type": ["string", "null"],
    "maxLength": 2000,
    "description": "Free text, at most 2000 characters (Unicode code points).",
}
TX_TYPE: Schema = {"type": "string", "enum": TX_TYPES}


# ---- components: schemas -------------------------------------------------------------------
def _object(
    properties: dict[str, Schema], required: list[str] | None = None, **extra: Any
) -> Schema:
    """A response object: listed fields required, unknown fields allowed (responses may grow)."""
    out: Schema = {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
    }
    out.update(extra)
    return out


def _body(properties: dict[str, Schema], required: list[str] | None = None, **extra: Any) -> Schema:
    """A request body: closed (an unknown field is a 400)."""
    out: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    out.update(extra)
    return out


def _schemas() -> dict[str, Schema]:
    tx_fields: dict[str, Schema] = {
        "id": UUID,
        "account_id": {**UUID, "description": "The account the transaction belongs to."},
        "concept": CONCEPT,
        "amount": {**CENTS, "description": "Cents; negative for spending, positive for income."},
        "booked_at": {
            **DATE,
            "description": "The calendar day of the transaction in the settings timezone.",
        },
        "type": TX_TYPE,
        "category_id": NULLABLE_UUID,
        "expense_goal_id": {
            **NULLABLE_UUID,
            "description": "The Expense it is assigned to; null when unassigned.",
        },
        "notes": {
            **NOTES,
            "description": "Present on single-transaction responses, never in the list.",
        },
        "created_at": {
            **TIMESTAMP,
            "description": "Creation time (what `sort=created_at` orders by). May be absent.",
        },
        "updated_at": {**TIMESTAMP, "description": "Last change. May be absent."},
    }
    tx_required = [
        "id",
        "account_id",
        "concept",
        "amount",
        "booked_at",
        "type",
        "category_id",
        "expense_goal_id",
    ]
    sync_item: dict[str, Schema] = {
        "connection_id": UUID,
        "provider": {"type": "string"},
        "status": {"type": "string", "enum": CONNECTION_STATUSES},
        "last_synced_at": TIMESTAMP,
        "next_sync_at": TIMESTAMP,
    }
    return {
        "Transaction": _object(
            tx_fields,
            tx_required,
            description="A transaction as the list returns it (no `notes`). Clients must ignore unknown fields.",
        ),
        "TransactionDetail": {
            "description": "A transaction as single-transaction responses return it: with `notes`.",
            "allOf": [_schema("Transaction"), {"type": "object", "required": ["notes"]}],
        },
        "TransactionPage": _object(
            {
                "data": {"type": "array", "items": _schema("Transaction")},
                "total": {**COUNT, "description": "Number of matching rows."},
                "page": {"type": "integer", "minimum": 1, "description": "The page returned."},
                "pages": {**COUNT, "description": "ceil(total / limit); 0 when nothing matches."},
            }
        ),
        "TransactionSummary": _object(
            {
                "count": COUNT,
                "income": {**CENTS, "description": "Sum of `amount` over `type = income`."},
                "expense": {**CENTS, "description": "Sum of `amount` over `type = expense`."},
                "transfer": {**CENTS, "description": "Sum of `amount` over `type = transfer`."},
                "net": {**CENTS, "description": "Sum of every `amount`."},
            }
        ),
        "TransactionCreate": _body(
            {
                "account_id": {**UUID, "description": "A visible account."},
                "amount": BOUNDED_CENTS,
                "concept": CONCEPT,
                "booked_at": DATE,
                "type": {
                    "type": ["string", "null"],
                    "enum": [*TX_TYPES, None],
                    "description": "Inferred from the sign of `amount` when omitted or null; required when `amount` is 0.",
                },
                "category_id": {**NULLABLE_UUID, "description": "An existing category."},
                "expense_goal_id": {
                    **NULLABLE_UUID,
                    "description": "An existing Expense; only for `type = expense`.",
                },
                "notes": NOTES,
            },
            ["account_id", "amount", "concept", "booked_at"],
        ),
        "TransactionPatch": _body(
            {
                "concept": CONCEPT,
                "category_id": {
                    **NULLABLE_UUID,
                    "description": "An existing category, or null to clear.",
                },
                "notes": NOTES,
                "amount": {
                    **BOUNDED_CENTS,
                    "description": "Manual transactions only (400 for a bank-feed one).",
                },
                "booked_at": {
                    **DATE,
                    "description": "Manual transactions only (400 for a bank-feed one).",
                },
                "type": {
                    **TX_TYPE,
                    "description": "Manual transactions only (400 for a bank-feed one).",
                },
            },
            minProperties=1,
            description=(
                "Only the fields to change; an empty object is a 400. `expense_goal_id` is refused (400): "
                "use POST /v1/transactions/{id}/expense."
            ),
        ),
        "ExpenseAssignment": _body(
            {
                "expense_goal_id": {
                    **NULLABLE_UUID,
                    "description": "An existing Expense, or null to clear.",
                }
            },
            ["expense_goal_id"],
        ),
        "Account": _object(
            {
                "id": UUID,
                "name": {"type": "string"},
                "type": {"type": "string", "enum": ACCOUNT_TYPES},
                "subtype": {"type": ["string", "null"]},
                "currency": CURRENCY,
                "balance": {**CENTS, "description": "Negative when money is owed (credit, loan)."},
                "connection_id": {
                    **NULLABLE_UUID,
                    "description": "Null for manual accounts. May be absent.",
                },
                "institution": {"type": ["string", "null"], "description": "May be absent."},
                "updated_at": {**TIMESTAMP, "description": "May be absent."},
            },
            ["id", "name", "type", "subtype", "currency", "balance"],
        ),
        "AccountList": {
            "type": "array",
            "items": _schema("Account"),
            "description": "Every visible account, sorted by name (case-insensitive), then id.",
        },
        "AccountsSummary": _object(
            {
                "currency": CURRENCY,
                "assets": {**NON_NEGATIVE_CENTS, "description": "Sum of positive balances."},
                "liabilities": {
                    **NON_NEGATIVE_CENTS,
                    "description": "Magnitude of the sum of negative balances.",
                },
                "net_worth": {**CENTS, "description": "assets - liabilities."},
                "count": COUNT,
                "by_type": {
                    "type": "object",
                    "propertyNames": {"enum": ACCOUNT_TYPES},
                    "additionalProperties": CENTS,
                    "description": "Sum of balances per account type.",
                },
            }
        ),
        "Connection": _object(
            {
                "id": UUID,
                "provider": {
                    "type": "string",
                    "description": "A bank-data provider id (configurable; never hard-code).",
                },
                "institution": {"type": "string"},
                "status": {"type": "string", "enum": CONNECTION_STATUSES},
                "last_synced_at": TIMESTAMP,
                "account_ids": {"type": "array", "items": UUID},
            }
        ),
        "ConnectionList": _object({"data": {"type": "array", "items": _schema("Connection")}}),
        "SyncStatusItem": _object(sync_item),
        "SyncStatus": _object({"data": {"type": "array", "items": _schema("SyncStatusItem")}}),
        "SyncRequest": _body(
            {
                "provider": {
                    "type": "string",
                    "description": "Restrict the sync to one provider (an id from GET /v1/connections); unknown ids are a 400.",
                    "examples": ["bankfeed_eu", "openbank_uk"],
                }
            },
            description="`{}` syncs every connected provider.",
        ),
        "SyncAccepted": _object(
            {
                "sync_id": UUID,
                "status": {"type": "string", "const": "queued"},
                "providers": {"type": "array", "items": {"type": "string"}},
            }
        ),
        "NetWorth": _object(
            {
                "currency": CURRENCY,
                "assets": NON_NEGATIVE_CENTS,
                "liabilities": NON_NEGATIVE_CENTS,
                "total": {**CENTS, "description": "assets - liabilities."},
                "as_of": TIMESTAMP,
            }
        ),
        "SpendingRow": _object(
            {
                "key": {
                    "type": ["string", "null"],
                    "description": "category: the category uuid (null for uncategorized); merchant: the normalised concept; month: `YYYY-MM`.",
                },
                "label": {"type": "string"},
                "amount": CENTS,
                "count": {"type": "integer", "minimum": 1},
            }
        ),
        "Spending": _object(
            {
                "from": DATE,
                "to": DATE,
                "group_by": {"type": "string", "enum": GROUP_BY},
                "currency": CURRENCY,
                "total": CENTS,
                "data": {
                    "type": "array",
                    "items": _schema("SpendingRow"),
                    "description": "Rows by amount ascending (largest spending first), then key.",
                },
            }
        ),
        "Settings": _object(
            {
                "timezone": {
                    "type": "string",
                    "description": "IANA name; decides which day a transaction falls on.",
                },
                "currency": CURRENCY,
                "locale": {"type": "string"},
                "week_start": {"type": "string"},
            }
        ),
        "Me": _object(
            {
                "account_id": {**UUID, "description": "The owner of the key."},
                "scopes": {
                    "type": "array",
                    "items": {"type": "string", "enum": SCOPES},
                    "uniqueItems": True,
                },
                "key": _object({"id": UUID, "expires_at": TIMESTAMP}),
                "rate_limit": _object(
                    {
                        "minute_limit": COUNT,
                        "minute_remaining": COUNT,
                        "hour_limit": COUNT,
                        "hour_remaining": COUNT,
                    }
                ),
            }
        ),
        "Error": _object(
            {
                "error": _object(
                    {
                        "code": {"type": "string"},
                        "message": {"type": "string"},
                        "details": {
                            "type": "array",
                            "items": _object(
                                {"field": {"type": "string"}, "issue": {"type": "string"}}
                            ),
                        },
                    },
                    ["code", "message"],
                )
            },
            description="The error envelope of every error response.",
        ),
    }


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


def _paths() -> dict[str, Schema]:
    tx_id = ["TransactionId"]
    return {
        "/v1/me": {
            "get": _operation(
                "getMe", "The identity record of the calling key", "identity", result="Me"
            )
        },
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
