"""What the CLI says when something goes wrong: one short message, what to do, an exit code.

Runs execute inside Dagster, so an exception reaches the CLI as the error chain of a failed
step; `classify` names it by the class of the first exception it knows in that chain (the
client's and the warehouse's trees say what happened by class, never by message).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The documented exit codes (README, "Exit codes").
OK = 0
DIFFER = 1  # a reconciliation difference nobody can explain
USAGE = 2  # invalid flags or configuration
AUTH = 3  # the key was refused, expired, or lacks a scope
UNREACHABLE = 4  # the service could not be reached (refused, DNS, TLS, timeouts)
SERVICE = 5  # the service answered with errors past the retries, or nonsense
WAREHOUSE = 6  # the warehouse: bound elsewhere, locked, corrupt, disk full
REJECTED = 7  # the refresh landed, but validation rejected rows the service sent
INTERRUPTED = 130  # SIGINT / SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as an interrupt so a refresh stops the way Ctrl-C stops it."""


# set once a SIGTERM arrived (Dagster routes SIGTERM to its SIGINT handler during a run, so
# the exit code would otherwise not tell the two apart)
SIGTERM_RECEIVED: list[bool] = []


def on_sigterm(_signum: int, _frame: object) -> None:
    """The SIGTERM handler of a running command: stop like Ctrl-C, remembering which it was."""
    SIGTERM_RECEIVED.append(True)
    raise Terminated()


@dataclass(frozen=True)
class Kind:
    """One class of failure: its exit code, a headline and what to do about it."""

    code: int
    headline: str
    todo: str


KINDS: dict[str, Kind] = {
    "SourceMismatch": Kind(WAREHOUSE, "the warehouse belongs to another source", ""),
    "Terminated": Kind(143, "stopped by SIGTERM", ""),
    "KeyboardInterrupt": Kind(INTERRUPTED, "interrupted", ""),
    "DagsterExecutionInterruptedError": Kind(INTERRUPTED, "interrupted", ""),
    "Unauthenticated": Kind(
        AUTH,
        "the service refused the API key",
        "check CENTSYNC_API_KEY (a revoked or mistyped key is refused).",
    ),
    "KeyExpired": Kind(
        AUTH, "the API key has expired", "create a new key and set CENTSYNC_API_KEY."
    ),
    "InsufficientScope": Kind(
        AUTH,
        "the API key lacks a scope this needs",
        "use a key with the data.read scope (data.write to post).",
    ),
    "WriteScopeMissing": Kind(
        AUTH,
        "the API key cannot write",
        "set CENTSYNC_API_KEY to a read and write key (data.write scope) and run "
        "`centsync writeback`; every outbox row stays pending.",
    ),
    "OutboxBusyError": Kind(
        WAREHOUSE,
        "the write-back outbox is in use",
        "close other connections to the outbox file (or wait for the other write-back), then run again.",
    ),
    "ConfigurationError": Kind(
        USAGE,
        "the service settings are not usable",
        "fix CENTSYNC_API_BASE_URL / CENTSYNC_API_KEY.",
    ),
    "ServiceUnreachable": Kind(
        UNREACHABLE,
        "the service could not be reached",
        "check CENTSYNC_API_BASE_URL (host and port) and that the service is up; then run the command again.",
    ),
    "TransportFailure": Kind(
        UNREACHABLE,
        "the service could not be reached",
        "check CENTSYNC_API_BASE_URL, the network and the service's status; then run the command again.",
    ),
    "RateLimited": Kind(
        SERVICE,
        "the service's rate limit stayed exhausted past the wait budget",
        "run again later; months already read are kept and the next refresh resumes.",
    ),
    "ServiceUnavailable": Kind(
        SERVICE, "the service is unavailable", "run again later; nothing read so far is lost."
    ),
    "InternalError": Kind(
        SERVICE, "the service kept failing (HTTP 500)", "run again later; report it if it persists."
    ),
    "BadGateway": Kind(SERVICE, "a proxy in front of the service failed (502)", "run again later."),
    "GatewayTimeout": Kind(
        SERVICE, "a proxy in front of the service timed out (504)", "run again later."
    ),
    "UnknownServerError": Kind(
        SERVICE, "the service answered with an unknown error", "run again later."
    ),
    "UnknownClientError": Kind(
        SERVICE,
        "the service refused a request",
        "report it: centsync sent something the service did not accept.",
    ),
    "InvalidRequest": Kind(
        SERVICE, "the service refused a request as invalid", "report it with the log below."
    ),
    "ResponseFormatError": Kind(
        SERVICE,
        "the service answered in a shape centsync does not know",
        "report it with the log below.",
    ),
    "DriftError": Kind(
        SERVICE,
        "the service kept changing the same months while they were read",
        "run again; the months read so far are kept.",
    ),
    "RefreshInProgressError": Kind(
        WAREHOUSE,
        "another refresh holds the warehouse",
        "wait for it to finish (or stop it), then run again.",
    ),
    "NoWarehouseError": Kind(
        WAREHOUSE, "there is no warehouse yet", "run `centsync refresh` first."
    ),
    "WarehouseError": Kind(WAREHOUSE, "the warehouse could not be written", "see the log below."),
    "MonthBoundsError": Kind(WAREHOUSE, "the warehouse refused a load", "see the log below."),
    "IOException": Kind(
        WAREHOUSE,
        "the warehouse file could not be read or written",
        "check the path, its permissions and free disk space.",
    ),
    "OutOfMemoryException": Kind(
        WAREHOUSE, "DuckDB ran out of memory", "raise CENTSYNC_DUCKDB_MEMORY or free memory."
    ),
    "CatalogException": Kind(
        WAREHOUSE,
        "the warehouse file is not a centsync warehouse (or is damaged)",
        "point CENTSYNC_WAREHOUSE at a centsync warehouse, or a new path.",
    ),
    "SerializationException": Kind(
        WAREHOUSE,
        "the warehouse file is damaged",
        "restore it from a backup, or refresh into a new path.",
    ),
    "LookupError": Kind(
        WAREHOUSE, "the warehouse has nothing to work on yet", "run `centsync refresh` first."
    ),
}
DISK_FULL = Kind(
    WAREHOUSE,
    "the disk is full",
    "free space next to the warehouse (a refresh needs about twice its size).",
)


