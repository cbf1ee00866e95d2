"""A warehouse is bound to its source: the service (base URL) and the owner it holds data of.

The first refresh records them in `ops.meta` (`source.base_url`, `source.account_id`, with the
currency and timezone it saw). A later refresh against another service or owner refuses before
writing anything, unless asked to rebind, which keeps the old file as a backup and starts a new
warehouse. The embedded sandbox has its own stable name (`embedded-sandbox:seed=N`), since it
listens on a new port each time.
"""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from centsync.transform.contract import Outcome
from centsync.warehouse import connect_readonly
from centsync.warehouse.reads import meta_values

if TYPE_CHECKING:
    import duckdb

KEYS = (
    "source.base_url",
    "source.account_id",
    "source.currency",
    "source.timezone",
    "source.bound_at",
)


@dataclass(frozen=True)
class Binding:
    """What a warehouse holds: whose data, from which service."""

    base_url: str
    account_id: str
    currency: str | None = None
    timezone: str | None = None
    bound_at: str | None = None

    def describe(self) -> str:
        extra = ", ".join(x for x in (self.currency, self.timezone) if x)
        return f"{self.base_url} (owner {self.account_id}{', ' + extra if extra else ''})"


class SourceMismatch(Exception):
    """The warehouse holds another service's or owner's data: nothing was written."""

    # a failure of the warehouse; the message itself says what to do
    outcome: ClassVar[Outcome] = Outcome.WAREHOUSE
    headline: ClassVar[str] = "the warehouse belongs to another source"
    # refused before anything was written: not a failed refresh of this warehouse's own
    record_failure: ClassVar[bool] = False
    what_to_do: ClassVar[str] = ""

    def __init__(self, path: Path, bound: Binding, base_url: str, account_id: str | None) -> None:
        self.path, self.bound, self.base_url, self.account_id = path, bound, base_url, account_id
        whom = f" (owner {account_id})" if account_id else ""
        super().__init__(
            f"the warehouse {path} holds the data of {bound.describe()}"
            + (f", bound {bound.bound_at[:19]}" if bound.bound_at else "")
            + f"; this refresh is against {base_url}{whom}. Nothing was written. "
            "To keep both, set CENTSYNC_WAREHOUSE to a new file; to replace it, run "
            "`centsync refresh --rebind` (the old file is kept as a backup next to it)."
        )


def normalise(base_url: str) -> str:
    """The form a base URL is recorded and compared in (no trailing slash)."""
    return base_url.rstrip("/")


def read(path: Path) -> Binding | None:
    """The binding recorded in a published warehouse (None for a new or unbound one)."""
    if not path.exists():
        return None
    con = connect_readonly(path)
    try:
        return read_open(con)
    finally:
        con.close()


def read_open(con: duckdb.DuckDBPyConnection) -> Binding | None:
    """The binding recorded in an open warehouse (None for a new or unbound one)."""
    rows = meta_values(con, KEYS)  # empty for a file with no ops schema yet
    if not rows.get("source.base_url") or not rows.get("source.account_id"):
        return None
    return Binding(
        base_url=rows["source.base_url"],
        account_id=rows["source.account_id"],
        currency=rows.get("source.currency"),
        timezone=rows.get("source.timezone"),
        bound_at=rows.get("source.bound_at"),
    )


def check(path: Path, base_url: str, account_id: str | None) -> Binding | None:
    """Refuse (SourceMismatch) when the warehouse is bound to another service or owner.

    `account_id` None checks the service only (before the owner is known).
    """
    return _refuse(path, read(path), base_url, account_id)


def check_open(
    con: duckdb.DuckDBPyConnection, path: Path, base_url: str, account_id: str | None
) -> Binding | None:
    """`check` on an open copy of the warehouse at `path` (a refresh's working copy, before it
    writes anything: the published file is not opened a second time)."""
    return _refuse(path, read_open(con), base_url, account_id)


def _refuse(
    path: Path, bound: Binding | None, base_url: str, account_id: str | None
) -> Binding | None:
    if bound is None:
        return None
    if bound.base_url != normalise(base_url) or (
        account_id is not None and bound.account_id != account_id
    ):
        raise SourceMismatch(path, bound, normalise(base_url), account_id)
    return bound


def set_aside(path: Path) -> Path | None:
    """Rebind: move the published warehouse to a timestamped backup; returns its new path."""
    if not path.exists():
        return None
    backup = path.with_name(f"{path.name}.bak-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}")
    shutil.move(str(path), str(backup))
    wal = path.with_name(path.name + ".wal")
    if wal.exists():
        shutil.move(str(wal), str(backup) + ".wal")
    return backup


def meta(base_url: str, account_id: str, currency: str, timezone: str) -> dict[str, str]:
    """The ops.meta rows a refresh records for its source."""
    return {
        "source.base_url": normalise(base_url),
        "source.account_id": account_id,
        "source.currency": currency,
        "source.timezone": timezone,
        "source.bound_at": dt.datetime.now(dt.UTC).isoformat(),
    }
