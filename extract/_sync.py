"""A blocking facade over ``AsyncApiClient`` for callers without an event loop.

The async client lives on a private event loop in a daemon thread, so the facade also works
where a loop is already running (a notebook, a Dagster op inside an async context).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
)
from concurrent.futures import Future
from contextlib import suppress
from typing import Any, TypeVar

import polars as pl

from ._client import AsyncApiClient
from ._models import (
    AccountsSummary,
    Me,
    NetWorth,
    Settings,
    Spending,
    SyncRequest,
    Transaction,
    TransactionsSummary,
)
from ._paging import TransactionBatch, Window, WindowEvent, WindowReport
from ._requests import ClientSettings, settings_options
from ._runtime import new_event_loop
from ._stats import RequestStats

T = TypeVar("T")


class ApiClient:
    """Blocking client; same constructor arguments and methods as ``AsyncApiClient``.

    ``transport`` may be an ``httpx.ASGITransport`` or any async transport: it is used from the
    client's own loop thread.
    """

    def __init__(self, base_url: str, api_key: str, **options: Any) -> None:
        self._loop = new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="centsync-extract", daemon=True
        )
        self._thread.start()
        self._closed = False

        async def build() -> AsyncApiClient:
            return AsyncApiClient(base_url, api_key, **options)

        try:
            self._client = self._run(build())
        except BaseException:
            self._stop_loop()
            raise

    @classmethod
    def from_settings(cls, settings: ClientSettings, **options: Any) -> ApiClient:
        """A client for the settings' base URL and key, wait budget and transport."""
        return cls(
            settings.api_base_url,
            settings.api_key,
            **{**settings_options(settings), **options},
        )

    def __repr__(self) -> str:
        return f"ApiClient(base_url={str(self._client.base_url)!r}, key=<hidden>)"

    def _run(self, coro: Awaitable[T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]
        return future.result()

    def _stop_loop(self) -> None:
        """Stop the loop as `asyncio.run` ends one: what is still pending (a reader stopped by
        an interrupt, its queue's waiters) is cancelled and its async generators closed while
        the loop can still run their cleanup, then the loop stops."""

        async def finish_pending() -> None:
            current = asyncio.current_task()
            pending = [t for t in asyncio.all_tasks() if t is not current]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            await self._loop.shutdown_asyncgens()

        if self._thread.is_alive():
            with suppress(Exception):
                asyncio.run_coroutine_threadsafe(finish_pending(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._run(self._client.aclose())
        self._stop_loop()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stats(self) -> RequestStats:
        return self._client.stats

    @property
    def async_client(self) -> AsyncApiClient:
        return self._client

    def _call(self, method: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        return self._run(method(*args, **kwargs))

    def gather(self, *calls: Callable[[AsyncApiClient], Coroutine[Any, Any, Any]]) -> list[Any]:
        """Make several independent requests at once: each call is given the async client
        (``lambda c: c.spending(lo, hi)``); the results come back in the calls' order.

        They share the client's pacing, retries and connections, so they spend exactly the
        requests they would one by one, in one round trip's time instead of one each. The first
        failure cancels the rest and is raised as itself.
        """

        async def run() -> list[Any]:
            try:
                async with asyncio.TaskGroup() as group:
                    tasks: list[asyncio.Task[Any]] = [
                        group.create_task(call(self._client)) for call in calls
                    ]
            except BaseExceptionGroup as failed:
                raise failed.exceptions[0] from None
            return [task.result() for task in tasks]

        return self._run(run())

    def me(self) -> Me:
        return self._call(self._client.me)

    def settings(self) -> Settings:
        return self._call(self._client.settings)

    def body(self, path: str, params: Mapping[str, str | None] | None = None) -> tuple[Any, str]:
        """Any GET answer as sent: its parsed JSON and its text."""
        return self._call(self._client.body, path, params)

    def accounts(self, *, raw: bool = True) -> pl.DataFrame:
        return self._call(self._client.accounts, raw=raw)

    def accounts_summary(self) -> AccountsSummary:
        return self._call(self._client.accounts_summary)

    def connections(self, *, raw: bool = True) -> pl.DataFrame:
        return self._call(self._client.connections, raw=raw)

    def sync_status(self, *, raw: bool = True) -> pl.DataFrame:
        return self._call(self._client.sync_status, raw=raw)

    def net_worth(self) -> NetWorth:
        return self._call(self._client.net_worth)

    def spending(
        self,
        from_: dt.date | str | None = None,
        to: dt.date | str | None = None,
        *,
        group_by: str = "category",
    ) -> Spending:
        return self._call(self._client.spending, from_, to, group_by=group_by)

    def transactions_summary(
        self, from_: dt.date | str | None = None, to: dt.date | str | None = None, **filters: str
    ) -> TransactionsSummary:
        return self._call(self._client.transactions_summary, from_, to, **filters)

    def service_offset(self) -> dt.timedelta | None:
        """The service's clock less this machine's, from the latest answer's `Date` header
        (None before any answer, or when the service sends none)."""
        return self._client.service_offset

    def transaction(self, transaction_id: str) -> Transaction:
        return self._call(self._client.transaction, transaction_id)

    def transactions_page(
        self, page: int = 1, **options: Any
    ) -> tuple[pl.DataFrame, dict[str, Any]]:
        return self._call(self._client.transactions_page, page, **options)

    def transaction_date_range(self, **filters: str) -> tuple[dt.date, dt.date] | None:
        return self._call(self._client.transaction_date_range, **filters)

    def default_windows(self, **filters: str) -> list[Window]:
        return self._call(self._client.default_windows, **filters)

    def read_transactions(
        self,
        windows: Iterable[tuple[dt.date | str | None, dt.date | str | None]],
        **options: Any,
    ) -> Iterator[TransactionBatch]:
        """Blocking iterator over the async reader's batches."""
        agen = self._client.read_transactions(windows, **options)
        try:
            while True:
                try:
                    batch = self._run(agen.__anext__())
                except StopAsyncIteration:
                    return
                yield batch
        finally:
            self._run(agen.aclose())

    def stream_window(
        self,
        window: tuple[dt.date | str | None, dt.date | str | None],
        *,
        depth: int = 2,
        **options: Any,
    ) -> WindowStream:
        """``AsyncApiClient.stream_window`` as a blocking iterator that starts reading at once.

        The reader runs ahead of the caller in the client's loop by up to ``depth`` events, so
        requests and parsing go on while the caller loads a batch (or commits the previous
        window); memory stays bounded. Close it (or use it as a context manager) to stop early.
        """
        return WindowStream(self, self._client.stream_window(window, **options), depth)

    def read_all_transactions(self, **options: Any) -> tuple[pl.DataFrame, list[WindowReport]]:
        return self._call(self._client.read_all_transactions, **options)

    def create_transaction(self, **fields: Any) -> Transaction:
        return self._call(self._client.create_transaction, **fields)

    def update_transaction(self, transaction_id: str, **fields: Any) -> Transaction:
        return self._call(self._client.update_transaction, transaction_id, **fields)

    def assign_expense(self, transaction_id: str, expense_goal_id: str | None) -> Transaction:
        return self._call(self._client.assign_expense, transaction_id, expense_goal_id)

    def write(
        self,
        method: str,
        path: str,
        body: dict[str, Any],
        *,
        idempotency_key: str,
        claimed: Iterable[str] = (),
    ) -> Transaction:
        return self._call(
            self._client.write, method, path, body, idempotency_key=idempotency_key, claimed=claimed
        )

    def trigger_sync(
        self, provider: str | None = None, *, idempotency_key: str | None = None
    ) -> SyncRequest:
        return self._call(self._client.trigger_sync, provider, idempotency_key=idempotency_key)


class WindowStream:
    """Events of one window read in the client's loop, handed over through a bounded queue."""

    def __init__(self, client: ApiClient, agen: AsyncGenerator[WindowEvent, None], depth: int):
        self._client = client
        self._agen = agen
        self._done = False

        async def start() -> tuple[asyncio.Queue[tuple[str, Any]], asyncio.Task[None]]:
            events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=max(1, depth))

            async def pump() -> None:
                try:
                    async for event in agen:
                        await events.put(("event", event))
                    await events.put(("end", None))
                except Exception as exc:  # raised in the caller's thread
                    await events.put(("error", exc))

            return events, asyncio.create_task(pump())

        self._events, self._task = client._run(start())

    def __iter__(self) -> WindowStream:
        return self

    def __next__(self) -> WindowEvent:
        if self._done:
            raise StopIteration
        kind, value = self._client._run(self._events.get())
        if kind == "event":
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self) -> None:
        if self._done:
            return
        self._done = True
        task, agen = self._task, self._agen

        async def stop() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await agen.aclose()

        self._client._run(stop())

    def __enter__(self) -> WindowStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
