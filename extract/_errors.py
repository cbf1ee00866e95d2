"""The client's exception tree, keyed by the API's error ``code``.

::

    ExtractError                      anything this package raises
    ├── ConfigurationError            bad base URL (http:// off loopback), empty key
    │   └── Redirected                the service answered 3xx: the base URL is not the service
    ├── ResponseFormatError           a body that is not the documented shape
    │   └── WriteUnconfirmed          a write accepted (2xx) whose transaction is not found
    ├── DriftError                    a window kept changing past the re-read budget
    ├── TransportFailure              connection dropped/refused/timed out (retryable)
    │   ├── ServiceUnreachable        no connection at all: refused, unknown host, TLS
    │   │                             (tried three times within about a second)
    │   └── ServiceSilent             connected, but no answer within the timeout (three tries)
    └── ApiError                      the server answered with an error status
        ├── InvalidRequest            400 invalid_request            permanent
        ├── Unauthenticated           401 unauthenticated            permanent
        ├── KeyExpired                401 key_expired                permanent
        ├── InsufficientScope         403 insufficient_scope         permanent
        ├── NotFound                  404 not_found                  permanent
        ├── MethodNotAllowed          405 method_not_allowed         permanent
        ├── IdempotencyConflict       409 idempotency_conflict       retryable
        ├── UnsupportedMediaType      415 unsupported_media_type     permanent
        ├── IdempotencyKeyReused      422 idempotency_key_reused     permanent
        ├── RateLimited               429 rate_limited               retryable
        ├── ProviderQuotaExhausted    429 provider_quota_exhausted   neither: try in a later run
        ├── InternalError             500 internal_error             retryable
        ├── ServiceUnavailable        503 service_unavailable        retryable
        ├── BadGateway / GatewayTimeout  502 / 504 (proxies)         retryable
        └── UnknownApiError           a code and a status this client does not know
            ├── UnknownClientError    4xx: permanent
            └── UnknownServerError    5xx: retryable

Classed by meaning, whatever the code (``error_class``): an unknown code takes its status's
class above (401 the key, 403 the scope, 404 not found, 400/422 invalid, 409 a conflict, 5xx a
fault of the service); any 429 is ``RateLimited`` (a wait) except ``provider_quota_exhausted``
on ``POST /v1/sync``, the one 429 the API document makes a refusal.

Callers catch by meaning (``except InsufficientScope``, ``if err.retryable``), never by parsing
messages. No exception text ever contains the API key.

A class a command can fail with says what that means on itself: ``outcome`` (the kernel's
``Outcome``: USAGE, AUTH the key, UNREACHABLE, SERVICE), ``headline`` and ``what_to_do``; the
exit code of each outcome is chosen at the edge, in one table (``pipelines/failures.py``).
``outcome`` None (the base classes above ApiError): the CLI looks further down the error chain.
Every answer of the service (``ApiError``) has one: an answer is never a crash.
"""

from __future__ import annotations

from typing import Any, ClassVar

from centsync.transform.contract import Outcome


class ExtractError(Exception):
    """Base of everything the extract client raises."""

    retryable: ClassVar[bool] = False
    permanent: ClassVar[bool] = True
    outcome: ClassVar[Outcome | None] = None
    headline: ClassVar[str] = ""
    what_to_do: ClassVar[str] = ""


class ConfigurationError(ExtractError):
    """The client was configured in a way that would be unsafe or cannot work."""

    outcome = Outcome.USAGE
    headline = "a setting is not usable"
    what_to_do = "fix the variable named above (every setting: docs/configuration.md)."


class Redirected(ConfigurationError):
    """The service answered a redirect (3xx). It is not followed: the key would go with it to
    wherever it points. The base URL is the setting to fix (exit 2), not the service's body."""

    headline = "the service redirected the request elsewhere (not followed: the key would go too)"
    what_to_do = (
        "if the address named above is your service, set CENTSYNC_API_BASE_URL to it; "
        "else check CENTSYNC_API_BASE_URL (a proxy or a login page answers there)."
    )

    def __init__(self, method: str, path: str, status: int, location: str, base: str) -> None:
        self.location = location
        where = location or "nowhere (no Location header)"
        fix = f" (if that is your service: CENTSYNC_API_BASE_URL={base})" if base else ""
        super().__init__(f"{method} {path}: redirected ({status}) to {where}{fix}")


class ResponseFormatError(ExtractError):
    """The server answered 2xx with a body that is not the documented shape."""

    outcome = Outcome.SERVICE
    headline = "the service answered in a shape centsync does not know"
    what_to_do = "report it with the log below."


class WriteUnconfirmed(ResponseFormatError):
    """The service accepted a write (2xx) but neither its answer nor a read-back shows the
    transaction: its outcome is unknown. Resending it under the same ``Idempotency-Key`` is safe
    (the service replays it), so a write-back leaves it pending and resends it later. (What a
    command ends with is ``ResponseFormatError``'s: the service's answer.)"""

    permanent = False
    headline = "the service accepted a write but centsync could not find what it wrote"
    what_to_do = "run `centsync writeback` again later: it resends under the same key, never twice."

    def __init__(self, method: str, path: str, status: int, detail: str) -> None:
        self.method, self.path, self.status = method, path, status
        super().__init__(f"{method} {path} -> {status}: {detail}")


