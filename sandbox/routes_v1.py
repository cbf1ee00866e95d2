"""The /v1 handlers: the Personal Finance Data API as the contract describes it (docs/api-contract.md)."""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Awaitable, Callable
from datetime import date
from typing import Any

import orjson

from centsync.sandbox.dialect import Dialect
from centsync.sandbox.errors import ServiceError, invalid, not_found
from centsync.sandbox.http import Request, Response, ok
from centsync.sandbox.ledger import EXPENSE, INCOME, TYPES, Tx, iso_ms
from centsync.sandbox.service import Service, canonical
from centsync.sandbox.validate import (
    amount_value,
    date_value,
    enum_value,
    int_param,
    object_body,
    text_value,
    uuid_value,
)

log = logging.getLogger("centsync.sandbox")

_TX_PATH = re.compile(r"^/v1/transactions/([^/]+)$")
_TX_EXPENSE_PATH = re.compile(r"^/v1/transactions/([^/]+)/expense$")
CREATE_FIELDS = {
    "account_id",
    "amount",
    "concept",
    "booked_at",
    "type",
    "category_id",
    "expense_goal_id",
    "notes",
}
PATCH_FIELDS = {"concept", "category_id", "notes", "amount", "booked_at", "type", "expense_goal_id"}
LIST_FILTER_PARAMS = (
    "type",
    "account_id",
    "category_id",
    "expense_goal_id",
    "search",
    "from",
    "to",
)


