"""The writes: manual transactions, edits, Expense assignments and bank syncs."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ._models import (
    SyncRequest,
    Transaction,
)
from ._requests import RequestCore
from ._transport import _date_param, _json


class Writers(RequestCore):
    """``POST``/``PATCH`` requests, each with its idempotency key where the API takes one."""

    async def create_transaction(
        self,
        *,
        account_id: str,
        amount: int,
        concept: str,
        booked_at: dt.date | str,
        idempotency_key: str,
        type: str | None = None,
        category_id: str | None = None,
        expense_goal_id: str | None = None,
        notes: str | None = None,
    ) -> Transaction:
        """``POST /v1/transactions``; resent with the same ``idempotency_key`` when unsure.

        Derive ``idempotency_key`` from the originating event (never a fresh random value per
        call), so a crash and rerun replays instead of creating twice.
        """
        if not isinstance(amount, int) or isinstance(amount, bool):
            raise TypeError("amount must be integer cents")
        if not idempotency_key:
            raise ValueError("idempotency_key is required: derive it from the originating event")
        body: dict[str, Any] = {
            "account_id": account_id,
            "amount": amount,
            "concept": concept,
            "booked_at": _date_param(booked_at),
        }
        optional = {
            "type": type,
            "category_id": category_id,
            "expense_goal_id": expense_goal_id,
            "notes": notes,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        response = await self.request(
            "POST", "/v1/transactions", json=body, idempotency_key=idempotency_key
        )
        return Transaction.parse(
            _json(response),
            response.text,
            replayed=response.headers.get("idempotent-replayed", "").lower() == "true",
        )

    async def update_transaction(self, transaction_id: str, **fields: Any) -> Transaction:
        """``PATCH /v1/transactions/{id}`` with only the fields to change."""
        if not fields:
            raise ValueError("nothing to update")
        body = {k: (_date_param(v) if isinstance(v, dt.date) else v) for k, v in fields.items()}
        response = await self.request("PATCH", f"/v1/transactions/{transaction_id}", json=body)
        return Transaction.parse(_json(response), response.text)

    async def assign_expense(self, transaction_id: str, expense_goal_id: str | None) -> Transaction:
        """``POST /v1/transactions/{id}/expense``: assign to an Expense, or clear with None."""
        response = await self.request(
            "POST",
            f"/v1/transactions/{transaction_id}/expense",
            json={"expense_goal_id": expense_goal_id},
        )
        return Transaction.parse(_json(response), response.text)

    async def write(
        self, method: str, path: str, body: dict[str, Any], *, idempotency_key: str
    ) -> Transaction:
        """A write planned elsewhere (an outbox row): exactly ``body``, under ``idempotency_key``.

        Every attempt sends the same bytes with the same key, so a resend after an unknown
        outcome is replayed by the service, never applied twice. Returns the transaction the
        service answered with (``replayed`` when it had already applied it).
        """
        if method not in ("POST", "PATCH") or not path.startswith("/v1/transactions"):
            raise ValueError(f"not a transaction write: {method} {path}")
        if not idempotency_key:
            raise ValueError("idempotency_key is required: derive it from the originating event")
        response = await self.request(method, path, json=body, idempotency_key=idempotency_key)
        return Transaction.parse(
            _json(response),
            response.text,
            replayed=response.headers.get("idempotent-replayed", "").lower() == "true",
        )

    async def trigger_sync(
        self, provider: str | None = None, *, idempotency_key: str | None = None
    ) -> SyncRequest:
        """``POST /v1/sync`` for every provider or one; a spent quota raises, never retried."""
        body = {} if provider is None else {"provider": provider}
        response = await self.request(
            "POST",
            "/v1/sync",
            json=body,
            idempotency_key=idempotency_key,
            retry_unknown_outcome=idempotency_key is not None,
        )
        return SyncRequest.parse(_json(response), response.text)
