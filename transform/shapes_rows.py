"""Learn the rows of a list answer (spending) and read any learned answer in the contract's shape.

The second half of the learner (transform/shapes.py holds the paths, the shapes and the object
surfaces): the spending rows are the list whose key field holds exactly the keys known locally
and whose amount field equals the local sums, under whatever names and wrappers. `canonical`
turns a body read through a learned mapping into the contract's shape, so every reader
downstream stays as it is; `resolves` re-checks a mapping on every answer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from centsync.transform.contract import UUID_RE
from centsync.transform.shapes import (
    ACCOUNTS_SUMMARY,
    CONNECTIONS,
    MISSING,
    MONTH_KEY,
    SPENDING,
    SYNC_STATUS,
    Learned,
    Refused,
    at,
    by_type_of,
    is_int,
    join_path,
    leaves,
)


def _keyed(node: Any) -> bool:
    """An object of objects keyed by UUIDs (records keyed by their id)."""
    return (
        isinstance(node, dict)
        and bool(node)
        and all(isinstance(v, dict) and UUID_RE.match(str(k)) for k, v in node.items())
    )


def record_lists(body: Any) -> list[tuple[str, list[Any]]]:
    """Lists of objects at the top of the body or under up to two wrappers: (path, records).
    An object whose values are all objects (keyed by id) counts too, as `path.*`."""
    out: list[tuple[str, list[Any]]] = []

    def walk(node: Any, path: str, depth: int) -> None:
        if isinstance(node, list):
            if all(isinstance(x, dict) for x in node):
                out.append((path, node))
        elif _keyed(node):
            out.append((join_path(path, "*"), [{**v, "*": k} for k, v in node.items()]))
        elif isinstance(node, dict) and depth > 0:
            for key, value in node.items():
                walk(value, join_path(path, str(key)), depth - 1)

    walk(body, "", 2)
    return out


# A record's id in the contract's shape, and the fields a record cannot land without.
ID_FIELD = {CONNECTIONS: "id", SYNC_STATUS: "connection_id"}
NEEDED = ("provider", "status")


def learn_records(
    surface: str, body: Any, known: Mapping[str, Mapping[str, Any]] | None = None
) -> Learned | Refused:
    """A small list answer (connections, sync status): the one non-empty list of objects at the
    top of the body or under up to two wrappers (or an object keyed by id), and its id field:
    the one field whose values are all UUIDs. A record's provider and status are the fields of
    those names, else (`known`: the connections read, by id) the one field equal to the
    connection's own for every record. Records without them cannot land: refused."""
    found = record_lists(body)
    full = [f for f in found if f[1]] or found
    if len(full) != 1:
        if not full:
            return Refused("no list of objects in the answer")
        return Refused("several lists of objects: " + ", ".join(p or "the body" for p, _ in full))
    path, records = full[0]
    mapping = {"rows": path}
    words = [f"rows = {path or 'the body'}: the one list of objects"]
    if not records:
        return Learned(mapping, words[0])
    ids = [
        n
        for n in records[0]
        if all(isinstance(r.get(n), str) and UUID_RE.match(r[n]) for r in records)
    ]
    if len(ids) != 1:
        return Refused(f"not one id field (values all UUIDs): {ids or 'none'}")
    mapping["id"] = ids[0]
    words.append(f"id = {ids[0]}: the one field of UUIDs")
    for need in NEEDED:
        if all(isinstance(r.get(need), str) for r in records):
            continue
        same = [
            n
            for n in records[0]
            if known
            and all(
                r.get(n) is not None and known.get(r[ids[0]], {}).get(need) == r.get(n)
                for r in records
            )
        ]
        if len(same) != 1:
            return Refused(f"records without {need}")
        mapping[need] = same[0]
        words.append(f"{need} = {same[0]}: equals each connection's {need}")
    if surface == SYNC_STATUS:
        words += _sync_times(records, mapping)
    return Learned(mapping, "; ".join(words))


def _instant_value(value: Any) -> float | None:
    """An instant as seconds since the epoch: an ISO 8601 text, or a number of seconds (or
    milliseconds) since the epoch; None for anything else."""
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    if isinstance(value, int) and not isinstance(value, bool):
        if 10**9 <= value < 10**11:
            return float(value)
        if 10**12 <= value < 10**14:
            return value / 1000
    return None