class DriftError(ExtractError):
    """A window kept changing while it was read, beyond the re-read budget."""

    retryable = True
    permanent = False
    outcome = Outcome.SERVICE
    headline = "the service kept changing the same months while they were read"
    what_to_do = "run again; the months read so far are kept."


class TransportFailure(ExtractError):
    """The request may or may not have reached the server (dropped, refused, timed out)."""

    retryable = True
    permanent = False
    outcome = Outcome.UNREACHABLE
    headline = "the service could not be reached"
    what_to_do = "check CENTSYNC_API_BASE_URL, the network and the service's status; then run the command again."

    def __init__(self, method: str, path: str, cause: BaseException) -> None:
        self.method = method
        self.path = path
        self.cause_type = type(cause).__name__
        super().__init__(f"{method} {path}: transport error ({self.cause_type})")


class ServiceUnreachable(TransportFailure):
    """No connection could be made: the request never reached the service.

    ``reason`` says why in words a person can act on (connection refused, host not found,
    TLS). Retried only briefly: a service that refuses connections rarely starts accepting
    them within the seconds a backoff would wait.
    """

    outcome = Outcome.UNREACHABLE
    headline = "the service could not be reached"
    what_to_do = "check CENTSYNC_API_BASE_URL (host and port) and that the service is up; then run the command again."

    def __init__(self, method: str, path: str, cause: BaseException, reason: str) -> None:
        super().__init__(method, path, cause)
        self.reason = reason
        self.args = (f"{method} {path}: {reason}",)

    def __str__(self) -> str:
        return str(self.args[0])


class ServiceSilent(TransportFailure):
    """A connection was made but no answer came within the timeout: a service that hangs, or
    another program listening on the port. Retried as briefly as an unreachable service."""

    outcome = Outcome.UNREACHABLE
    headline = "the service accepted the connection but did not answer"
    what_to_do = (
        "check that CENTSYNC_API_BASE_URL is the service (not another program on that port) "
        "and the service's status; then run the command again."
    )

    def __init__(self, method: str, path: str, cause: BaseException, seconds: float) -> None:
        super().__init__(method, path, cause)
        self.seconds = seconds
        self.args = (f"{method} {path}: connected, but no answer within {seconds:g} s",)

    def __str__(self) -> str:
        return str(self.args[0])


class ApiError(ExtractError):
    """An error response from the API: status, code, message, method, path, request id."""

    code: ClassVar[str] = ""
    hint: ClassVar[str] = ""
    # an answer this client did not expect (404, 405, ...): the service's, not a crash
    outcome = Outcome.SERVICE
    headline = "the service refused a request"
    what_to_do = (
        "check that CENTSYNC_API_BASE_URL is the service's root (without /v1); "
        "report it with the log below if it is."
    )

    def __init__(
        self,
        *,
        status: int,
        code: str,
        message: str,
        method: str,
        path: str,
        request_id: str | None = None,
        details: list[dict[str, Any]] | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.error_code = code
        self.message = message
        self.method = method
        self.path = path
        self.request_id = request_id
        self.details = details or []
        self.retry_after = retry_after
        super().__init__(self._text())

    def _text(self) -> str:
        text = f"{self.method} {self.path} -> {self.status} {self.error_code}: {self.message}"
        if self.details:
            issues = "; ".join(f"{d.get('field')}: {d.get('issue')}" for d in self.details)
            text += f" ({issues})"
        if self.hint:
            text += f". {self.hint}"
        if self.request_id:
            text += f" [request id {self.request_id}]"
        return text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._text()!r})"


class InvalidRequest(ApiError):
    code = "invalid_request"
    hint = "The request was rejected as sent; fix it before sending it again"
    outcome = Outcome.SERVICE
    headline = "the service refused a request as invalid"
    what_to_do = "report it with the log below."


class Unauthenticated(ApiError):
    code = "unauthenticated"
    hint = "The key was not accepted (missing, unknown or revoked); check CENTSYNC_API_KEY"
    outcome = Outcome.AUTH
    headline = "the service refused the API key"
    what_to_do = "check CENTSYNC_API_KEY (a revoked or mistyped key is refused)."


class KeyExpired(ApiError):
    code = "key_expired"
    hint = "The key has expired; create a new key (Settings, Developer API, API keys)"
    outcome = Outcome.AUTH
    headline = "the API key has expired"
    what_to_do = "create a new key and set CENTSYNC_API_KEY."


class InsufficientScope(ApiError):
    code = "insufficient_scope"
    hint = "This key lacks the scope (a read-only key cannot write); create a read and write key"
    outcome = Outcome.AUTH
    headline = "the API key lacks a scope this needs"
    what_to_do = "use a key with the data.read scope (data.write to post)."


class NotFound(ApiError):
    code = "not_found"