class V1Routes:
    """Handlers of /v1: each reads its request, asks the service, answers JSON."""

    s: Service
    dialect: Dialect  # how the app answers (`dialects.py`); the list reads its sort direction

    # ---- helpers -------------------------------------------------------------------------
    def _tx_or_404(self, raw_id: str) -> Tx:
        tx_id = uuid_value(raw_id, "id")
        t = self.s.transaction(tx_id)
        if t is None:
            raise not_found(f"No transaction {tx_id}.")
        return t

    def _ok(self, obj: Any, status: int = 200) -> Response:
        """A JSON answer; with the `unknown_fields` fault, one carrying fields no client knows."""
        return ok(with_unknown_fields(obj) if self.s.faults.unknown_fields else obj, status)

    def _tx_record(self, t: Tx, notes: bool) -> dict[str, Any]:
        return t.record(notes=notes, extra=not self.s.faults.drop_extra_fields)

    def _filters(
        self, q: dict[str, str]
    ) -> tuple[int | None, int | None, tuple[tuple[str, object], ...]]:
        s = self.s
        preds: list[tuple[str, object]] = []
        if "type" in q:
            preds.append(("type", enum_value(q["type"], "type", TYPES)))
        if "account_id" in q:
            aid = uuid_value(q["account_id"], "account_id")
            if s.visible_account(aid) is None:
                raise invalid(f"No account {aid}.", "account_id", "does not exist")
            preds.append(("account_id", aid))
        if "category_id" in q:
            cid = uuid_value(q["category_id"], "category_id")
            if cid not in s.categories:
                raise invalid(f"No category {cid}.", "category_id", "does not exist")
            preds.append(("category_id", cid))
        if "expense_goal_id" in q:
            gid = uuid_value(q["expense_goal_id"], "expense_goal_id")
            if gid not in s.expenses:
                raise invalid(f"No Expense {gid}.", "expense_goal_id", "does not exist")
            preds.append(("expense_goal_id", gid))
        if "search" in q:
            term = text_value(q["search"], "search", 0, 200)
            if term:
                preds.append(("search", term.lower()))
        lo = date_value(q["from"], "from").toordinal() if "from" in q else None
        hi = date_value(q["to"], "to").toordinal() if "to" in q else None
        if lo is not None and hi is not None and lo > hi:
            raise invalid("`from` must not be after `to`.", "from", "after to")
        return lo, hi, tuple(preds)

    async def _idempotent(self, req: Request, work: Callable[[], Awaitable[Response]]) -> Response:
        """Run a write under the request's Idempotency-Key, if it carries one."""
        idem = req.headers.get("idempotency-key")
        if idem is None:
            return await work()
        if not 1 <= len(idem) <= 255 or not all(32 <= ord(c) < 127 for c in idem):
            raise invalid(
                "`Idempotency-Key` must be 1 to 255 printable ASCII characters.",
                "Idempotency-Key",
                "invalid",
            )
        assert req.key is not None
        try:
            parsed = orjson.loads(req.raw_body) if req.raw_body else None
        except orjson.JSONDecodeError:
            parsed = req.raw_body.decode("latin-1")
        fp = canonical([req.method, req.path, parsed])
        prior = self.s.idem_begin(req.key, idem, fp)
        if prior is not None:
            return Response(prior.status, prior.body, [(b"idempotent-replayed", b"true")])
        resp: Response | None = None
        try:
            resp = await work()
            return resp
        except ServiceError as e:
            resp = Response(e.status, b"")
            raise
        finally:
            status = resp.status if resp is not None else 500
            self.s.idem_end(req.key, idem, status, resp.body if resp is not None else b"")

    # ---- /v1 handlers --------------------------------------------------------------------
    async def me(self, req: Request) -> Response:
        key = req.key
        assert key is not None
        ml, mr, hl, hr = self.s.remaining(key)
        return self._ok(
            {
                "account_id": key.owner,
                "scopes": key.scopes,
                "key": {"id": key.id, "expires_at": iso_ms(key.expires_ms)},
                "rate_limit": {
                    "minute_limit": ml,
                    "minute_remaining": mr,
                    "hour_limit": hl,
                    "hour_remaining": hr,
                },
            }
        )

    async def list_transactions(self, req: Request) -> Response:
        q = req.q()
        page = int_param(q["page"], "page", 1) if "page" in q else 1
        limit = int_param(q["limit"], "limit", 1, 200) if "limit" in q else 50
        sort = (
            enum_value(q["sort"], "sort", ("booked_at", "created_at"))
            if "sort" in q
            else "booked_at"
        )
        lo, hi, preds = self._filters(q)
        s = self.s
        if s.faults.drift.get("pages", 0) > 0:
            s.apply_drift(lo, hi)
        sel = s.ledger.select(lo, hi, preds, sort)
        off = (page - 1) * limit
        if isinstance(sel, tuple):
            start, end = sel
            total = end - start
        else:
            start, end, total = 0, len(sel), len(sel)
        source = s.ledger.rows if isinstance(sel, tuple) else sel
        if self.dialect.ascending:  # the dialect's list is oldest first: the order reversed
            rows = source[max(start, end - off - limit) : max(start, end - off)][::-1]
        else:
            rows = source[min(end, start + off) : min(end, start + off + limit)]
        if s.faults.corrupt:
            # a row sent under its neighbour's id needs a neighbour on the page (a one-row
            # page, `limit=1`, has none: the row goes as it is)
            items = b",".join(
                _corrupted(t, s.faults.corrupt.get(t.id), _neighbour(rows, i))
                for i, t in enumerate(rows)
            )
        elif s.faults.drop_extra_fields:
            items = b",".join(orjson.dumps(t.record(notes=False, extra=False)) for t in rows)
        elif s.faults.unknown_fields:
            items = b",".join(
                orjson.dumps(with_unknown_fields(t.record(notes=False))) for t in rows
            )
        else:
            items = b",".join([t.list_json() for t in rows])
        pages = math.ceil(total / limit)
        body = b'{"data":[%b],"total":%d,"page":%d,"pages":%d%b}' % (
            items,
            total,
            page,
            pages,
            b"," + orjson.dumps(UNKNOWN_FIELDS)[1:-1] if s.faults.unknown_fields else b"",
        )
        return Response(200, body)

    async def transactions_summary(self, req: Request) -> Response:
        q = req.q()
        # The list's paging parameters are accepted and ignored, but must still be valid.
        if "page" in q:
            int_param(q["page"], "page", 1)
        if "limit" in q:
            int_param(q["limit"], "limit", 1, 200)
        if "sort" in q:
            enum_value(q["sort"], "sort", ("booked_at", "created_at"))
        lo, hi, preds = self._filters(q)
        return self._ok(self.s.summary(lo, hi, preds))

    async def get_transaction(self, req: Request) -> Response:
        m = _TX_PATH.match(req.path)
        assert m is not None
        return self._ok(self._tx_record(self._tx_or_404(m.group(1)), notes=True))

    async def create_transaction(self, req: Request) -> Response:
        body = object_body(req.json(), CREATE_FIELDS)

        async def work() -> Response:
            s = self.s
            missing = [f for f in ("account_id", "amount", "concept", "booked_at") if f not in body]
            if missing:
                raise invalid(
                    f"Missing required field(s): {', '.join(missing)}.", missing[0], "required"
                )
            account_id = uuid_value(body["account_id"], "account_id")
            if s.visible_account(account_id) is None:
                raise invalid(f"No account {account_id}.", "account_id", "does not exist")
            amount = amount_value(body["amount"])
            concept = text_value(body["concept"], "concept", 1, 200)
            booked = date_value(body["booked_at"], "booked_at")
            typ = self._type_for(body.get("type"), amount)
            category_id = self._category(body.get("category_id"))
            goal = self._goal(body.get("expense_goal_id"))
            if goal is not None and typ != EXPENSE:
                raise invalid(
                    "Only an expense can be assigned to an Expense.",
                    "expense_goal_id",
                    "not an expense",
                )
            notes = body.get("notes")
            if notes is not None:
                notes = text_value(notes, "notes", 0, 2000)
            if s.faults.latency_ms:
                await asyncio.sleep(0)  # let a concurrent twin reach the idempotency check
            t = s.add_transaction(
                account_id,
                concept,
                amount,
                typ,
                s.noon_ms(booked),
                category_id,
                goal,
                notes,
                manual=True,
            )
            return self._ok(self._tx_record(t, notes=True), 201)

        return await self._idempotent(req, work)

    def _type_for(self, raw: object, amount: int) -> str:
        if raw is not None:
            return enum_value(raw, "type", TYPES)
        if amount == 0:
            raise invalid(
                "`amount` 0 needs an explicit `type`.", "type", "required when amount is 0"
            )
        return EXPENSE if amount < 0 else INCOME

    def _category(self, raw: object) -> str | None:
        if raw is None:
            return None
        cid = uuid_value(raw, "category_id")
        if cid not in self.s.categories:
            raise invalid(f"No category {cid}.", "category_id", "does not exist")
        return cid

    def _goal(self, raw: object) -> str | None:
        if raw is None:
            return None
        gid = uuid_value(raw, "expense_goal_id")
        if gid not in self.s.expenses:
            raise invalid(f"No Expense {gid}.", "expense_goal_id", "does not exist")
        return gid

    async def patch_transaction(self, req: Request) -> Response:
        m = _TX_PATH.match(req.path)
        assert m is not None
        t = self._tx_or_404(m.group(1))
        body = object_body(req.json(), PATCH_FIELDS)

        async def work() -> Response:
            if not body:
                raise invalid("An empty PATCH changes nothing: send at least one field.")
            if "expense_goal_id" in body:
                raise invalid(
                    "Assign or clear an Expense with POST /v1/transactions/{id}/expense.",
                    "expense_goal_id",
                    "use the assign endpoint",
                )
            bank_only = [f for f in ("amount", "booked_at", "type") if f in body]
            if bank_only and not t.manual:
                raise invalid(
                    f"{', '.join(bank_only)} of a bank-feed transaction cannot be changed; only manual ones.",
                    bank_only[0],
                    "bank-feed transaction",
                )
            changes: dict[str, Any] = {}
            if "concept" in body:
                changes["concept"] = text_value(body["concept"], "concept", 1, 200)
            if "category_id" in body:
                changes["category_id"] = self._category(body["category_id"])
            if "notes" in body:
                changes["notes"] = (
                    None if body["notes"] is None else text_value(body["notes"], "notes", 0, 2000)
                )
            if "amount" in body:
                changes["amount"] = amount_value(body["amount"])
            if "booked_at" in body:
                changes["instant_ms"] = self.s.noon_ms(date_value(body["booked_at"], "booked_at"))
            if "type" in body:
                changes["type"] = enum_value(body["type"], "type", TYPES)
            if changes.get("type", t.type) != EXPENSE and t.expense_goal_id is not None:
                raise invalid(
                    "This transaction is assigned to an Expense; clear the assignment before changing its type.",
                    "type",
                    "assigned to an Expense",
                )
            self.s.change_transaction(t, changes)
            return self._ok(self._tx_record(t, notes=True))

        return await self._idempotent(req, work)

    async def assign_expense(self, req: Request) -> Response:
        m = _TX_EXPENSE_PATH.match(req.path)
        assert m is not None
        t = self._tx_or_404(m.group(1))
        body = object_body(req.json(), {"expense_goal_id"})

        async def work() -> Response:
            if "expense_goal_id" not in body:
                raise invalid(
                    "Send `expense_goal_id` (a uuid, or null to clear).",
                    "expense_goal_id",
                    "required",
                )
            goal = self._goal(body["expense_goal_id"])
            if t.type != EXPENSE:
                raise invalid(
                    f"Only an expense can be assigned to an Expense; this transaction is {t.type}.",
                    "expense_goal_id",
                    "not an expense",
                )
            self.s.change_transaction(t, {"expense_goal_id": goal})
            return self._ok(self._tx_record(t, notes=True))

        return await self._idempotent(req, work)

    async def list_accounts(self, req: Request) -> Response:
        extra = not self.s.faults.drop_extra_fields
        return self._ok([a.record(self.s.currency, extra) for a in self.s.visible_accounts()])

    async def accounts_summary(self, req: Request) -> Response:
        return self._ok(self.s.accounts_summary())

    async def list_connections(self, req: Request) -> Response:
        return self._ok({"data": self.s.connection_records()})

    async def net_worth(self, req: Request) -> Response:
        summ = self.s.accounts_summary()
        return self._ok(
            {
                "currency": summ["currency"],
                "assets": summ["assets"],
                "liabilities": summ["liabilities"],
                "total": summ["net_worth"],
                "as_of": iso_ms(self.s.now_ms),
            }
        )

    async def spending(self, req: Request) -> Response:
        q = req.q()
        group_by = (
            enum_value(q["group_by"], "group_by", ("category", "merchant", "month"))
            if "group_by" in q
            else "category"
        )
        today = self.s.local_date()
        lo = date_value(q["from"], "from") if "from" in q else today.replace(day=1)
        if "to" in q:
            hi = date_value(q["to"], "to")
        else:
            nxt = date(today.year + (today.month == 12), today.month % 12 + 1, 1)
            hi = date.fromordinal(nxt.toordinal() - 1)
        if lo > hi:
            raise invalid("`from` must not be after `to`.", "from", "after to")
        total, rows = self.s.spending(lo.toordinal(), hi.toordinal(), group_by)
        return self._ok(
            {
                "from": lo.isoformat(),
                "to": hi.isoformat(),
                "group_by": group_by,
                "currency": self.s.currency,
                "total": total,
                "data": rows,
            }
        )

    async def settings(self, req: Request) -> Response:
        return self._ok(self.s.settings())

    async def sync_status(self, req: Request) -> Response:
        return self._ok({"data": self.s.sync_status_records()})

    async def sync(self, req: Request) -> Response:
        body = object_body(req.json(), {"provider"})

        async def work() -> Response:
            known = list(self.s.config.providers)
            if "provider" in body:
                p = body["provider"]
                if p not in known:
                    raise invalid(
                        f"Unknown provider {p!r}; known: {', '.join(known)}.",
                        "provider",
                        "unknown provider",
                    )
                providers = [p]
            else:
                providers = [p for p in known if any(c.provider == p for c in self.s.connections)]
            done = self.s.manual_sync(providers)
            return self._ok(
                {"sync_id": self.s.new_id(), "status": "queued", "providers": done}, 202
            )

        return await self._idempotent(req, work)


