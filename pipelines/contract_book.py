"""The contract as this service speaks it: how each "not shown" answer is read (issue 42).

The API document fixes only part of the service (the transactions list, the Transaction and
Account fields, the accounts array, `/v1/me`). Every other answer is read through a mapping
(role -> JSON path) that is the contract's own shape when it fits, learned from the data when
it does not (transform/shapes.py: each figure must equal what the documented surface already
says), pinned in the contract file where the data cannot decide, or unavailable: then the
refresh does without it and says what that costs. What is known lives in `ops.contract`, is
re-checked on every answer, and re-learned when the service changes its shape.

The book is handed to the extract client as its `reading` (extract/_client.py): an answer
whose surface is not trusted yet (not confirmed by the data) is not read, so nothing is ever
proven with a guess.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from centsync.extract import (
    ConfigurationError,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    UnknownClientError,
)
from centsync.transform import shapes
from centsync.transform import shapes_rows as rows

SURFACES = (
    shapes.SETTINGS,
    shapes.NET_WORTH,
    shapes.ACCOUNTS_SUMMARY,
    shapes.TRANSACTIONS_SUMMARY,
    shapes.SPENDING,
    shapes.CONNECTIONS,
    shapes.SYNC_STATUS,
)
# What doing without each answer costs (ops.contract.reason, the refresh's summary).
WITHOUT: dict[str, str] = {
    shapes.SETTINGS: "the time zone is the last refresh's (else UTC), so a change of time "
    "zone is not noticed; the currency is the accounts'",
    shapes.NET_WORTH: "today is the service's Date header (else this machine's clock); net "
    "worth is not reconciled",
    shapes.ACCOUNTS_SUMMARY: "account totals are not reconciled",
    shapes.TRANSACTIONS_SUMMARY: "ranges are counted with the list's total at limit=1 "
    "(2 requests a first sync) and re-read instead of proven (their pages instead of 3 "
    "requests a year); totals are not reconciled",
    shapes.SPENDING: "years are re-read instead of proven by fingerprints (their pages "
    "instead of 3 requests a year); spending is not reconciled",
    shapes.CONNECTIONS: "connections land as the raw answer only",
    shapes.SYNC_STATUS: "sync status lands as the raw answer only",
}
TRUSTED = ("documented", "learned", "pinned")
LISTS = (shapes.CONNECTIONS, shapes.SYNC_STATUS)
# answers of figures the data confirms (a time zone is an IANA name or nothing)
FIGURES = (
    shapes.NET_WORTH,
    shapes.ACCOUNTS_SUMMARY,
    shapes.TRANSACTIONS_SUMMARY,
    shapes.SPENDING,
)


@dataclass(frozen=True)
class Unanswered:
    """A "not shown" surface the service refused to answer (404, 405, a 4xx): not here."""

    reason: str


def load_pins(path: Path | None) -> dict[str, dict[str, str]]:
    """The contract file (TOML): `[surfaces."GET /v1/settings"] timezone = "prefs.tz"`.
    None or a missing file: no pins. A bad file is a ConfigurationError naming the fix."""
    if path is None or not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"the contract file {path} is not TOML ({exc})") from None
    found = data.get("surfaces", {})
    pins: dict[str, dict[str, str]] = {}
    for surface, table in found.items() if isinstance(found, dict) else ():
        if surface not in SURFACES:
            raise ConfigurationError(
                f"the contract file {path} names {surface!r}, not a surface centsync reads; "
                f"use one of: {', '.join(SURFACES)}"
            )
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise ConfigurationError(
                f"the contract file {path}: [surfaces.{surface!r}] must map roles to JSON "
                'paths as strings, e.g. timezone = "prefs.tz"'
            )
        pins[surface] = dict(table)
    return pins


@dataclass
class ContractBook:
    """Every surface's row of ops.contract, read and updated during one refresh."""

    stored: dict[str, dict[str, Any]]
    pins: dict[str, dict[str, str]] = field(default_factory=dict)
    number: int = 0  # this refresh's number (ops.contract.checked_refresh)
    # what the summary says: shapes that changed, surfaces done without
    notes: list[str] = field(default_factory=list)
    # answers that could not be read: (surface, raw, reason), landed in raw.unread_answers
    unread: list[tuple[str, str, str]] = field(default_factory=list)
    # the last body seen per surface (and group_by), for learning once the facts are known
    seen: dict[tuple[str, str | None], Any] = field(default_factory=dict)
    # the connections read this refresh, by id (the facts a sync status answer is learned from)
    connections: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rows = {s: dict(r) for s, r in self.stored.items()}
        for surface, mapping in self.pins.items():
            row = self.rows.setdefault(surface, {"surface": surface})
            if row.get("state") != "pinned" or row.get("mapping") != mapping:
                row.update(
                    state="pinned",
                    mapping=mapping,
                    evidence="pinned in the contract file",
                    reason=None,
                    learned_refresh=self.number,
                )

    # ---- what is known --------------------------------------------------------------------------
    def state(self, surface: str) -> str | None:
        return self.rows.get(surface, {}).get("state")

    def trusted(self, surface: str) -> bool:
        """Confirmed by the data (or pinned): its answers may prove and be reconciled."""
        return self.state(surface) in TRUSTED and bool(self.rows[surface].get("mapping"))

    def complete(self, surface: str) -> bool:
        """Trusted and giving every figure a proof needs (shapes.FULL): ranges can be proven
        with it, not only reconciled."""
        mapping = self.mapping(surface) or {}
        return self.trusted(surface) and set(shapes.FULL.get(surface, ())) <= set(mapping)

    def mapping(self, surface: str) -> dict[str, str] | None:
        return self.rows.get(surface, {}).get("mapping") if self.trusted(surface) else None

    def unavailable(self) -> dict[str, str]:
        """Surfaces done without, with why and what it costs."""
        return {
            s: str(r.get("reason") or "")
            for s, r in sorted(self.rows.items())
            if r.get("state") == "unavailable"
        }

    # ---- the client's reading ---------------------------------------------------------------------
    def reading(self, surface: str, doc: Any, group_by: str | None) -> Any:
        """The extract client's hook: `doc` in the contract's shape, or None (not readable)."""
        self.seen[(surface, group_by)] = doc
        mapping = self.mapping(surface)
        if surface in LISTS and (mapping is None or rows.resolves(surface, doc, mapping)):
            # a list answer needs no figure to be learned: the one list of objects
            got = rows.learn_records(surface, doc, self.connections)
            mapping = self.settle(surface, got, doc, orjson.dumps(doc).decode())
        if mapping is None or (surface in shapes.FULL and not self.complete(surface)):
            return None  # not learned yet, or too little to prove with: the refresh re-reads
        problem = rows.resolves(surface, doc, mapping)
        if problem is not None:
            self._changed(surface, problem)
            return None
        self.rows[surface]["checked_refresh"] = self.number
        read = rows.canonical(surface, doc, mapping, group_by=group_by)
        if surface == shapes.CONNECTIONS:  # what a sync status record must agree with
            self.connections = {str(r.get("id")): r for r in read["data"]}
        return read

    def _changed(self, surface: str, problem: str) -> None:
        row = self.rows[surface]
        if row.get("state") == "pinned":
            self.notes.append(f"{surface}: the pinned mapping no longer fits ({problem})")
        else:
            self.notes.append(f"{surface}: the service changed its shape ({problem}); re-learning")
        row.update(state="changed", reason=f"shape changed: {problem}")

    # ---- learning ---------------------------------------------------------------------------------
    def settle(
        self, surface: str, got: shapes.Learned | shapes.Refused, doc: Any, raw: str
    ) -> dict[str, str] | None:
        """Record what the data said of `surface`'s answer `doc`; returns the mapping to read
        it with, or None (unavailable: the raw answer is kept, the refresh goes on without)."""
        row = self.rows.setdefault(surface, {"surface": surface})
        if isinstance(doc, Unanswered):
            row["checked_refresh"] = self.number
            self._unavailable(surface, doc.reason, raw)
            return None
        row["shape"] = shapes.shape_of(doc)
        row["checked_refresh"] = self.number
        if row.get("state") == "pinned":
            problem = rows.resolves(surface, doc, row["mapping"])
            if problem is None:
                return dict(row["mapping"])
            self._unavailable(surface, f"the pinned mapping does not fit: {problem}", raw)
            return None
        if isinstance(got, shapes.Learned):
            before = row.get("mapping") or {}
            mapping = dict(got.mapping)
            agree = all(mapping.get(k, v) == v for k, v in before.items())
            if agree and row.get("state") in TRUSTED:
                # the same fields: roles this answer could not decide keep what was learned
                merged = {**before, **mapping}
                if rows.resolves(surface, doc, merged) is None:
                    mapping = merged
            elif before and row.get("state") in (*TRUSTED, "changed"):
                self.notes.append(f"{surface}: re-learned ({got.evidence})")
            state = "documented" if _is_documented(surface, mapping) else "learned"
            if before != mapping or row.get("state") != state:
                row["learned_refresh"] = self.number
                row["evidence"] = got.evidence
            row.update(state=state, mapping=mapping, reason=None)
            return dict(mapping)
        kept = row.get("mapping")
        if row.get("state") in TRUSTED and kept and rows.resolves(surface, doc, kept) is None:
            # the figures disagree with the rows (the service may differ: reconciliation's
            # business) but the shape is the one learned: keep reading it
            return dict(kept)
        documented = shapes.DOCUMENTED[surface]
        if surface in FIGURES and kept is None and rows.resolves(surface, doc, documented) is None:
            # the contract's own names and types, every one: its shape, whose figures the
            # data did not confirm this time (rows rejected or changed during the read):
            # read as documented, and the differences are reconciliation's to explain
            row.update(
                state="documented",
                mapping=dict(documented),
                evidence=f"the contract's names and types; not confirmed by the data ({got.reason})",
                reason=None,
                learned_refresh=self.number,
            )
            return dict(documented)
        self._unavailable(surface, got.reason, raw)
        return None

    def _unavailable(self, surface: str, why: str, raw: str) -> None:
        row = self.rows.setdefault(surface, {"surface": surface})
        reason = f"{why}; without it: {WITHOUT[surface]}"
        if row.get("state") != "unavailable":
            self.notes.append(f"{surface}: could not be read ({why}); {WITHOUT[surface]}")
        row.update(state="unavailable", mapping=None, evidence=None, reason=reason)
        self.unread.append((surface, raw, reason))
        return None

    def read(
        self, surface: str, doc: Any, mapping: Mapping[str, str] | None, group_by: str | None = None
    ) -> dict[str, Any] | None:
        """`doc` in the contract's shape through `mapping` (None: not readable)."""
        if mapping is None:
            return None
        return rows.canonical(surface, doc, mapping, group_by=group_by)

    def records(self) -> list[dict[str, Any]]:
        """The rows to save in ops.contract."""
        out = []
        for surface in SURFACES:
            row = self.rows.get(surface)
            if row is None or row.get("state") is None:
                continue
            state = row["state"] if row["state"] != "changed" else "unavailable"
            out.append({**row, "surface": surface, "state": state})
        return out


