"""The async client: the endpoints' readers over the request core, the window reader and the writers."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import polars as pl

from centsync.transform.contract import KEY_WARNING

from ._frames import (
    ACCOUNT_WIRE,
    CONNECTION_WIRE,
    SYNC_STATUS_WIRE,
    cut_page,
    frame_from_chunks,
    frame_from_records,
)
from ._models import (
    AccountsSummary,
    Me,
    NetWorth,
    Settings,
    Spending,
    SurfaceUnavailable,
    Transaction,
    TransactionsSummary,
)
from ._reader import WindowReader
from ._transport import _date_param, _json
from ._writers import Writers

log = logging.getLogger("centsync.extract")

# How an answer the API document leaves "not shown" is read: (surface, body, group_by) -> the
# body in the contract's shape, or None when it cannot be read. Set by the pipelines from the
# learned contract (pipelines/contract_book.py); unset, the contract's own shape is assumed.
Reading = Callable[[str, Any, str | None], Any]


class AsyncApiClient(WindowReader, Writers):
    """Async client of the Personal Finance Data API v1 (one per key and event loop).

    ``transport`` (or a ready ``http_client``) lets the same code run over loopback HTTP,
    in-process over ``httpx.ASGITransport``, or against the real service.
    """

    reading: Reading | None = None

    # ------------------------------------------------------------------ readers
    async def body(
        self, path: str, params: Mapping[str, str | None] | None = None
    ) -> tuple[Any, str]:
        """Any GET answer as sent: its parsed JSON and its text (the learner's input)."""
        return await self._get_json(path, params)

    async def _read(
        self,
        surface: str,
        path: str,
        params: Mapping[str, str | None] | None = None,
        group_by: str | None = None,
    ) -> tuple[Any, str]:
        """A "not shown" answer in the contract's shape (through `reading`), and its text."""
        doc, raw = await self._get_json(path, params)
        if self.reading is None:
            return doc, raw
        got = self.reading(surface, doc, group_by)
        if got is None:
            raise SurfaceUnavailable(surface)
        return got, raw

    async def _fetch_me(self) -> tuple[Me, httpx.Headers]:
        response = await self.request("GET", "/v1/me", paced=False)
        me = self._me = Me.parse(_json(response), response.text)
        if me.key_expires_at is not None:
            left = me.key_expires_at - dt.datetime.now(dt.UTC)
            if left < KEY_WARNING:
                log.warning(
                    "the API key expires on %s (in %d days): create a new key before then",
                    me.key_expires_at.date().isoformat(),
                    max(0, left.days),
                )
        return me, response.headers

    async def me(self) -> Me:
        """``GET /v1/me``: identity, scopes, key expiry and the current allowance."""
        if self.pacer.enabled and not self.pacer.configured:
            await self._ensure_pacer()  # fetches /v1/me once to set the pace
            if self._me is not None:
                return self._me
        return (await self._fetch_me())[0]

    async def settings(self) -> Settings:
        """``GET /v1/settings``: timezone (decides each booked_at), currency, locale."""
        return Settings.parse(*await self._read("GET /v1/settings", "/v1/settings"))

    async def accounts(self, *, raw: bool = True) -> pl.DataFrame:
        """``GET /v1/accounts``: every visible account (the account schema)."""
        response = await self.request("GET", "/v1/accounts")
        return frame_from_chunks([cut_page(response.content)], ACCOUNT_WIRE, raw=raw)

    async def accounts_summary(self) -> AccountsSummary:
        """``GET /v1/accounts/summary``: assets, liabilities, net worth, per-type sums."""
        surface = "GET /v1/accounts/summary"
        return AccountsSummary.parse(*await self._read(surface, "/v1/accounts/summary"))

    async def connections(self, *, raw: bool = True) -> pl.DataFrame:
        """``GET /v1/connections``: bank connections (providers are read here, never assumed)."""
        return await self._records("GET /v1/connections", CONNECTION_WIRE, raw)

    async def sync_status(self, *, raw: bool = True) -> pl.DataFrame:
        """``GET /v1/sync/status``: last and next sync per connection."""
        return await self._records("GET /v1/sync/status", SYNC_STATUS_WIRE, raw)

    async def _records(self, surface: str, wire: dict[str, Any], raw: bool) -> pl.DataFrame:
        """A small "not shown" list answer: its records (found by `reading`) as a frame."""
        if self.reading is None:
            response = await self.request("GET", surface.split(" ", 1)[1])
            return frame_from_chunks([cut_page(response.content)], wire, raw=raw)
        doc, _ = await self._read(surface, surface.split(" ", 1)[1])
        records = [r for r in doc.get("data") or [] if isinstance(r, dict)]
        return frame_from_records(records, wire, raw=raw)

    async def net_worth(self) -> NetWorth:
        """``GET /v1/analytics/net-worth``."""
        surface = "GET /v1/analytics/net-worth"
        return NetWorth.parse(*await self._read(surface, "/v1/analytics/net-worth"))

    async def spending(
        self,
        from_: dt.date | str | None = None,
        to: dt.date | str | None = None,
        *,
        group_by: str = "category",
    ) -> Spending:
        """``GET /v1/analytics/spending`` grouped by ``category``, ``merchant`` or ``month``."""
        params = {"from": _date_param(from_), "to": _date_param(to), "group_by": group_by}
        path = "/v1/analytics/spending"
        return Spending.parse(*await self._read(f"GET {path}", path, params, group_by))

    async def transactions_summary(
        self,
        from_: dt.date | str | None = None,
        to: dt.date | str | None = None,
        **filters: str,
    ) -> TransactionsSummary:
        """``GET /v1/transactions/summary``: count and per-type sums for the list's filters."""
        params = self._list_params(from_, to, filters)
        params.pop("sort", None)
        path = "/v1/transactions/summary"
        return TransactionsSummary.parse(*await self._read(f"GET {path}", path, params))

    async def transaction(self, transaction_id: str) -> Transaction:
        """``GET /v1/transactions/{id}`` (includes ``notes``)."""
        doc, raw = await self._get_json(f"/v1/transactions/{transaction_id}")
        return Transaction.parse(doc, raw)
