"""What a failure means, what to say about it, and the one table of exit codes.

The library layers say what a failure MEANS (the kernel's `Outcome`: usage, the key, the
network, the service, the warehouse); `EXIT_CODES` below is the one place that turns a meaning
into the documented exit code (docs/cli.md, "Exit codes").

A known failure says what it is on its class (`outcome`, `headline`, `what_to_do` on extract's
and the warehouse's error trees; `_outside` for the classes of other packages): `kind_of`. Runs
execute inside Dagster, so the assets raise a known failure again as a `dg.Failure` with that
in its metadata (`failure_metadata`), and `classify` reads the metadata back from the failed
step, for the CLI and the alert sensors alike (`recorded.py`): no exit code is chosen by a
class's name or a message's text (an interrupt, which Dagster records by name only, and
DuckDB's disk-full, which says so only in its message, are the two exceptions).
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from centsync.transform.contract import Outcome

# The one table: what a command's end means -> its documented exit code (docs/cli.md).
EXIT_CODES: dict[Outcome, int] = {
    Outcome.OK: 0,
    Outcome.DIFFER: 1,  # a reconciliation difference nobody can explain
    Outcome.USAGE: 2,  # invalid flags or configuration
    Outcome.AUTH: 3,  # the key was refused, expired, or lacks a scope
    Outcome.UNREACHABLE: 4,  # the service could not be reached (refused, DNS, TLS, timeouts)
    Outcome.SERVICE: 5,  # the service answered with errors past the retries, or nonsense
    Outcome.WAREHOUSE: 6,  # the warehouse: bound elsewhere, locked, corrupt, disk full
    Outcome.REJECTED: 7,  # the refresh landed, but validation rejected rows the service sent
    Outcome.INTERNAL: 70,  # a bug (sysexits' EX_SOFTWARE): never 1, which a scheduler trusts
    Outcome.INTERRUPTED: 130,  # SIGINT
    Outcome.TERMINATED: 143,  # SIGTERM
}
# the codes by name, for the commands that end with one
OK, DIFFER, USAGE = EXIT_CODES[Outcome.OK], EXIT_CODES[Outcome.DIFFER], EXIT_CODES[Outcome.USAGE]
AUTH, UNREACHABLE = EXIT_CODES[Outcome.AUTH], EXIT_CODES[Outcome.UNREACHABLE]
SERVICE, WAREHOUSE = EXIT_CODES[Outcome.SERVICE], EXIT_CODES[Outcome.WAREHOUSE]
REJECTED, INTERNAL = EXIT_CODES[Outcome.REJECTED], EXIT_CODES[Outcome.INTERNAL]
INTERRUPTED, TERMINATED = EXIT_CODES[Outcome.INTERRUPTED], EXIT_CODES[Outcome.TERMINATED]
# a stop asked for (Ctrl-C, SIGTERM): not a problem to report
STOPS = frozenset({INTERRUPTED, TERMINATED})


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


# Failures of classes that cannot say so on themselves (other packages': DuckDB's, httpx's, the
# built-in LookupError). By class, never by name; `exact` entries do not cover subclasses
# (KeyError is a LookupError, and a bug). centsync's own classes say so on themselves.
_OUTSIDE: list[tuple[type[BaseException], Kind, bool]] = []
DUCKDB_KINDS = {
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
}
NOTHING_YET = Kind(
    WAREHOUSE, "the warehouse has nothing to work on yet", "run `centsync refresh` first."
)
# an httpx transport error that escaped the client's own tree: the service's
STRAY_TRANSPORT = Kind(SERVICE, "the run failed", "see the log below.")


def _outside() -> list[tuple[type[BaseException], Kind, bool]]:
    """The table above, filled on first use (its imports are those of a run)."""
    if not _OUTSIDE:
        import duckdb
        import httpx

        _OUTSIDE.extend(
            [
                # DuckDB's exception classes, looked up by attribute on the module
                *((getattr(duckdb, name), kind, False) for name, kind in DUCKDB_KINDS.items()),
                (httpx.TransportError, STRAY_TRANSPORT, False),
                (LookupError, NOTHING_YET, True),
            ]
        )
    return _OUTSIDE


# The interrupts, as Dagster records them in a run's error chain (it turns a KeyboardInterrupt
# into its own error, and only names survive serialization): the one match by name left.
INTERRUPTS = {
    "Terminated": Kind(TERMINATED, "stopped by SIGTERM", ""),
    "KeyboardInterrupt": Kind(INTERRUPTED, "interrupted", ""),
    "DagsterExecutionInterruptedError": Kind(INTERRUPTED, "interrupted", ""),
}
INTERNAL_TODO = "this is a bug in centsync: report it with the log named below."
UNEXPECTED = Kind(INTERNAL, "internal error (a bug in centsync)", INTERNAL_TODO)
DISK_FULL = Kind(
    WAREHOUSE,
    "the disk is full",
    "free space next to the warehouse (a refresh needs about twice its size).",
)

# a file centsync keeps that cannot be written: a read-only folder or file, or another user's
NOT_WRITABLE = Kind(
    WAREHOUSE,
    "a file centsync keeps cannot be written (read-only, or not this user's)",
    "make the folder named above writable for this user, or point CENTSYNC_WAREHOUSE (the "
    "warehouse and the files kept beside it) or DAGSTER_HOME at a folder that is; a read-only "
    "warehouse can still be queried (`centsync sql`, `status`).",
)
_NOT_WRITABLE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


_NOT_DUCKDB = "not a valid DuckDB database file"
_A_FOLDER = "Is a directory"


def _unusable_kind(exc: BaseException) -> Kind:
    """A warehouse DuckDB cannot open (damaged, not a DuckDB file, a folder): its recovery is
    the warehouse's own advice (`centsync refresh --rebuild`), whatever the kind."""
    from centsync.warehouse.errors import REBUILD_ADVICE

    text = str(exc)
    if _A_FOLDER in text:
        return Kind(
            WAREHOUSE,
            "the warehouse path is a folder, not a warehouse file",
            "point CENTSYNC_WAREHOUSE at a file (e.g. `<that folder>/centsync.duckdb`); or, if "
            "the folder is in the warehouse's place by mistake, " + REBUILD_ADVICE,
        )
    if _NOT_DUCKDB in text:
        return Kind(
            WAREHOUSE,
            "the warehouse path holds a file DuckDB cannot open (damaged, or not a DuckDB file)",
            "if CENTSYNC_WAREHOUSE names the wrong file, point it at the warehouse; if it is the "
            "warehouse, " + REBUILD_ADVICE,
        )
    return Kind(
        WAREHOUSE, "the warehouse file is damaged (DuckDB cannot read it back)", REBUILD_ADVICE
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

    def to_json(self, log: Path | None) -> dict[str, Any]:
        return {
            "status": "interrupted" if self.code in STOPS else "failed",
            "exit_code": self.code,
            "error": {"class": self.cls, "message": self.message, "what_to_do": self.kind.todo},
            "run_id": self.run_id,
            "log": str(log) if log else None,
        }


def kind_of(exc: BaseException) -> Kind | None:
    """The kind of a known failure, by its class (the most specific that says), else None.

    A class says on itself (`outcome`, `headline`, `what_to_do`: extract's and the warehouse's
    trees; its exit code from EXIT_CODES) or in `_outside`. Else a full disk: an OSError with
    ENOSPC, or DuckDB's IOException saying so (it carries no errno: its message is the only
    place).
    """
    table = _outside()
    from centsync.warehouse.paths import is_damage

    if is_damage(exc) or (  # before DuckDB's IOException: a damaged file, not a path to check
        _A_FOLDER in str(exc) and type(exc).__module__.startswith(("duckdb", "_duckdb"))
    ):
        return _unusable_kind(exc)
    if (
        (isinstance(exc, OSError) and exc.errno == errno.ENOSPC)
        or os.strerror(errno.ENOSPC) in str(exc)
        or "database or disk is full" in str(exc)  # SQLite's (the Dagster home)
    ) and getattr(type(exc), "outcome", None) is None:
        return DISK_FULL  # the real cause, not "check the path and its permissions"
    if isinstance(exc, OSError) and exc.errno in _NOT_WRITABLE:
        return NOT_WRITABLE
    for cls in type(exc).__mro__:
        for known_cls, kind, exact in table:
            if cls is known_cls and (not exact or type(exc) is known_cls):
                return kind
        outcome = cls.__dict__.get("outcome")
        if outcome is not None:  # the sandbox, which shares no code, spells it as its value
            code = EXIT_CODES[Outcome(outcome)]
            return Kind(code, exc.headline, exc.what_to_do)  # type: ignore[attr-defined]
    return None


def known(exc: BaseException) -> tuple[BaseException, Kind] | None:
    """The first exception of `exc`'s chain (itself, then its causes) of a known kind."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        kind = kind_of(e)
        if kind is not None:
            return e, kind
        todo += [e.__cause__, e.__context__]
    return None


# what a run's step failure carries (dg.Failure metadata), so the CLI needs no exception types
EXIT_CODE, ERROR_CLASS, MESSAGE = "centsync/exit_code", "centsync/error_class", "centsync/message"
HEADLINE, WHAT_TO_DO = "centsync/headline", "centsync/what_to_do"


def failure_metadata(exc: BaseException, kind: Kind) -> dict[str, Any]:
    """The metadata of the `dg.Failure` an asset raises for a known failure."""
    return {
        EXIT_CODE: kind.code,
        ERROR_CLASS: type(exc).__name__,
        MESSAGE: _short(str(exc)),
        HEADLINE: kind.headline,
        WHAT_TO_DO: kind.todo,
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


def classify(
    error: Any, run_id: str | None = None, metadata: dict[str, Any] | None = None
) -> Failure:
    """Name a failed step: by the metadata of the `dg.Failure` it raised for a known failure
    (`failure_metadata`), else an interrupt, else the unexpected error its chain ends with."""
    chain = _chain(error)
    detail = "Traceback (the failed step's error chain, outermost first):\n" + "\n".join(
        e.to_string() for e in chain if hasattr(e, "to_string")
    )
    if metadata and metadata.get(EXIT_CODE) is not None:
        kind = Kind(int(metadata[EXIT_CODE]), metadata[HEADLINE], metadata[WHAT_TO_DO])
        return Failure(kind, metadata[ERROR_CLASS], metadata[MESSAGE], detail, run_id)
    for e in chain:
        name = getattr(e, "cls_name", None) or ""
        if name in INTERRUPTS:
            return Failure(INTERRUPTS[name], name, INTERRUPTED_MESSAGE, detail, run_id)
    last = chain[-1] if chain else None
    message = (getattr(last, "message", "") or "the run failed").strip()
    return Failure(
        UNEXPECTED,
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
    kind = kind_of(exc)
    if kind is not None:
        return Failure(kind, name, _short(str(exc)), _traceback(exc))
    return Failure(UNEXPECTED, name, _short(str(exc)), _traceback(exc))


def _traceback(exc: BaseException) -> str:
    """The whole chain of an exception raised outside a run, for the log."""
    import traceback

    return "".join(traceback.format_exception(exc))


def _short(message: str) -> str:
    """The error's own first line (Dagster prefixes and tracebacks dropped), at most 1,000
    characters."""
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
