"""The /_sandbox control surface: clock, settings, faults, keys, and edits as the bank would make them."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from centsync.sandbox.errors import invalid, not_found
from centsync.sandbox.http import Request, Response, ok
from centsync.sandbox.ledger import TYPES, Tx, iso_ms
from centsync.sandbox.routes_v1 import CORRUPTIONS, CREATE_FIELDS, PATCH_FIELDS
from centsync.sandbox.service import Faults, Service
from centsync.sandbox.validate import (
    amount_value,
    date_value,
    enum_value,
    object_body,
    text_value,
    uuid_value,
)

_SB_TX_PATH = re.compile(r"^/_sandbox/transactions/([^/]+)$")
_SB_ACC_PATH = re.compile(r"^/_sandbox/accounts/([^/]+)$")


class AdminRoutes:
    """Handlers of /_sandbox (admin token only): for tests, demos and benchmarks."""

    s: Service

    if TYPE_CHECKING:  # body validators shared with the /v1 handlers (V1Routes)

        def _type_for(self, raw: object, amount: int) -> str: ...
        def _category(self, raw: object) -> str | None: ...
        def _goal(self, raw: object) -> str | None: ...

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
            if name == "corrupt":
                bad = {k: v for k, v in dict(value).items() if v not in CORRUPTIONS}
                if bad:
                    raise invalid(
                        f"unknown corruption kinds {sorted(set(bad.values()))}: use {sorted(CORRUPTIONS)}"
                    )
            setattr(f, name, dict(value) if name in ("drift", "corrupt") else value)
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