class MethodNotAllowed(ApiError):
    code = "method_not_allowed"


class IdempotencyConflict(ApiError):
    code = "idempotency_conflict"
    hint = "A request with this Idempotency-Key is still being processed"
    retryable = True
    permanent = False


class UnsupportedMediaType(ApiError):
    code = "unsupported_media_type"


class IdempotencyKeyReused(ApiError):
    code = "idempotency_key_reused"
    hint = "This Idempotency-Key was used before with a different body; derive keys per event"


class RateLimited(ApiError):
    code = "rate_limited"
    retryable = True
    permanent = False
    outcome = Outcome.SERVICE
    headline = "the service's rate limit stayed exhausted past the wait budget"
    what_to_do = "run again later; what was read is kept and the next refresh reads on from there."


class ProviderQuotaExhausted(ApiError):
    code = "provider_quota_exhausted"
    hint = "The provider's manual-sync quota is used up; scheduled syncs continue, try a later run"
    retryable = False
    permanent = False


class InternalError(ApiError):
    code = "internal_error"
    retryable = True
    permanent = False
    outcome = Outcome.SERVICE
    headline = "the service kept failing (HTTP 500)"
    what_to_do = "run again later; report it if it persists."


class ServiceUnavailable(ApiError):
    code = "service_unavailable"
    retryable = True
    permanent = False
    outcome = Outcome.SERVICE
    headline = "the service is unavailable"
    what_to_do = "run again later; nothing read so far is lost."


class BadGateway(ApiError):
    code = "bad_gateway"
    retryable = True
    permanent = False
    outcome = Outcome.SERVICE
    headline = "a proxy in front of the service failed (502)"
    what_to_do = "run again later."


class GatewayTimeout(ApiError):
    code = "gateway_timeout"
    retryable = True
    permanent = False
    outcome = Outcome.SERVICE
    headline = "a proxy in front of the service timed out (504)"
    what_to_do = "run again later."


class UnknownApiError(ApiError):
    """An error code this client does not know (the service may add codes)."""


class UnknownClientError(UnknownApiError):
    """An unknown code with a 4xx status: permanent for this request."""

    outcome = Outcome.SERVICE
    headline = "the service refused a request"
    what_to_do = "report it: centsync sent something the service did not accept."


class UnknownServerError(UnknownApiError):
    """An unknown code with a 5xx status: retryable."""

    retryable = True
    permanent = False
    outcome = Outcome.SERVICE
    headline = "the service answered with an unknown error"
    what_to_do = "run again later."


ERRORS_BY_CODE: dict[str, type[ApiError]] = {
    cls.code: cls
    for cls in (
        InvalidRequest,
        Unauthenticated,
        KeyExpired,
        InsufficientScope,
        NotFound,
        MethodNotAllowed,
        IdempotencyConflict,
        UnsupportedMediaType,
        IdempotencyKeyReused,
        RateLimited,
        ProviderQuotaExhausted,
        InternalError,
        ServiceUnavailable,
        BadGateway,
        GatewayTimeout,
    )
}

# An error whose code this client does not know is classed by its status: what the status means
# (the key, its scope, a missing thing, a request the service would not take, a wait, a fault
# of the service) is what a caller acts on. Only the API document's codes and the contract's
# (docs/api-contract.md, section 2) have their own classes; any other code keeps its text
# (``error_code``) but takes its status's class.
_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: InsufficientScope,
    404: NotFound,
    405: MethodNotAllowed,
    409: IdempotencyConflict,
    415: UnsupportedMediaType,
    422: InvalidRequest,
    429: RateLimited,
    500: InternalError,
    502: BadGateway,
    503: ServiceUnavailable,
    504: GatewayTimeout,
}

# The one 429 that is not a wait (API document, section 4.3): a provider's quota, spent by
# ``POST /v1/sync``. Every other 429, whatever its code, is the service asking to wait.
SYNC_TRIGGER = ("POST", "/v1/sync")


def error_class(
    status: int, code: str | None, *, method: str | None = None, path: str | None = None
) -> type[ApiError]:
    """The exception class for an error response, by meaning.

    A 429 is a wait (``RateLimited``) whatever its code, except ``provider_quota_exhausted`` on
    ``POST /v1/sync`` (when ``method``/``path`` are not given, that code keeps its class).
    Otherwise a known code keeps its class; an unknown code, or none, is classed by its status
    (unknown 4xx: ``UnknownClientError``, permanent; unknown 5xx: ``UnknownServerError``).
    """
    if status == 429:
        quota = code == ProviderQuotaExhausted.code
        on_sync = method is None or (method.upper(), path) == SYNC_TRIGGER
        return ProviderQuotaExhausted if quota and on_sync else RateLimited
    if code:
        known = ERRORS_BY_CODE.get(code)
        if known is not None:
            return known
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return UnknownServerError if status >= 500 else UnknownClientError


def classed_by_status(status: int, code: str | None) -> bool:
    """Whether an error's class came from its status alone (a code this client does not know)."""
    return not (code and code in ERRORS_BY_CODE)
