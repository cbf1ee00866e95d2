"""Many owners behind one sandbox server: one household (`Sandbox`) per owner, routed by key.

Each owner is a whole emulated service of its own (its seed, keys, allowances, clock, faults);
the router only picks which one answers, by the bearer token: an API key on /v1, an owner's
admin token on /_sandbox. Keys created later through /_sandbox/keys are found on first use.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import orjson

from centsync.sandbox import Sandbox, SandboxConfig
from centsync.sandbox.errors import ServiceError
from centsync.sandbox.http import JSON, Receive, Scope, Send
from centsync.sandbox.openapi import openapi_document


def owner_name(index: int) -> str:
    """The name of the fleet's owner number `index` (0-based): owner-001, owner-002, ..."""
    return f"owner-{index + 1:03d}"


class Fleet:
    """N sandboxes, one per owner, and the ASGI app that routes each request to its owner's."""

    def __init__(self, sandboxes: dict[str, Sandbox]) -> None:
        self.owners = sandboxes
        self._by_token: dict[bytes, Sandbox] = {}
        self._openapi = orjson.dumps(openapi_document())
        self._index()

    @classmethod
    def build(cls, n: int, base: SandboxConfig, dialect: str = "contract") -> Fleet:
        """N owners, owner i seeded `base.seed + i` (so owner-001 is the one-owner sandbox),
        all answering in one dialect (`dialects.py`)."""
        from dataclasses import replace

        return cls(
            {
                owner_name(i): Sandbox(replace(base, seed=base.seed + i), dialect=dialect)
                for i in range(n)
            }
        )

    @property
    def app(self) -> Fleet:
        """The ASGI app (the fleet routes itself), as `Sandbox.app`."""
        return self

    @property
    def keys(self) -> dict[str, dict[str, str]]:
        """Each owner's keys and admin token, by owner name (the keys file's `owners`)."""
        return {name: sb.keys for name, sb in self.owners.items()}

    def seeds(self) -> dict[str, int]:
        """Each owner's seed, by owner name."""
        return {name: sb.config.seed for name, sb in self.owners.items()}

    def _index(self) -> None:
        # every key's digest (as the service stores it) and every admin token's, to its owner
        table: dict[bytes, Sandbox] = {}
        for sb in self.owners.values():
            for key in sb.service.keys:
                table[key.digest] = sb
            table[_digest(sb.service.admin_token)] = sb
        self._by_token = table

    def owner_of(self, authorization: str | None) -> Sandbox | None:
        """The sandbox a bearer token belongs to, or None (that sandbox then says why not)."""
        if not authorization or not authorization.startswith("Bearer "):
            return None
        digest = _digest(authorization[7:].strip())
        found = self._by_token.get(digest)
        if found is None:
            self._index()  # a key made since through /_sandbox/keys
            found = self._by_token.get(digest)
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await next(iter(self.owners.values())).app(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        auth = None
        for k, v in scope["headers"]:
            if k.lower() == b"authorization":
                auth = v.decode("latin-1")
        sb = self.owner_of(auth)
        if sb is not None:
            await sb.app(scope, receive, send)
            return
        if scope["path"] == "/openapi.json":
            await _answer(send, 200, self._openapi)
            return
        # in the owners' dialect (`dialects.py`): one for the whole fleet
        dialect = next(iter(self.owners.values())).app.dialect
        err = ServiceError(
            401,
            dialect.codes.get("unauthenticated", "unauthenticated"),
            "Unknown or revoked API key: send `Authorization: Bearer <API key>` with one of "
            "the keys in the sandbox's keys file.",
        )
        await _answer(send, 401, orjson.dumps(err.body()))


def _digest(value: str) -> bytes:
    # the same digest the service stores its keys under (`access._digest`)
    return hashlib.sha256(value.encode()).digest()


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", JSON), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def keys_document(fleet: Fleet, base_url: str) -> dict[str, object]:
    """The many-owner keys file: the base URL, and per owner its seed, keys and admin token."""
    seeds = fleet.seeds()
    return {
        "base_url": base_url,
        "owners": {name: {"seed": seeds[name], **keys} for name, keys in fleet.keys.items()},
    }


def owners_toml(names: Iterable[str], base_url: str, env_prefix: str = "CENTSYNC_KEY_") -> str:
    """An owners file (`CENTSYNC_OWNERS_FILE`) for the fleet: each owner's key from a variable."""
    lines = ["# centsync owners: written by `centsync sandbox serve --owners`", ""]
    for name in names:
        lines += [
            "[[owner]]",
            f'name = "{name}"',
            f'base_url = "{base_url}"',
            f'key_env = "{key_variable(name, env_prefix)}"',
            "",
        ]
    return "\n".join(lines)


def key_variable(name: str, prefix: str = "CENTSYNC_KEY_") -> str:
    """The environment variable an owner's key is read from: CENTSYNC_KEY_OWNER_001."""
    return prefix + "".join(c if c.isalnum() else "_" for c in name).upper()