def _sync_times(records: list[dict[str, Any]], mapping: dict[str, str]) -> list[str]:
    """A sync status's last and next sync: its two instant fields (ISO text or epoch numbers),
    the earlier of each record's pair the last sync, the later when it is next due. Any other
    number of instant fields, or an order that is not the same for every record: not mapped."""
    fields = [
        n
        for n in records[0]
        if all(r.get(n) is None or _instant_value(r.get(n)) is not None for r in records)
        and any(r.get(n) is not None for r in records)
    ]
    if len(fields) != 2:
        return []
    a, b = fields
    pairs = [
        (_instant_value(r[a]), _instant_value(r[b]))
        for r in records
        if r.get(a) is not None and r.get(b) is not None
    ]
    known = [(x, y) for x, y in pairs if x is not None and y is not None and x != y]
    if not known or len({x < y for x, y in known}) != 1:
        return []
    last, due = (a, b) if known[0][0] < known[0][1] else (b, a)
    found = {"last_synced_at": last, "next_sync_at": due}
    # a field already named as its role and sent as ISO text needs no mapping (the contract's)
    iso = {n for n in (a, b) if all(r.get(n) is None or isinstance(r[n], str) for r in records)}
    found = {role: n for role, n in found.items() if n != role or n not in iso}
    mapping |= found
    return [
        f"{role} = {n}: the {'earlier' if role[0] == 'l' else 'later'} instant"
        for role, n in found.items()
    ]


def month_of(value: Any) -> Any:
    """`2025-03` for `2025-03` or `2025-03-01` (other values unchanged; "" is None)."""
    if value == "":
        return None
    if isinstance(value, str):
        match = MONTH_KEY.match(value)
        if match is not None:
            return f"{match[1]}-{match[2]}"
    return value


def same_key(value: Any) -> Any:
    """A key as sent ("" and null both mean no key: the uncategorised row)."""
    return None if value == "" else value


def merchant_of(value: Any) -> Any:
    """The contract's merchant key of a text: trimmed, lower-cased, whitespace collapsed."""
    if isinstance(value, str):
        return " ".join(value.split()).lower() or None
    return value


# How a spending key is read, per grouping: a month as `YYYY-MM`, a merchant by the contract's
# rule (transform/spending.py merchant_key), a category as sent ("" read as null).
KEY_OF: dict[str, Callable[[Any], Any]] = {"month": month_of, "merchant": merchant_of}


def learn_spending(
    body: Any, known: Mapping[Any, tuple[int, int]], key_of: Callable[[Any], Any] = same_key
) -> Learned | Refused:
    """Spending rows: the list whose objects' key field holds exactly the known keys (through
    `key_of`, e.g. a month key `2025-03-01` read as `2025-03`) and whose amount field equals the
    rows' sums per key; a count field and a total when they equal the counts and the sum."""
    if not known:
        return Refused("no local spending in the range to learn from")
    best: list[Learned] = []
    reasons: list[str] = []
    for path, records in record_lists(body):
        if len(records) != len(known):
            reasons.append(f"{path or 'the body'}: {len(records)} rows, {len(known)} expected")
            continue
        got = _learn_rows(body, path, records, known, key_of)
        if isinstance(got, Learned):
            best.append(got)
        else:
            reasons.append(f"{path or 'the body'}: {got.reason}")
    if len(best) == 1:
        return best[0]
    if len(best) > 1:
        return Refused(
            "several lists match the spending rows: " + ", ".join(b.mapping["rows"] for b in best)
        )
    return Refused("no list of rows matches the spending: " + "; ".join(reasons or ["no list"]))


def _learn_rows(
    body: Any,
    path: str,
    records: list[Any],
    known: Mapping[Any, tuple[int, int]],
    key_of: Callable[[Any], Any],
) -> Learned | Refused:
    names = sorted({k for r in records for k in r})
    keys = [
        n
        for n in names
        if all(not isinstance(r.get(n), (dict, list)) for r in records)
        and {key_of(r.get(n)) for r in records} == set(known)
        and len({key_of(r.get(n)) for r in records}) == len(records)
    ]
    if len(keys) != 1:
        return Refused("no single field holds the keys" if not keys else f"keys ambiguous: {keys}")
    key = keys[0]

    def matching(index: int, allow_negation: bool) -> list[str]:
        out = []
        for n in names:
            if n == key:
                continue
            values = [r.get(n) for r in records]
            wants = [known[key_of(r.get(key))][index] for r in records]
            if all(is_int(v) for v in values):
                if values == wants:
                    out.append(n)
                elif allow_negation and [-v for v in values] == wants and any(wants):
                    out.append("-" + n)
        return out

    amounts, counts = matching(0, True), matching(1, False)
    counts = [c for c in counts if c not in amounts]
    amounts = [a for a in amounts if a not in counts] if len(amounts) > 1 else amounts
    if len(amounts) != 1:
        return Refused(
            "no single field holds the amounts" if not amounts else f"amounts ambiguous: {amounts}"
        )
    mapping = {"rows": path, "key": key, "amount": amounts[0]}
    words = [
        f"rows = {path or 'the body'} ({len(records)} rows, the local keys)",
        f"key = {key}",
        f"amount = {amounts[0].lstrip('-')}{' (negated)' if amounts[0].startswith('-') else ''} equals the rows' sums",
    ]
    if len(counts) == 1:
        mapping["count"] = counts[0]
        words.append(f"count = {counts[0]} equals the rows' counts")
    labels = [
        n
        for n in names
        if n not in (key, amounts[0].lstrip("-"), *counts)
        and all(isinstance(r.get(n), str) for r in records)
        # a tag the same on every row (`"object": "spending_row"`) names no row
        and (len(records) == 1 or len({r.get(n) for r in records}) > 1)
    ]
    if len(labels) == 1:
        mapping["label"] = labels[0]
        words.append(f"label = {labels[0]}: the one other text of each row")
    total = sum(a for a, _ in known.values())
    outside = [
        p
        for p, v in leaves(body)
        if is_int(v) and not p.startswith(path + "[") and v in (total, -total)
    ]
    outside = [p if at(body, p) == total else "-" + p for p in outside]
    if len(outside) == 1:
        mapping["total"] = outside[0]
        words.append(f"total = {outside[0].lstrip('-')} equals the sum")
    return Learned(mapping, "; ".join(words))


