"""The raw ASGI pieces the sandbox's handlers speak: a parsed request, a response, the body reader."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from email.utils import formatdate
from typing import Any

import orjson

from centsync.sandbox.errors import ServiceError, invalid
from centsync.sandbox.service import Key, Service

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

JSON = b"application/json"
MAX_BODY = 1_000_000


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
            raise ServiceError(
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


def http_date(ms: int) -> bytes:
    """The `Date` header's value (RFC 9110's IMF-fixdate) for the service's clock, in ms.

    Every answer carries the sandbox's own time, so a client can judge what expires on the
    service's clock (idempotency keys: 24 hours) even when the sandbox's clock was moved.
    """
    return formatdate(ms / 1000, usegmt=True).encode()


Handler = Callable[[Request], Awaitable[Response]]


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
