"""A local HTTP endpoint that keeps what Apprise's `json://` notifications post to it."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """A real HTTP server on loopback; `url` is the Apprise URL that reaches it."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.server.server_address[1]}/alerts"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, timeout: float) -> list[dict[str, Any]]:
        """The notifications received once there are `count` (or the timeout passed).

        Apprise posts before `notify` returns, and this server keeps a post before it answers:
        whatever a finished call sent is already in `received`. A test that expects nothing
        more reads `received`; waiting for one more alert would only wait out the timeout."""
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.2)
        return list(self.received)
