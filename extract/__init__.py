"""centsync.extract: the client of the Personal Finance Data API v1.

``AsyncApiClient`` (httpx.AsyncClient inside) and its blocking facade ``ApiClient``: paced
within the key's allowance, retried on transient failures, drift-safe when paging, and
returning typed Polars frames with each record's raw JSON. See docs/extract.md.
"""

# first: the transport adapter imports httpx without its command line (`_transport`)
from . import _transport  # noqa: F401

# isort: split
from ._client import AsyncApiClient
from ._errors import (
    ApiError,
    BadGateway,
    ConfigurationError,
    DriftError,
    ExtractError,
    GatewayTimeout,
    IdempotencyConflict,
    IdempotencyKeyReused,
    InsufficientScope,
    InternalError,
    InvalidRequest,
    KeyExpired,
    MethodNotAllowed,
    NotFound,
    ProviderQuotaExhausted,
    RateLimited,
    Redirected,
    ResponseFormatError,
    ServiceSilent,
    ServiceUnavailable,
    ServiceUnreachable,
    TransportFailure,
    Unauthenticated,
    UnknownApiError,
    UnknownClientError,
    UnknownServerError,
    UnsupportedMediaType,
    WriteUnconfirmed,
)
from ._frames import (
    ACCOUNT_SCHEMA,
    CONNECTION_SCHEMA,
    SYNC_STATUS_SCHEMA,
    TRANSACTION_SCHEMA,
    transactions_from_payloads,
)
from ._models import (
    AccountsSummary,
    Me,
    NetWorth,
    Settings,
    Spending,
    SurfaceUnavailable,
    SyncRequest,
    Transaction,
    TransactionsSummary,
)
from ._pacing import Allowance, Pacer
from ._paging import (
    TransactionBatch,
    Window,
    WindowDone,
    WindowEvent,
    WindowReport,
    WindowRows,
    WindowVoid,
    month_windows,
)
from ._reader import LIST_FILTERS
from ._requests import ClientSettings
from ._runtime import new_event_loop, run
from ._stats import EndpointStats, RequestStats
from ._sync import ApiClient, WindowStream
from ._transport import check_base_url, network_transport

__all__ = [
    "ACCOUNT_SCHEMA",
    "CONNECTION_SCHEMA",
    "LIST_FILTERS",
    "SYNC_STATUS_SCHEMA",
    "TRANSACTION_SCHEMA",
    "AccountsSummary",
    "Allowance",
    "ApiClient",
    "ApiError",
    "AsyncApiClient",
    "BadGateway",
    "ClientSettings",
    "ConfigurationError",
    "DriftError",
    "EndpointStats",
    "ExtractError",
    "GatewayTimeout",
    "IdempotencyConflict",
    "IdempotencyKeyReused",
    "InsufficientScope",
    "InternalError",
    "InvalidRequest",
    "KeyExpired",
    "Me",
    "MethodNotAllowed",
    "NetWorth",
    "NotFound",
    "Pacer",
    "ProviderQuotaExhausted",
    "RateLimited",
    "Redirected",
    "RequestStats",
    "ResponseFormatError",
    "ServiceSilent",
    "ServiceUnavailable",
    "ServiceUnreachable",
    "Settings",
    "Spending",
    "SurfaceUnavailable",
    "SyncRequest",
    "Transaction",
    "TransactionBatch",
    "TransactionsSummary",
    "TransportFailure",
    "Unauthenticated",
    "UnknownApiError",
    "UnknownClientError",
    "UnknownServerError",
    "UnsupportedMediaType",
    "Window",
    "WindowDone",
    "WindowEvent",
    "WindowReport",
    "WindowRows",
    "WindowStream",
    "WindowVoid",
    "WriteUnconfirmed",
    "check_base_url",
    "month_windows",
    "network_transport",
    "new_event_loop",
    "run",
    "transactions_from_payloads",
]