# ---- re-checking and reading with a mapping ----------------------------------------------------
def _records(surface: str, body: Any, mapping: Mapping[str, str]) -> list[dict[str, Any]]:
    path = mapping.get("rows", "")
    found = dict(record_lists(body)).get(path, [])
    out = []
    for r in found:
        rec = {k: v for k, v in r.items() if k != "*"}
        if "id" in mapping:
            rec[ID_FIELD[surface]] = r.get(mapping["id"])
        for need in NEEDED:
            if need in mapping:
                rec[need] = r.get(mapping[need])
        for when in ("last_synced_at", "next_sync_at"):
            if when in mapping:
                seconds = _instant_value(r.get(mapping[when]))
                rec[when] = (
                    None
                    if seconds is None
                    else dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds")
                )
        out.append(rec)
    return out


def resolves(surface: str, body: Any, mapping: Mapping[str, str]) -> str | None:
    """None when every mapped role is found in the body with a plausible type, else what is
    missing (the service changed its shape)."""
    if surface in (CONNECTIONS, SYNC_STATUS):
        found = dict(record_lists(body))
        if mapping.get("rows", "") not in found:
            return f"no list at {mapping.get('rows') or 'the body'}"
        key = mapping.get("id")
        if key and any(key not in r for r in found[mapping.get("rows", "")]):
            return f"records without {key}"
        return None
    if surface in (SPENDING, CONNECTIONS, SYNC_STATUS):
        rows = at(body, mapping.get("rows", ""), MISSING)
        if not isinstance(rows, list):
            return f"no list at {mapping.get('rows') or 'the body'}"
        if surface == SPENDING and rows:
            keys = [p for role, p in mapping.items() if role == "key" or role.startswith("key@")]
            for r in rows:
                if (
                    not isinstance(r, dict)
                    or at(r, mapping["amount"].lstrip("-"), MISSING) is MISSING
                ):
                    return f"rows without {mapping['amount'].lstrip('-')}"
                if all(at(r, p, MISSING) is MISSING for p in keys):
                    return f"rows without {' or '.join(keys)}"
        return None
    if not isinstance(body, dict):
        return "the answer is not a JSON object"
    for role, path in mapping.items():
        if role in ("by_type", "count_by_type"):
            continue
        value = at(body, path, MISSING)
        if value is MISSING:
            return f"{role} not found at {path}"
        if role in ("timezone", "currency", "as_of"):
            if not isinstance(value, str):
                return f"{role} at {path} is not a string"
        elif not is_int(value):
            return f"{role} at {path} is not an integer"
    return None


def canonical(
    surface: str, body: Any, mapping: Mapping[str, str], *, group_by: str | None = None
) -> dict[str, Any]:
    """The body in the contract's shape (docs/api-contract.md), read through `mapping`: what
    every reader downstream already understands. Roles not mapped are absent (None)."""
    if surface == SPENDING:
        rows = at(body, mapping["rows"], []) or []
        out_rows = []
        key_of = KEY_OF.get(group_by or "", same_key)
        key_path = mapping.get(f"key@{group_by}", mapping["key"])
        for r in rows:
            key = key_of(at(r, key_path))
            out_rows.append(
                {
                    "key": key,
                    "label": at(r, mapping["label"]) if "label" in mapping else None,
                    "amount": at(r, mapping["amount"]),
                    "count": at(r, mapping["count"]) if "count" in mapping else None,
                }
            )
        total = at(body, mapping["total"]) if "total" in mapping else None
        if total is None:
            total = sum(r["amount"] for r in out_rows if is_int(r["amount"]))
        return {"data": out_rows, "total": total}
    if surface in (CONNECTIONS, SYNC_STATUS):
        return {"data": _records(surface, body, mapping)}
    out = {role: at(body, path) for role, path in mapping.items() if role != "by_type"}
    out.pop("count_by_type", None)
    if surface == ACCOUNTS_SUMMARY:
        out["by_type"] = by_type_of(body, mapping["by_type"]) if "by_type" in mapping else None
        if "count" not in mapping and "count_by_type" in mapping:
            out["count"] = sum(by_type_of(body, mapping["count_by_type"]).values())
    return out
