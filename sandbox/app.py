"""The sandbox's HTTP surface: a raw ASGI app serving /v1, /_sandbox and /openapi.json.

Raw ASGI with pre-serialised orjson rows, because a framework's generic encoder is about 30x
slower per page (see the sandbox issue); the routing tables below are the whole router. The
handlers live in `routes_v1.py` and `routes_admin.py`, the request and response in `http.py`.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import uuid
from urllib.parse import parse_qsl

import orjson

from centsync.sandbox.dialects import dialect as dialect_named
from centsync.sandbox.errors import ServiceError, not_found
from centsync.sandbox.http import (
    JSON,
    Handler,
    Receive,
    Request,
    Response,
    Scope,
    Send,
    _read_body,
    http_date,
)
from centsync.sandbox.openapi import openapi_document
from centsync.sandbox.routes_admin import _SB_ACC_PATH, _SB_TX_PATH, AdminRoutes
from centsync.sandbox.routes_v1 import _TX_EXPENSE_PATH, _TX_PATH, V1Routes
from centsync.sandbox.service import Service

log = logging.getLogger("centsync.sandbox")


class SandboxApp(V1Routes, AdminRoutes):
    """ASGI application over one `Service`, speaking one dialect (`dialects.py`) on /v1."""

    def __init__(self, service: Service, dialect: str = "contract") -> None:
        self.s = service
        self.dialect = dialect_named(dialect)
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
        except ServiceError as e:
            resp = Response(
                e.status,
                orjson.dumps(e.body()),
                [(k.lower().encode(), v.encode()) for k, v in e.headers.items()],
            )
        except ConnectionResetError:
            raise
        except Exception:
            log.exception("unexpected error on %s %s", method, path)
            err = ServiceError(
                500,
                "internal_error",
                "Internal error; the request id identifies it in the sandbox log.",
            )
            resp = Response(500, orjson.dumps(err.body()))
        if path.startswith("/v1/") and not self.dialect.is_contract:
            resp, extra = self.dialect.respond(req, resp, extra)
        headers_out = [
            (b"content-type", JSON),
            (b"content-length", str(len(resp.body)).encode()),
            (b"date", http_date(self.s.now_ms)),
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
                raise ServiceError(
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
            if f.latency_after_ms and req.method != "GET":
                await asyncio.sleep(f.latency_after_ms / 1000)
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

    def _injected_error(self) -> ServiceError:
        status = self.s.fault_rng.choice(self.s.faults.error_statuses or [500])
        if status == 503:
            return ServiceError(
                503,
                "service_unavailable",
                "Service unavailable (injected outage); retry later.",
                headers={"Retry-After": "1"},
            )
        return ServiceError(status, "internal_error", "Internal error (injected fault).")

    def _route(self, table: dict[str, dict[str, Handler]], req: Request) -> Handler:
        methods = table.get(req.path)
        if methods is None:
            methods = self._dynamic(req)
        if methods is None:
            raise not_found(f"No such path: {req.path}.")
        handler = methods.get(req.method)
        if handler is None:
            raise ServiceError(
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
            raise ServiceError(
                401,
                "unauthenticated",
                "The control surface needs `Authorization: Bearer <admin_token>`.",
            )
        return await self._route(self.admin, req)(req)
