"""The OpenAPI schemas of the v1 surface: scalars and every request and response body.

The API's enums are written here and again in `warehouse/validation.py` on purpose: the
sandbox is an independent oracle of the contract and shares no code with the client side.
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


def _tx_fields() -> dict[str, Schema]:
    """A transaction's fields, as the list and the detail share them."""
    return {
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


def _tx_required() -> list[str]:
    """The fields every transaction carries."""
    return [
        "id",
        "account_id",
        "concept",
        "amount",
        "booked_at",
        "type",
        "category_id",
        "expense_goal_id",
    ]


def _sync_item() -> dict[str, Schema]:
    """One connection's sync state."""
    return {
        "connection_id": UUID,
        "provider": {"type": "string"},
        "status": {"type": "string", "enum": CONNECTION_STATUSES},
        "last_synced_at": TIMESTAMP,
        "next_sync_at": TIMESTAMP,
    }


def _transaction_schemas() -> dict[str, Schema]:
    """Transactions: the row, its detail, the page and the summary."""
    tx_fields = _tx_fields()
    tx_required = _tx_required()
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
    }


def _transaction_write_schemas() -> dict[str, Schema]:
    """The bodies that create, change and assign transactions."""
    return {
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
    }


def _account_schemas() -> dict[str, Schema]:
    """Accounts, their summary, connections and sync."""
    sync_item = _sync_item()
    return {
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
    }


def _analytics_schemas() -> dict[str, Schema]:
    """Net worth and spending."""
    return {
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
    }


def _identity_schemas() -> dict[str, Schema]:
    """Settings, the identity record and the error envelope."""
    return {
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


def _schemas() -> dict[str, Schema]:
    """Every component schema, in the order the document lists them."""
    return {
        **_transaction_schemas(),
        **_transaction_write_schemas(),
        **_account_schemas(),
        **_analytics_schemas(),
        **_identity_schemas(),
    }
