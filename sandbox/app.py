"""The sandbox's HTTP surface: a raw ASGI app serving /v1, /_sandbox and /openapi.json.

Raw ASGI with pre-serialised orjson rows, because a framework's generic encoder is about 30x
slower per page (see the sandbox issue); the routing table below is the whole router.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import parse_qsl

import orjson

from centsync.sandbox.errors import ApiError, invalid, not_found
from centsync.sandbox.ledger import EXPENSE, INCOME, TYPES, Tx, iso_ms
from centsync.sandbox.openapi import openapi_document
from centsync.sandbox.service import Faults, Key, Service, canonical
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
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

JSON = b"application/json"
_TX_PATH = re.compile(r"^/v1/transactions/([^/]+)$")
_TX_EXPENSE_PATH = re.compile(r"^/v1/transactions/([^/]+)/expense$")
_SB_TX_PATH = re.compile(r"^/_sandbox/transactions/([^/]+)$")
_SB_ACC_PATH = re.compile(r"^/_sandbox/accounts/([^/]+)$")
MAX_BODY = 1_000_000
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
LIST_FILTERS = ("type", "account_id", "category_id", "expense_goal_id", "search", "from", "to")


class Request:
    """What a handler needs of one request."""

    __slots__ = ("body", "headers", "key", "method", "path", "query", "raw_body", "service")

    def __init__(
        self,
        service: Service,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        headers: dict[str, str],
    ) -> None:
        self.service = service
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.key: Key | None = None
        self.raw_body = b""
        self.body: Any = None

    def q(self) -> dict[str, str]:
        return dict(self.query)

    def json(self) -> Any:
        ctype = self.headers.get("content-type", "")
        if ctype.split(";")[0].strip().lower() != "application/json":
            raise ApiError(
                415,
                "unsupported_media_type",
                "Send the body as JSON with `Content-Type: application/json`.",
            )
        try:
            return orjson.loads(self.raw_body or b"")
        except orjson.JSONDecodeError:
            raise invalid("The request body is not valid JSON.") from None


class Response:
    __slots__ = ("body", "headers", "status")

    def __init__(
        self, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers or []


def ok(obj: Any, status: int = 200) -> Response:
    return Response(status, orjson.dumps(obj))


Handler = Callable[[Request], Awaitable[Response]]


class SandboxApp:
    """ASGI application over one `Service`."""

    def __init__(self, service: Service) -> None:
        self.s = service
        self.lock = asyncio.Lock()
        self._openapi = orjson.dumps(openapi_document())
        self.v1: dict[str, dict[str, Handler]] = {
            "/v1/me": {"GET": self.me},
            "/v1/transactions": {"GET": self.list_transactions, "POST": self.create_transaction},
            "/v1/transactions/summary": {"GET": self.transactions_summary},
            "/v1/accounts": {"GET": self.list_accounts},
            "/v1/accounts/summary": {"GET": self.accounts_summary},
            "/v1/connections": {"GET": self.list_connections},
            "/v1/analytics/net-worth": {"GET": self.net_worth},
            "/v1/analytics/spending": {"GET": self.spending},
            "/v1/settings": {"GET": self.settings},
            "/v1/sync/status": {"GET": self.sync_status},
            "/v1/sync": {"POST": self.sync},
        }
        self.admin: dict[str, dict[str, Handler]] = {
            "/_sandbox/state": {"GET": self.sb_state},
            "/_sandbox/clock": {"GET": self.sb_clock},
            "/_sandbox/clock/advance": {"POST": self.sb_advance},
            "/_sandbox/settings": {"PUT": self.sb_settings},
            "/_sandbox/faults": {
                "GET": self.sb_faults_get,
                "PUT": self.sb_faults_put,
                "DELETE": self.sb_faults_delete,
            },
            "/_sandbox/transactions": {"POST": self.sb_tx_create},
            "/_sandbox/accounts": {"POST": self.sb_acc_create},
            "/_sandbox/keys": {"POST": self.sb_keys},
        }

    # ---- ASGI plumbing -------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        method: str = scope["method"]
        path: str = scope["path"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        req = Request(self.s, method, path, query, headers)
        rid = str(uuid.uuid4())
        extra: list[tuple[bytes, bytes]] = [(b"x-request-id", rid.encode())]
        drop = False
        try:
            if method in ("POST", "PUT", "PATCH", "DELETE"):
                req.raw_body = await _read_body(receive)
            if path.startswith("/v1/") or path == "/v1":
                resp, drop = await self._v1(req, extra)
            elif path.startswith("/_sandbox/"):
                resp = await self._admin(req)
            elif path == "/openapi.json" and method == "GET":
                resp = Response(200, self._openapi)
            else:
                raise not_found(f"No such path: {path}.")
        except ApiError as e:
            resp = Response(
                e.status,
                orjson.dumps(e.body()),
                [(k.lower().encode(), v.encode()) for k, v in e.headers.items()],
            )
        except ConnectionResetError:
            raise
        except Exception:
            log.exception("unexpected error on %s %s", method, path)
            err = ApiError(
                500,
                "internal_error",
                "Internal error; the request id identifies it in the sandbox log.",
            )
            resp = Response(500, orjson.dumps(err.body()))
        headers_out = [
            (b"content-type", JSON),
            (b"content-length", str(len(resp.body)).encode()),
            *extra,
            *resp.headers,
        ]
        await send({"type": "http.response.start", "status": resp.status, "headers": headers_out})
        if drop:
            # Start the answer, then break the connection: the client cannot know the outcome.
            await send(
                {
                    "type": "http.response.body",
                    "body": resp.body[: len(resp.body) // 2],
                    "more_body": True,
                }
            )
            raise ConnectionResetError("sandbox fault injection: connection dropped")
        await send({"type": "http.response.body", "body": resp.body})

    async def _v1(self, req: Request, extra: list[tuple[bytes, bytes]]) -> tuple[Response, bool]:
        s = self.s
        key = s.authenticate(req.headers.get("authorization"))
        req.key = key
        f = s.faults
        try:
            s.count_request(key)
            if f.latency_ms:
                await asyncio.sleep(f.latency_ms / 1000)
            handler = self._route(self.v1, req)
            needed = "data.read" if req.method == "GET" else "data.write"
            if needed not in key.scopes:
                raise ApiError(
                    403,
                    "insufficient_scope",
                    f"This key lacks the `{needed}` scope: {'this key is read-only; create a read and write key' if needed == 'data.write' else 'create a key with data.read'}.",
                )
            fail = bool(f.error_rate) and s.fault_rng.random() < f.error_rate
            # A write may fail after its work is done: the client cannot know the outcome.
            fail_after = fail and req.method != "GET" and s.fault_rng.random() < 0.5
            if fail and not fail_after:
                raise self._injected_error()
            resp = await handler(req)
            if fail_after:
                raise self._injected_error()
            drop = bool(f.drop_rate) and s.fault_rng.random() < f.drop_rate
            return resp, drop
        finally:
            if not f.omit_rate_limit_headers:
                ml, mr, hl, hr = s.remaining(key)
                extra.extend(
                    [
                        (b"x-ratelimit-limit-minute", str(ml).encode()),
                        (b"x-ratelimit-remaining-minute", str(mr).encode()),
                        (b"x-ratelimit-limit-hour", str(hl).encode()),
                        (b"x-ratelimit-remaining-hour", str(hr).encode()),
                    ]
                )

    def _injected_error(self) -> ApiError:
        status = self.s.fault_rng.choice(self.s.faults.error_statuses or [500])
        if status == 503:
            return ApiError(
                503,
                "service_unavailable",
                "Service unavailable (injected outage); retry later.",
                headers={"Retry-After": "1"},
            )
        return ApiError(status, "internal_error", "Internal error (injected fault).")

    def _route(self, table: dict[str, dict[str, Handler]], req: Request) -> Handler:
        methods = table.get(req.path)
        if methods is None:
            methods = self._dynamic(req)
        if methods is None:
            raise not_found(f"No such path: {req.path}.")
        handler = methods.get(req.method)
        if handler is None:
            raise ApiError(
                405,
                "method_not_allowed",
                f"{req.method} is not allowed on {req.path}; allowed: {', '.join(methods)}.",
                headers={"Allow": ", ".join(methods)},
            )
        return handler

    def _dynamic(self, req: Request) -> dict[str, Handler] | None:
        if req.path.startswith("/v1/"):
            if _TX_EXPENSE_PATH.match(req.path):
                return {"POST": self.assign_expense}
            if _TX_PATH.match(req.path):
                return {"GET": self.get_transaction, "PATCH": self.patch_transaction}
        else:
            if _SB_TX_PATH.match(req.path):
                return {"PATCH": self.sb_tx_patch, "DELETE": self.sb_tx_delete}
            if _SB_ACC_PATH.match(req.path):
                return {"PATCH": self.sb_acc_patch, "DELETE": self.sb_acc_delete}
        return None

    async def _admin(self, req: Request) -> Response:
        auth = req.headers.get("authorization", "")
        if not hmac.compare_digest(auth.encode(), f"Bearer {self.s.admin_token}".encode()):
            raise ApiError(
                401,
                "unauthenticated",
                "The control surface needs `Authorization: Bearer <admin_token>`.",
            )
        return await self._route(self.admin, req)(req)

    # ---- helpers -------------------------------------------------------------------------
    def _tx_or_404(self, raw_id: str) -> Tx:
        tx_id = uuid_value(raw_id, "id")
        t = self.s.transaction(tx_id)
        if t is None:
            raise not_found(f"No transaction {tx_id}.")
        return t

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
        except ApiError as e:
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
        return ok(
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
            rows = s.ledger.rows[min(end, start + off) : min(end, start + off + limit)]
        else:
            total = len(sel)
            rows = sel[off : off + limit]
        if s.faults.drop_extra_fields:
            items = b",".join(orjson.dumps(t.record(notes=False, extra=False)) for t in rows)
        else:
            items = b",".join([t.list_json() for t in rows])
        pages = math.ceil(total / limit)
        body = b'{"data":[%b],"total":%d,"page":%d,"pages":%d}' % (items, total, page, pages)
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
        return ok(self.s.summary(lo, hi, preds))

    async def get_transaction(self, req: Request) -> Response:
        m = _TX_PATH.match(req.path)
        assert m is not None
        return ok(self._tx_record(self._tx_or_404(m.group(1)), notes=True))

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
            return ok(self._tx_record(t, notes=True), 201)

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
            return ok(self._tx_record(t, notes=True))

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
            return ok(self._tx_record(t, notes=True))

        return await self._idempotent(req, work)

    async def list_accounts(self, req: Request) -> Response:
        extra = not self.s.faults.drop_extra_fields
        return ok([a.record(self.s.currency, extra) for a in self.s.visible_accounts()])

    async def accounts_summary(self, req: Request) -> Response:
        return ok(self.s.accounts_summary())

    async def list_connections(self, req: Request) -> Response:
        return ok({"data": self.s.connection_records()})

    async def net_worth(self, req: Request) -> Response:
        summ = self.s.accounts_summary()
        return ok(
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
        return ok(
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
        return ok(self.s.settings())

    async def sync_status(self, req: Request) -> Response:
        return ok({"data": self.s.sync_status_records()})

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
            return ok({"sync_id": self.s.new_id(), "status": "queued", "providers": done}, 202)

        return await self._idempotent(req, work)

    # ---- /_sandbox handlers --------------------------------------------------------------
    async def sb_state(self, req: Request) -> Response:
        return ok(self.s.dump())

    async def sb_clock(self, req: Request) -> Response:
        return ok({"now": iso_ms(self.s.now_ms), "timezone": self.s.timezone})

    async def sb_advance(self, req: Request) -> Response:
        body = object_body(req.json(), {"hours", "days", "minutes", "seconds"})
        ms = 0.0
        for name, unit in (
            ("days", 86_400_000),
            ("hours", 3_600_000),
            ("minutes", 60_000),
            ("seconds", 1000),
        ):
            v = body.get(name, 0)
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                raise invalid(f"`{name}` must be a non-negative number.", name, "invalid")
            ms += v * unit
        self.s.advance(int(ms))
        return ok({"now": iso_ms(self.s.now_ms)})

    async def sb_settings(self, req: Request) -> Response:
        body = object_body(req.json(), {"timezone"})
        if "timezone" in body:
            self.s.set_timezone(text_value(body["timezone"], "timezone", 1, 64))
        return ok(self.s.settings())

    async def sb_faults_get(self, req: Request) -> Response:
        return ok(self.s.faults.public())

    async def sb_faults_put(self, req: Request) -> Response:
        body = object_body(req.json(), set(self.s.faults.public()))
        f = self.s.faults
        for name, value in body.items():
            setattr(f, name, dict(value) if name == "drift" else value)
        return ok(f.public())

    async def sb_faults_delete(self, req: Request) -> Response:
        self.s.faults = Faults()
        return ok(self.s.faults.public())

    async def sb_keys(self, req: Request) -> Response:
        body = object_body(
            req.json(), {"scopes", "minute_limit", "hour_limit", "expires_in_days", "name"}
        )
        scopes = body.get("scopes", ["data.read", "data.write"])
        days = body.get("expires_in_days", 365)
        value = self.s.create_key(
            scopes,
            name=body.get("name", "key"),
            expires_ms=self.s.now_ms + int(days * 86_400_000),
            minute_limit=body.get("minute_limit"),
            hour_limit=body.get("hour_limit"),
        )
        return ok({"key": value, "id": self.s.keys[-1].id, "scopes": scopes}, 201)

    async def sb_tx_create(self, req: Request) -> Response:
        body = object_body(req.json(), CREATE_FIELDS | {"source", "occurred_at", "pending"})
        s = self.s
        account_id = uuid_value(body.get("account_id"), "account_id")
        if account_id not in s.accounts:
            raise invalid(f"No account {account_id}.", "account_id", "does not exist")
        amount = amount_value(body.get("amount"))
        instant = self._instant(body)
        if instant is None:
            raise invalid("Send `booked_at` or `occurred_at`.", "booked_at", "required")
        source = enum_value(body.get("source", "bank"), "source", ("bank", "manual"))
        t = s.add_transaction(
            account_id,
            text_value(body.get("concept"), "concept", 1, 200),
            amount,
            self._type_for(body.get("type"), amount),
            instant,
            self._category(body.get("category_id")),
            self._goal(body.get("expense_goal_id")),
            body.get("notes"),
            manual=source == "manual",
            pending_ms=s.now_ms + 3 * 86_400_000 if body.get("pending") else 0,
        )
        return ok(t.record(notes=True), 201)

    def _instant(self, body: dict[str, Any]) -> int | None:
        if "occurred_at" in body:
            try:
                dt = datetime.fromisoformat(str(body["occurred_at"]).replace("Z", "+00:00"))
            except ValueError:
                raise invalid(
                    "`occurred_at` must be an ISO 8601 instant.", "occurred_at", "invalid"
                ) from None
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=UTC)
            if not 1900 <= dt.year <= 2999:
                raise invalid(
                    "`occurred_at` must fall between the years 1900 and 2999.",
                    "occurred_at",
                    "out of range",
                )
            return int(dt.timestamp() * 1000)
        if "booked_at" in body:
            return self.s.noon_ms(date_value(body["booked_at"], "booked_at"))
        return None

    def _sb_tx(self, req: Request) -> Tx:
        m = _SB_TX_PATH.match(req.path)
        assert m is not None
        tx_id = uuid_value(m.group(1), "id")
        t = self.s.find_any_transaction(tx_id)
        if t is None:
            raise not_found(f"No transaction {tx_id}.")
        return t

    async def sb_tx_patch(self, req: Request) -> Response:
        t = self._sb_tx(req)
        body = object_body(req.json(), PATCH_FIELDS | {"occurred_at"})
        changes: dict[str, Any] = {}
        if "concept" in body:
            changes["concept"] = text_value(body["concept"], "concept", 1, 200)
        if "amount" in body:
            changes["amount"] = amount_value(body["amount"])
        if "type" in body:
            changes["type"] = enum_value(body["type"], "type", TYPES)
        if "category_id" in body:
            changes["category_id"] = self._category(body["category_id"])
        if "expense_goal_id" in body:
            changes["expense_goal_id"] = self._goal(body["expense_goal_id"])
        if "notes" in body:
            changes["notes"] = body["notes"]
        instant = self._instant(body)
        if instant is not None:
            changes["instant_ms"] = instant
        self.s.change_transaction(t, changes)
        return ok(t.record(notes=True))

    async def sb_tx_delete(self, req: Request) -> Response:
        self.s.delete_transaction(self._sb_tx(req))
        return ok({"deleted": True})

    async def sb_acc_create(self, req: Request) -> Response:
        from centsync.sandbox.household import Account

        body = object_body(
            req.json(), {"name", "type", "subtype", "balance", "hidden", "institution"}
        )
        acc = Account(
            self.s.new_id(),
            text_value(body.get("name"), "name", 1, 200),
            enum_value(
                body.get("type", "depository"),
                "type",
                ("depository", "credit", "investment", "loan", "unclassified"),
            ),
            body.get("subtype"),
            body.get("institution"),
            None,
            amount_value(body.get("balance", 0), "balance"),
        )
        acc.balance, acc.updated_ms = acc.opening, self.s.now_ms
        self.s.accounts[acc.id] = acc
        if body.get("hidden"):
            acc.hidden = True
            self.s.hidden_rows[acc.id] = []
        return ok(acc.record(self.s.currency), 201)

    def _sb_acc(self, req: Request) -> Any:
        m = _SB_ACC_PATH.match(req.path)
        assert m is not None
        acc = self.s.accounts.get(uuid_value(m.group(1), "id"))
        if acc is None:
            raise not_found("No such account.")
        return acc

    async def sb_acc_patch(self, req: Request) -> Response:
        acc = self._sb_acc(req)
        body = object_body(
            req.json(), {"name", "type", "subtype", "balance", "hidden", "institution"}
        )
        if "name" in body:
            acc.name = text_value(body["name"], "name", 1, 200)
        if "type" in body:
            acc.type = enum_value(
                body["type"], "type", ("depository", "credit", "investment", "loan", "unclassified")
            )
        if "subtype" in body:
            acc.subtype = body["subtype"]
        if "institution" in body:
            acc.institution = body["institution"]
        if "balance" in body:
            acc.balance = amount_value(body["balance"], "balance")
        if "hidden" in body:
            self.s.set_account_hidden(acc, bool(body["hidden"]))
        acc.updated_ms = self.s.now_ms
        return ok(acc.record(self.s.currency))

    async def sb_acc_delete(self, req: Request) -> Response:
        self.s.delete_account(self._sb_acc(req))
        return ok({"deleted": True})


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            break
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise invalid("The request body is too large (1 MB at most).")
        chunks.append(chunk)
        if not msg.get("more_body"):
            break
    return b"".join(chunks)