# What the `unknown_fields` fault adds to each object the service sends: a value, and an object
# (a client must ignore both, contract section 9)
UNKNOWN_FIELDS: dict[str, Any] = {
    "x_added_later": "a field this version of the client does not know",
    "x_added_object": {"kind": "new", "count": 1, "amount": 999},
}


def with_unknown_fields(obj: Any) -> Any:
    """The answer with `UNKNOWN_FIELDS` on its top object and on each object of its lists."""
    if isinstance(obj, list):
        return [with_unknown_fields(item) for item in obj]
    if not isinstance(obj, dict):
        return obj
    out = {
        k: [with_unknown_fields(i) for i in v] if isinstance(v, list) else v for k, v in obj.items()
    }
    return {**out, **UNKNOWN_FIELDS}


CORRUPTIONS = (
    "amount_string",
    "non_integer_amount",
    "unknown_type",
    "missing_field",
    "bad_date",
    "duplicate_id",  # the row is sent under the id of its neighbour on the page
)


def _neighbour(rows: list[Tx], i: int) -> str:
    """The id of the row next to the i-th on its page (its own on a one-row page)."""
    if len(rows) == 1:
        return rows[0].id
    return rows[i - 1].id if i else rows[1].id


def _corrupted(t: Tx, kind: str | None, neighbour: str) -> bytes:
    """A list row as sent, damaged the way the `corrupt` fault says (for clients' validation)."""
    if kind is None:
        return t.list_json()
    record = t.record(notes=False)
    if kind == "amount_string":
        record["amount"] = f"{t.amount / 100:.2f}"
    elif kind == "non_integer_amount":
        record["amount"] = t.amount + 0.5
    elif kind == "unknown_type":
        record["type"] = "gift"
    elif kind == "missing_field":
        del record["booked_at"]
    elif kind == "bad_date":
        record["booked_at"] = "2024-02-30"
    elif kind == "duplicate_id":
        record["id"] = neighbour
    return orjson.dumps(record)