@dataclass(frozen=True)
class Failure:
    """A classified failure, ready to print."""

    kind: Kind
    cls: str
    message: str
    detail: str  # the whole error chain, for the log
    run_id: str | None = None

    @property
    def code(self) -> int:
        return self.kind.code

    def as_json(self, log: Path | None) -> dict[str, Any]:
        return {
            "status": "interrupted" if self.code in (INTERRUPTED, 143) else "failed",
            "exit_code": self.code,
            "error": {"class": self.cls, "message": self.message, "what_to_do": self.kind.todo},
            "run_id": self.run_id,
            "log": str(log) if log else None,
        }


def _chain(error: Any) -> list[Any]:
    """A Dagster SerializableErrorInfo and its causes and contexts, outermost first."""
    out, seen = [], set()
    todo = [error]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        out.append(e)
        todo += [getattr(e, "cause", None), getattr(e, "context", None)]
    return out


def classify(error: Any, run_id: str | None = None) -> Failure:
    """Name a failed step's error (a SerializableErrorInfo) by the first class it knows."""
    chain = _chain(error)
    detail = "\n".join(e.to_string() for e in chain if hasattr(e, "to_string"))
    for e in chain:
        name = getattr(e, "cls_name", None) or ""
        message = (getattr(e, "message", "") or "").strip()
        if name in KINDS:
            if KINDS[name].code in (INTERRUPTED, 143):
                message = INTERRUPTED_MESSAGE
            return Failure(KINDS[name], name, _short(message), detail, run_id)
        if "No space left on device" in message:
            return Failure(DISK_FULL, name, _short(message), detail, run_id)
    last = chain[-1] if chain else None
    message = (getattr(last, "message", "") or "the run failed").strip()
    return Failure(
        Kind(SERVICE if "Transport" in message else 1, "the run failed", "see the log below."),
        getattr(last, "cls_name", "") or "Error",
        _short(message),
        detail,
        run_id,
    )


INTERRUPTED_MESSAGE = (
    "the months read completely are kept in the warehouse (ops.refreshes says 'interrupted'); "
    "the next `centsync refresh` resumes from them"
)


def from_exception(exc: BaseException) -> Failure:
    """Name an exception raised outside a Dagster run (before one started)."""
    name = type(exc).__name__
    for cls in type(exc).__mro__:
        if cls.__name__ in KINDS:
            return Failure(KINDS[cls.__name__], name, _short(str(exc)), repr(exc))
    if isinstance(exc, OSError) and exc.errno == 28:
        return Failure(DISK_FULL, name, _short(str(exc)), repr(exc))
    return Failure(
        Kind(1, "unexpected error", "see the log below."), name, _short(str(exc)), repr(exc)
    )


def _short(message: str) -> str:
    """The error's own first line (Dagster prefixes and tracebacks dropped), at most 400 chars."""
    first = message.splitlines()[0] if message else ""
    # "centsync.extract._errors.TransportFailure: GET /v1/me: ..." -> "GET /v1/me: ..."
    first = re.sub(r"^[A-Za-z_][\w.]*\.[A-Z]\w*: ", "", first)
    return first[:1000]


def write_log(home: Path, failure: Failure) -> Path:
    """Keep the whole error chain in the instance's log folder; returns the file."""
    folder = home / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = folder / f"{stamp}-{failure.run_id or os.getpid()}.log"
    path.write_text(f"{failure.cls}: {failure.message}\n\n{failure.detail}\n")
    return path
