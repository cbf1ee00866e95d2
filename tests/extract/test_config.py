"""Configuration safety: https off loopback, the key hidden everywhere, the error tree."""

from __future__ import annotations

import httpx
import pytest

from centsync.extract import (
    ApiError,
    AsyncApiClient,
    ConfigurationError,
    InsufficientScope,
    InternalError,
    ProviderQuotaExhausted,
    RateLimited,
    ServiceUnavailable,
    UnknownClientError,
    UnknownServerError,
    check_base_url,
)
from centsync.extract._errors import ERRORS_BY_CODE, error_class

from .conftest import run

KEY = "pfd_live_" + "A" * 40

CONTRACT_CODES = {
    "invalid_request": (400, False),
    "unauthenticated": (401, False),
    "key_expired": (401, False),
    "insufficient_scope": (403, False),
    "not_found": (404, False),
    "method_not_allowed": (405, False),
    "idempotency_conflict": (409, True),
    "unsupported_media_type": (415, False),
    "idempotency_key_reused": (422, False),
    "rate_limited": (429, True),
    "provider_quota_exhausted": (429, False),
    "internal_error": (500, True),
    "service_unavailable": (503, True),
}


@pytest.mark.parametrize("code", sorted(CONTRACT_CODES))
def test_every_contract_code_has_its_own_class(code: str) -> None:
    status, retryable = CONTRACT_CODES[code]
    cls = error_class(status, code)
    assert cls is ERRORS_BY_CODE[code] and cls.code == code
    assert cls.retryable is retryable  # a property of the class, not of a message


def test_quota_is_neither_retryable_nor_permanent() -> None:
    assert not ProviderQuotaExhausted.retryable and not ProviderQuotaExhausted.permanent
    assert InsufficientScope.permanent and not InsufficientScope.retryable
    assert RateLimited.retryable and InternalError.retryable and ServiceUnavailable.retryable


def test_unknown_codes_follow_the_status() -> None:
    assert error_class(418, "teapot") is UnknownClientError
    assert error_class(599, "meltdown") is UnknownServerError
    assert UnknownServerError.retryable and not UnknownClientError.retryable
    assert error_class(502, None).retryable and error_class(504, None).retryable


def test_error_text_carries_status_code_method_path_and_request_id() -> None:
    err = InsufficientScope(
        status=403,
        code="insufficient_scope",
        message="no write",
        method="POST",
        path="/v1/transactions",
        request_id="rid-1",
    )
    text = str(err)
    for part in ("403", "insufficient_scope", "POST", "/v1/transactions", "rid-1", "no write"):
        assert part in text
    assert isinstance(err, ApiError)


@pytest.mark.parametrize(
    "url", ["http://api.example.com", "http://10.0.0.5:8000", "ftp://127.0.0.1"]
)
def test_clear_text_off_loopback_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError):
        check_base_url(url, None)


@pytest.mark.parametrize(
    "url",
    ["https://api.example.com", "http://127.0.0.1:8080", "http://localhost", "http://[::1]:9"],
)
def test_https_and_loopback_are_accepted(url: str) -> None:
    check_base_url(url, None)


def test_in_process_transport_may_use_any_host() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200))
    check_base_url("http://sandbox.test", transport)


def test_repr_and_errors_never_show_the_key() -> None:
    async def go() -> None:
        client = AsyncApiClient("https://api.example.com", KEY)
        try:
            assert KEY not in repr(client)
            assert KEY not in repr(client._auth)
            assert KEY not in repr(client.__dict__)
        finally:
            await client.aclose()
        with pytest.raises(ConfigurationError) as err:
            AsyncApiClient("http://api.example.com", KEY)
        assert KEY not in str(err.value)

    run(go())


def test_empty_key_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        AsyncApiClient("https://api.example.com", " ")
