"""The async client: the endpoints' readers over the request core, the window reader and the writers."""

from __future__ import annotations

import datetime as dt
import logging

import httpx
import polars as pl

from centsync.transform.contract import KEY_WARNING

from ._frames import (
    ACCOUNT_WIRE,
    CONNECTION_WIRE,
    SYNC_STATUS_WIRE,
    cut_page,
    frame_from_chunks,
)
from ._models import (
    AccountsSummary,
    Me,
    NetWorth,
    Settings,
    Spending,
    Transaction,
    TransactionsSummary,
)
from ._reader import WindowReader
from ._transport import _date_param, _json
from ._writers import Writers

log = logging.getLogger("centsync.extract")


class AsyncApiClient(WindowReader, Writers):
    """Async client of the Personal Finance Data API v1 (one per key and event loop).

    ``transport`` (or a ready ``http_client``) lets the same code run over loopback HTTP,
    in-process over ``httpx.ASGITransport``, or against the real service.
    """

    # ------------------------------------------------------------------ readers

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
        return Settings.parse(*await self._get_json("/v1/settings"))

    async def accounts(self, *, raw: bool = True) -> pl.DataFrame:
        """``GET /v1/accounts``: every visible account (the account schema)."""
        response = await self.request("GET", "/v1/accounts")
        return frame_from_chunks([cut_page(response.content)], ACCOUNT_WIRE, raw=raw)

    async def accounts_summary(self) -> AccountsSummary:
        """``GET /v1/accounts/summary``: assets, liabilities, net worth, per-type sums."""
        return AccountsSummary.parse(*await self._get_json("/v1/accounts/summary"))

    async def connections(self, *, raw: bool = True) -> pl.DataFrame:
        """``GET /v1/connections``: bank connections (providers are read here, never assumed)."""
        response = await self.request("GET", "/v1/connections")
        return frame_from_chunks([cut_page(response.content)], CONNECTION_WIRE, raw=raw)

    async def sync_status(self, *, raw: bool = True) -> pl.DataFrame:
        """``GET /v1/sync/status``: last and next sync per connection."""
        response = await self.request("GET", "/v1/sync/status")
        return frame_from_chunks([cut_page(response.content)], SYNC_STATUS_WIRE, raw=raw)

    async def net_worth(self) -> NetWorth:
        """``GET /v1/analytics/net-worth``."""
        return NetWorth.parse(*await self._get_json("/v1/analytics/net-worth"))

    async def spending(
        self,
        from_: dt.date | str | None = None,
        to: dt.date | str | None = None,
        *,
        group_by: str = "category",
    ) -> Spending:
        """``GET /v1/analytics/spending`` grouped by ``category``, ``merchant`` or ``month``."""
        params = {"from": _date_param(from_), "to": _date_param(to), "group_by": group_by}
        return Spending.parse(*await self._get_json("/v1/analytics/spending", params))

    async def transactions_summary(
        self,
        from_: dt.date | str | None = None,
        to: dt.date | str | None = None,
        **filters: str,
    ) -> TransactionsSummary:
        """``GET /v1/transactions/summary``: count and per-type sums for the list's filters."""
        params = self._list_params(from_, to, filters)
        params.pop("sort", None)
        return TransactionsSummary.parse(*await self._get_json("/v1/transactions/summary", params))

    async def transaction(self, transaction_id: str) -> Transaction:
        """``GET /v1/transactions/{id}`` (includes ``notes``)."""
        doc, raw = await self._get_json(f"/v1/transactions/{transaction_id}")
        return Transaction.parse(doc, raw)