def _is_documented(surface: str, mapping: Mapping[str, str]) -> bool:
    documented = shapes.DOCUMENTED[surface]
    return all(documented.get(role) == path for role, path in mapping.items())


# What a surface the API document leaves "not shown" may answer that only means "not here":
# done without, like an answer that cannot be read (a wait past the budget, an outage or a
# refused key still stop the refresh: the documented surface would meet them too).
NOT_HERE = (NotFound, MethodNotAllowed, InvalidRequest, UnknownClientError)


def ask(path: str, params: dict[str, Any] | None = None) -> Any:
    """A call for `client.gather`: the answer as sent (parsed JSON, text), or `Unanswered`
    with its text when the service refuses the request for good."""

    async def call(a: Any) -> tuple[Any, str]:
        try:
            return await a.body(path, params)
        except NOT_HERE as exc:
            why = f"the service refused it: {exc}"
            return Unanswered(why), orjson.dumps({"refused": str(exc)}).decode()

    return call


def read_as_learned(client: Any, warehouse: Path) -> ContractBook:
    """Let `client` (an `ApiClient`) read the "not shown" answers through the contract the
    refreshes learned and kept in `warehouse` (ops.contract), outside a refresh (the bank-sync
    asset and sensor); a list answer is learned on the spot where no refresh has yet."""
    from centsync.warehouse.contract import contract_rows
    from centsync.warehouse.paths import connect_readonly

    stored: dict[str, dict[str, Any]] = {}
    if warehouse.exists():
        con = connect_readonly(warehouse)
        try:
            stored = contract_rows(con)
        finally:
            con.close()
    book = ContractBook(stored)
    client.async_client.reading = book.reading
    return book
