"""The service's contract as centsync knows it, per API surface: `centsync doctor`'s contract
section and the report `centsync doctor --contract-report FILE` writes for a bug report.

Each endpoint of the API document is a surface. Its state: `documented` (the API document fixes
what centsync reads of it), `learned` (a refresh learned its shape from the data, with the
evidence: what agreed with what), `pinned` (set by hand where the data cannot decide),
`unavailable` (its answer could not be read: the reason, and what doing without costs), or not
learned yet. What refreshes learn is in the warehouse's `ops.contract` (migration
010_contract.sql); a warehouse without it has learned nothing yet.

The report holds SHAPES only: key names, JSON types and nesting, of what was learned, of the
records the warehouse holds as the service sent them (raw.*) and of the answers a refresh could
not read (raw.unread_answers). Never a value, an amount, an id,
a name or the key: every leaf becomes its JSON type, every key name that is data (an id, a
date, a number, a name the warehouse holds, anything not shaped like a field name) becomes a
placeholder, and the words (evidence, reasons) lose their numbers, ids, dates, quoted text and
names.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import orjson

from centsync.transform.contract import UUID_PATTERN
from centsync.warehouse import reads

# Every endpoint of the API document (section 4), and what the document itself fixes of its
# answer ("" where it says "not shown").
SURFACES: tuple[tuple[str, str], ...] = (
    ("GET /v1/transactions", "data, total, page, pages; the Transaction fields"),
    ("GET /v1/transactions/summary", ""),
    ("GET /v1/transactions/{id}", ""),
    ("POST /v1/transactions", ""),
    ("PATCH /v1/transactions/{id}", ""),
    ("POST /v1/transactions/{id}/expense", ""),
    ("GET /v1/accounts", "a bare array of Account"),
    ("GET /v1/accounts/summary", ""),
    ("GET /v1/connections", ""),
    ("GET /v1/me", "the identity record"),
    ("GET /v1/analytics/net-worth", ""),
    ("GET /v1/analytics/spending", ""),
    ("GET /v1/settings", ""),
    ("GET /v1/sync/status", ""),
    ("POST /v1/sync", ""),
)
# The writes: their answers are not shown, but the transaction in them is found by its
# documented fields under any wrapper, or read back (extract/_writers.py): nothing to learn.
WRITES = {
    "POST /v1/transactions": "the created transaction: its documented fields, found under any "
    "wrapper and checked against what was sent, else read back from the list",
    "PATCH /v1/transactions/{id}": "the edited transaction: found by its id under any wrapper, "
    "else read back (GET /v1/transactions/{id})",
    "POST /v1/transactions/{id}/expense": "as PATCH: found by its id, else read back",
    "POST /v1/sync": "any 2xx asks for the sync (a bare 204 too; its body kept as sent); "
    "429 provider_quota_exhausted, the documented refusal, waits for a later run",
}
NOTHING_LEARNED = "no refresh has learned the service's shapes yet"
# The raw tables and the surface (and where in its answer) their records come from.
RAW_SURFACES = {
    "raw.transactions": ("GET /v1/transactions", "data[]"),
    "raw.accounts": ("GET /v1/accounts", "[]"),
    "raw.connections": ("GET /v1/connections", "record"),
    "raw.sync_status": ("GET /v1/sync/status", "record"),
    "raw.settings": ("GET /v1/settings", "body"),
}
SAMPLE = 200  # records per raw table whose shapes are merged

_TYPES = {"string", "integer", "number", "boolean", "null", "object", "array"}
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_UUID = re.compile(UUID_PATTERN.strip("^$"))
_DATE = re.compile(r"\d{4}-\d{2}(-\d{2})?([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?")
_NUMBER = re.compile(r"[-+]?\d[\d,._]*")
# quoted text; an apostrophe inside a word (the list's) opens no quote
_QUOTED = re.compile(r"\"[^\"]*\"|(?<!\w)'[^']*'(?!\w)|`[^`]*`")
_KEY = re.compile(r"pfd_\w+")
# a mapping's path (warehouse/migrations/010_contract.sql): names, `.`, a leading `-` (negated),
# `[]` (every element), `[field=value]` (the element whose field is value), `{type}`
_PATH_TOKEN = re.compile(r"\[[^\]]*\]|\{[^}]*\}|[.-]|[^.\[{-]+")


def centsync_version() -> str:
    try:
        return version("centsync")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"


class Redactor:
    """Turns what the warehouse holds into shapes and words without a value in them."""

    def __init__(self, words: Iterable[str], secrets: Iterable[str] = ()) -> None:
        self.words = {w.lower() for w in words if len(w.strip()) >= 3}
        self.secrets = [s for s in secrets if s]

    def key(self, name: str) -> str:
        """A key name, or the placeholder of what it is when it is data."""
        low = name.lower()
        if _UUID.fullmatch(name):
            return "<id>"
        if _DATE.fullmatch(name):
            return "<date>"
        if _NUMBER.fullmatch(name):
            return "<number>"
        if low in self.words or _KEY.search(name) or any(s in name for s in self.secrets):
            return "<name>"
        return name if _FIELD_NAME.fullmatch(name) else "<key>"

    def shape(self, value: Any) -> Any:
        """The JSON shape of a value: objects keep their (safe) key names, arrays the merged
        shape of their items, every leaf becomes its JSON type."""
        if isinstance(value, dict):
            return {self.key(str(k)): self.shape(v) for k, v in value.items()}
        if isinstance(value, list):
            return [merge(self.shape(v) for v in value[:SAMPLE])] if value else []
        if isinstance(value, bool):
            return "boolean"
        if isinstance(value, int):
            return "integer"
        if isinstance(value, float):
            return "number"
        if value is None:
            return "null"
        return "string"

    def stored_shape(self, value: Any) -> Any:
        """A shape as a refresh stored it: its type names kept, anything else reduced to its
        own JSON type (so a stored value can never pass through)."""
        if isinstance(value, str) and value in _TYPES:
            return value
        if isinstance(value, str) and "|" in value and set(value.split("|")) <= _TYPES:
            return value
        if isinstance(value, dict):
            return {self.key(str(k)): self.stored_shape(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.stored_shape(v) for v in value[:1]]
        return self.shape(value)

    def path(self, text: str) -> str:
        """A mapping's JSON path (``totals.n``, ``-data[].amount``, ``rows[type=income].sum``,
        ``by_type.{type}``) with each key name, and each value that picks an element, made
        safe as `key` makes them."""
        out = []
        for token in _PATH_TOKEN.findall(text):
            picked = re.fullmatch(r"\[([^=\]]+)=([^\]]*)\]", token)
            if picked:
                out.append(f"[{self.key(picked.group(1))}={self.key(picked.group(2))}]")
            elif token in (".", "-", "[]") or re.fullmatch(r"\[\d+\]|\{[a-z_]+\}", token):
                out.append(token)
            else:
                out.append(self.key(token))
        return "".join(out)

    def words_of(self, text: str | None) -> str | None:
        """Evidence or a reason, without numbers, ids, dates, quoted text, names or the key."""
        if not text:
            return text
        for secret in self.secrets:
            text = text.replace(secret, "<key>")
        text = _KEY.sub("<key>", text)
        text = _QUOTED.sub("<text>", text)
        text = _UUID.sub("<id>", text)
        text = _DATE.sub("<date>", text)
        text = _NUMBER.sub("<n>", text)
        low = text.lower()
        for word in sorted((w for w in self.words if w in low), key=len, reverse=True):
            text = re.sub(re.escape(word), "<name>", text, flags=re.IGNORECASE)
        return text


def merge(shapes: Iterable[Any]) -> Any:
    """One shape for many (the records of a table, the items of an array): objects by the
    union of their keys, differing leaves as ``a|b``."""
    out: Any = None
    for s in shapes:
        out = s if out is None else _merge2(out, s)
    return out if out is not None else "null"


def _merge2(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        return {
            k: _merge2(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k)) for k in {**a, **b}
        }
    if isinstance(a, list) and isinstance(b, list):
        return [merge(a + b)] if a or b else []
    if a == b:
        return a
    kinds = sorted(set(_kind(a).split("|")) | set(_kind(b).split("|")))
    return "|".join(kinds)


def _kind(shape: Any) -> str:
    return (
        "object" if isinstance(shape, dict) else "array" if isinstance(shape, list) else str(shape)
    )


def _load(text: str | None) -> Any:
    if not text:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def surfaces(con: Any | None) -> tuple[bool, list[dict[str, Any]]]:
    """(whether any refresh has learned a shape, each surface's row): its state and, in words,
    its evidence or reason, as `centsync doctor` shows them on this machine."""
    rows = reads.contract_rows(con) if con is not None else None
    stored = {r["surface"]: r for r in rows or []}
    out = []
    for surface, fixed in SURFACES:
        row = stored.pop(surface, None)
        out.append(_surface(surface, fixed, row))
    out.extend(_surface(surface, "", row) for surface, row in sorted(stored.items()))
    return rows is not None and bool(rows), out


def _surface(surface: str, fixed: str, row: dict[str, Any] | None) -> dict[str, Any]:
    if row is not None:
        state = str(row["state"])
        detail = row["reason"] if state == "unavailable" else row["evidence"]
        return {
            "surface": surface,
            "state": state,
            "detail": detail or "",
            "mapping": _load(row["mapping"]),
            "shape": _load(row["shape"]),
            "evidence": row["evidence"],
            "reason": row["reason"],
        }
    if fixed:
        state, detail = "documented", f"the API document fixes it: {fixed}"
    elif surface in WRITES:
        state, detail = "documented", WRITES[surface]
    else:
        state, detail = "not learned yet", "no refresh has learned its shape yet"
    return {"surface": surface, "state": state, "detail": detail}


def report(con: Any | None, redactor: Redactor) -> dict[str, Any]:
    """The contract report: centsync's version, each surface's state and the shapes seen."""
    learned, rows = surfaces(con)
    seen: dict[str, dict[str, Any]] = {}
    if con is not None:
        for table, (surface, where) in RAW_SURFACES.items():
            docs = [
                d
                for d in (_load(t) for t in reads.raw_records(con, table, SAMPLE))
                if d is not None
            ]
            if docs:
                seen.setdefault(surface, {})[where] = merge(redactor.shape(d) for d in docs)
        unread: dict[str, list[Any]] = {}
        for surface, body in reads.unread_answers(con, 5):
            unread.setdefault(surface, []).append(redactor.shape(_load(body)))
        for surface, shapes in unread.items():
            seen.setdefault(surface, {})["unread answer"] = merge(shapes)
    out = []
    for r in rows:
        entry: dict[str, Any] = {"surface": r["surface"], "state": r["state"]}
        if r.get("mapping") is not None:
            mapping = r["mapping"] if isinstance(r["mapping"], dict) else {}
            entry["mapping"] = {
                redactor.key(str(k)): redactor.path(str(v)) for k, v in mapping.items()
            }
        if r.get("shape") is not None:
            entry["shape_learned"] = redactor.stored_shape(r["shape"])
        if r["surface"] in seen:
            entry["shape_seen"] = seen[r["surface"]]
        for name in ("evidence", "reason"):
            if r.get(name):
                entry[name] = redactor.words_of(r[name])
        out.append(entry)
    return {
        "report": "centsync contract report: the shapes of the service's answers, never a value",
        "centsync_version": centsync_version(),
        "written_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "learned": learned,
        "note": "" if learned else NOTHING_LEARNED,
        "surfaces": out,
    }


def write_report(path: Path, con: Any | None, secrets: Iterable[str] = ()) -> Path:
    """Write the contract report (JSON) to `path`; the names the warehouse holds and `secrets`
    (the key) are what it checks its key names and words against."""
    words = reads.known_words(con) if con is not None else set()
    doc = report(con, Redactor(words, secrets))
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path
