"""The writes: manual transactions, edits, Expense assignments and bank syncs.

The API document does not show the answers of the transaction writes. A write's transaction is
found in its answer whatever the status (200, 201, 202) or wrapper (``Transaction.from_answer``:
the object holding the documented fields that agree with what was sent), else read back: a
create from the list by its documented fields, an edit or assignment by its id. What cannot be
found either way is ``WriteUnconfirmed``: accepted, outcome unknown, safe to resend under the
same ``Idempotency-Key``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import httpx
import orjson

from ._errors import ResponseFormatError, WriteUnconfirmed
from ._models import (
    SyncRequest,
    Transaction,
    is_transaction,
)
from ._requests import RequestCore
from ._transport import _date_param, _json

# a create's fields that its transaction shows as sent (notes: the list does not show them)
CREATE_MATCH = (
    "account_id",
    "amount",
    "concept",
    "booked_at",
    "type",
    "category_id",
    "expense_goal_id",
)
_EDIT = re.compile(r"^/v1/transactions/([^/]+)(/expense)?$")


def _replayed(response: httpx.Response) -> bool:
    return response.headers.get("idempotent-replayed", "").lower() == "true"


def _answer(response: httpx.Response) -> Any:
    """A write's answer as JSON; None when it is empty or not JSON (it is then read back)."""
    try:
        return orjson.loads(response.content) if response.content.strip() else None
    except orjson.JSONDecodeError:
        return None


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
        return await self.write("POST", "/v1/transactions", body, idempotency_key=idempotency_key)

    async def update_transaction(self, transaction_id: str, **fields: Any) -> Transaction:
        """``PATCH /v1/transactions/{id}`` with only the fields to change."""
        if not fields:
            raise ValueError("nothing to update")
        body = {k: (_date_param(v) if isinstance(v, dt.date) else v) for k, v in fields.items()}
        path = f"/v1/transactions/{transaction_id}"
        response = await self.request("PATCH", path, json=body)
        return await self._confirmed_edit("PATCH", path, transaction_id, response)

    async def assign_expense(self, transaction_id: str, expense_goal_id: str | None) -> Transaction:
        """``POST /v1/transactions/{id}/expense``: assign to an Expense, or clear with None."""
        path = f"/v1/transactions/{transaction_id}/expense"
        response = await self.request("POST", path, json={"expense_goal_id": expense_goal_id})
        return await self._confirmed_edit("POST", path, transaction_id, response)

    async def write(
        self,
        method: str,
        path: str,
        body: dict[str, Any],
        *,
        idempotency_key: str,
        claimed: Iterable[str] = (),
    ) -> Transaction:
        """A write planned elsewhere (an outbox row): exactly ``body``, under ``idempotency_key``.

        Every attempt sends the same bytes with the same key, so a resend after an unknown
        outcome is replayed by the service, never applied twice. Returns the transaction the
        service wrote (``replayed`` when it had already applied it), found in its answer
        whatever its shape, or read back (a create: by its documented fields, never one of the
        ``claimed`` ids other rows already hold). Raises ``WriteUnconfirmed`` when neither shows
        it: the write's outcome is then unknown, and a resend under the same key is safe.
        """
        edit = _EDIT.match(path)
        create = (method, path) == ("POST", "/v1/transactions")
        if not (create or (edit and (method == "PATCH") == (edit.group(2) is None))):
            raise ValueError(f"not a transaction write: {method} {path}")
        if not idempotency_key:
            raise ValueError("idempotency_key is required: derive it from the originating event")
        response = await self.request(method, path, json=body, idempotency_key=idempotency_key)
        if create:
            return await self._confirmed_create(response, body, claimed)
        assert edit is not None
        return await self._confirmed_edit(method, path, edit.group(1), response)

    async def _confirmed_create(
        self, response: httpx.Response, body: dict[str, Any], claimed: Iterable[str]
    ) -> Transaction:
        """The created transaction: in the answer (the object agreeing with what was sent), else
        read back from the list (same account, day, concept, amount and the fields sent)."""
        expect = {k: body[k] for k in CREATE_MATCH if k in body}
        replayed = _replayed(response)
        t = Transaction.from_answer(
            _answer(response), response.text, expect, status=response.status_code, replayed=replayed
        )
        if t is not None:
            return t
        params = {
            "from": body["booked_at"],
            "to": body["booked_at"],
            "account_id": body["account_id"],
            "search": body["concept"],
            "limit": "200",
        }
        rows = await self._list_rows(params)
        taken = {c.lower() for c in claimed}
        matches = [r for r in rows if is_transaction(r, expect) and r["id"].lower() not in taken]
        if not matches:
            raise WriteUnconfirmed(
                "POST",
                "/v1/transactions",
                response.status_code,
                "accepted, but its answer holds no transaction with the fields sent and the "
                "list does not show one yet; resend it later under the same Idempotency-Key",
            )
        # several alike (the same purchase entered twice): the newest, when the list says
        matches.sort(key=lambda r: str(r.get("created_at") or ""), reverse=True)
        note = f", the newest of {len(matches)} alike" if len(matches) > 1 else ""
        raw = orjson.dumps(matches[0]).decode()
        return replace(
            Transaction.parse(matches[0], raw, replayed=replayed),
            status=response.status_code,
            answer=response.text,
            found=f"read back (GET /v1/transactions{note})",
        )

    async def _list_rows(self, params: dict[str, str]) -> list[dict[str, Any]]:
        """Every row of a list read (its documented envelope: ``data``, ``pages``)."""
        rows: list[dict[str, Any]] = []
        page = 1
        while True:
            doc = _json(
                await self.request("GET", "/v1/transactions", params={**params, "page": str(page)})
            )
            data = doc.get("data") if isinstance(doc, dict) else None
            if not isinstance(data, list):
                raise ResponseFormatError("GET /v1/transactions: no data array in the answer")
            rows.extend(r for r in data if isinstance(r, dict))
            if not data or page >= int(doc.get("pages") or 0):
                return rows
            page += 1

    async def _confirmed_edit(
        self, method: str, path: str, transaction_id: str, response: httpx.Response
    ) -> Transaction:
        """The edited (or assigned) transaction: in the answer, else read back by its id."""
        expect = {"id": transaction_id}
        status, replayed = response.status_code, _replayed(response)
        t = Transaction.from_answer(
            _answer(response), response.text, expect, status=status, replayed=replayed
        )
        if t is not None:
            return t
        back = await self.request("GET", f"/v1/transactions/{transaction_id}")
        t = Transaction.from_answer(
            _answer(back), back.text, expect, status=status, replayed=replayed
        )
        if t is None:
            raise WriteUnconfirmed(
                method,
                path,
                status,
                "accepted, but neither its answer nor GET /v1/transactions/{id} holds the "
                "transaction; resend it later under the same Idempotency-Key",
            )
        return replace(t, answer=response.text, found="read back (GET /v1/transactions/{id})")

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
        return sync_request(response)


def sync_request(response: httpx.Response) -> SyncRequest:
    """``POST /v1/sync``'s answer (not shown by the API document): any 2xx means the sync was
    asked for. The contract's ``{sync_id, status, providers}`` is read as such; any other shape
    (a wrapper, an ``id``, a bare 204) keeps what it says in ``raw`` and what it plainly names."""
    doc = _answer(response)
    try:
        return SyncRequest.parse(doc, response.text)
    except (KeyError, TypeError, AttributeError):
        pass
    inner = doc
    if isinstance(doc, dict) and len(doc) == 1 and isinstance(next(iter(doc.values())), dict):
        inner = next(iter(doc.values()))  # one wrapper
    found = inner if isinstance(inner, dict) else {}
    ident = found.get("sync_id") or found.get("id") or found.get("name") or ""
    providers = found.get("providers")
    return SyncRequest(
        sync_id=str(ident),
        status=str(found.get("status") or f"accepted ({response.status_code})"),
        providers=tuple(str(p) for p in providers) if isinstance(providers, list) else (),
        raw=response.text,
    )
