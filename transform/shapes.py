"""Learn the shape of an answer the API document leaves "not shown", from the data.

Pure: JSON bodies and facts centsync already knows from the documented surface in, a mapping
role -> JSON path out, with the evidence in words (or a refusal with its reason). Field names
may be anything; a value is matched to what it must equal (a count to the list's `total`, a sum
to the rows' sums, a time zone to an IANA name), never guessed from its name. Ambiguity is
refused, not guessed: a role two fields could fill is left out (optional) or refuses (required).

Paths: keys joined with dots (`totals.n`); `[]` for every element of a list (`data[].amount`);
`[field=value]` for the element of a list whose `field` is `value` (`sums[type=expense].cents`);
a leading `-` means the value is the negation (a spending total sent as a positive magnitude).
The empty path is the body itself. See docs/api-contract.md ("Learned from the data").
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from centsync.transform.calendar import iana_zones
from centsync.transform.contract import UUID_RE

SETTINGS = "GET /v1/settings"
NET_WORTH = "GET /v1/analytics/net-worth"
ACCOUNTS_SUMMARY = "GET /v1/accounts/summary"
TRANSACTIONS_SUMMARY = "GET /v1/transactions/summary"
SPENDING = "GET /v1/analytics/spending"
CONNECTIONS = "GET /v1/connections"
SYNC_STATUS = "GET /v1/sync/status"

# The contract's answer (docs/api-contract.md) as one learnable shape: the fast path.
DOCUMENTED: dict[str, dict[str, str]] = {
    SETTINGS: {"timezone": "timezone", "currency": "currency"},
    NET_WORTH: {
        "total": "total",
        "assets": "assets",
        "liabilities": "liabilities",
        "as_of": "as_of",
        "currency": "currency",
    },
    ACCOUNTS_SUMMARY: {
        "net_worth": "net_worth",
        "assets": "assets",
        "liabilities": "liabilities",
        "count": "count",
        "by_type": "by_type.{type}",
        "currency": "currency",
    },
    TRANSACTIONS_SUMMARY: {
        "count": "count",
        "income": "income",
        "expense": "expense",
        "transfer": "transfer",
        "net": "net",
    },
    SPENDING: {
        "rows": "data",
        "key": "key",
        "amount": "amount",
        "count": "count",
        "label": "label",
        "total": "total",
    },
    CONNECTIONS: {"rows": "data", "id": "id"},
    SYNC_STATUS: {"rows": "data", "id": "connection_id"},
}
# Roles a surface cannot be read without (the others are evidence when present; an account
# totals answer needs its total or its per-type sums).
REQUIRED: dict[str, tuple[str, ...]] = {
    SETTINGS: ("timezone",),
    NET_WORTH: ("total",),
    ACCOUNTS_SUMMARY: (),
    TRANSACTIONS_SUMMARY: ("count",),
    SPENDING: ("rows", "key", "amount"),
    CONNECTIONS: ("rows",),
    SYNC_STATUS: ("rows",),
}
# Roles an answer must give for the refresh to prove ranges with it (fingerprints): without
# them it is still landed and reconciled for what it gives, but ranges are re-read.
FULL: dict[str, tuple[str, ...]] = {
    TRANSACTIONS_SUMMARY: ("count", "income", "expense", "transfer"),
    SPENDING: ("rows", "key", "amount", "count"),
}

MISSING = object()
_SELECT = re.compile(r"^(?P<name>[^\[]*)\[(?P<field>[^=\]]+)=(?P<value>[^\]]*)\]$")
MONTH_KEY = re.compile(r"^(\d{4})-(\d{2})(?:-\d{2})?$")
_ISO_INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


@dataclass(frozen=True)
class Learned:
    """What one body was found to say: role -> path, and why (the evidence, in words)."""

    mapping: dict[str, str]
    evidence: str
    undecided: tuple[str, ...] = ()  # optional roles the data could not decide


@dataclass(frozen=True)
class Refused:
    """A body the learner could not read, and why."""

    reason: str
    candidates: dict[str, list[str]] = field(default_factory=dict)


# ---- reading a path ---------------------------------------------------------------------------
def _step(node: Any, part: str) -> Any:
    match = _SELECT.match(part)
    if match is not None:
        inner = node if match["name"] == "" else _step(node, match["name"])
        if not isinstance(inner, list):
            return MISSING
        hits = [
            x for x in inner if isinstance(x, dict) and str(x.get(match["field"])) == match["value"]
        ]
        return hits[0] if len(hits) == 1 else MISSING
    if isinstance(node, dict):
        return node.get(part, MISSING)
    return MISSING


def at(body: Any, path: str, default: Any = None) -> Any:
    """The value at `path` (a leading `-` negates a number), or `default` when absent."""
    negate = path.startswith("-")
    node = body
    for part in _split(path.lstrip("-")):
        node = _step(node, part)
        if node is MISSING:
            return default
    if negate:
        return -node if is_int(node) else default
    return node


def _split(path: str) -> list[str]:
    return [] if path == "" else path.split(".")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def join_path(prefix: str, part: str) -> str:
    return part if prefix == "" else f"{prefix}.{part}"


# ---- the shape of a body (names, types, nesting; never values) --------------------------------
_VALUE_KEYS = {"uuid": "<uuid>", "date": "<date>", "number": "<number>"}
_DATE_KEY = re.compile(r"^\d{4}-\d{2}(-\d{2})?")


def _key_kind(key: str) -> str:
    if UUID_RE.match(key):
        return "uuid"
    if _DATE_KEY.match(key):
        return "date"
    if key.lstrip("-").isdigit():
        return "number"
    return "name"


def shape_of(body: Any, depth: int = 6) -> Any:
    """Key names, JSON types and nesting of a body, never a value (what a bug report may carry)."""
    if isinstance(body, dict):
        if depth == 0:
            return "object"
        out: dict[str, Any] = {}
        for k, v in sorted(body.items()):
            # a key that is a value (an id, a date, a number: an object keyed by them) is
            # shown by its kind, its entries merged, never itself
            name = _VALUE_KEYS.get(_key_kind(str(k)), str(k))
            out.setdefault(name, shape_of(v, depth - 1))
        return out
    if isinstance(body, list):
        merged: dict[str, Any] = {}
        kinds: set[str] = set()
        for item in body:
            got = shape_of(item, depth - 1)
            if isinstance(got, dict):
                for k, v in got.items():
                    merged.setdefault(k, v)
            else:
                kinds.add(str(got))
        if merged:
            return [merged]
        return [sorted(kinds)[0]] if len(kinds) == 1 else ([] if not kinds else [sorted(kinds)])
    if body is None:
        return "null"
    if isinstance(body, bool):
        return "boolean"
    if isinstance(body, int):
        return "integer"
    if isinstance(body, float):
        return "number"
    return "string"


# ---- leaves -------------------------------------------------------------------------------------
def _discriminator(items: list[Any]) -> str | None:
    """The string field whose values tell a list's objects apart (for `[field=value]` paths):
    the first such field in the answer's own order (a name before its value)."""
    if not items or not all(isinstance(x, dict) for x in items):
        return None
    shared = [n for n in items[0] if all(n in x for x in items[1:])]
    for n in shared:
        if all(isinstance(x[n], str) for x in items) and len({x[n] for x in items}) == len(items):
            return n
    return None


def leaves(body: Any, prefix: str = "", depth: int = 4) -> Iterator[tuple[str, Any]]:
    """(path, value) of every scalar reachable without `[]`: through objects and through lists
    of objects told apart by one string field (`sums[type=expense].cents`)."""
    if isinstance(body, dict):
        for key, value in body.items():
            path = join_path(prefix, str(key))
            if isinstance(value, (dict, list)):
                if depth > 0:
                    yield from leaves(value, path, depth - 1)
            else:
                yield path, value
    elif isinstance(body, list) and depth > 0:
        tag = _discriminator(body)
        if tag is None:
            return
        for item in body:
            yield from leaves(item, f"{prefix}[{tag}={item[tag]}]", depth - 1)


# ---- matching numbers to facts -----------------------------------------------------------------
def _candidates(
    observations: Sequence[tuple[Any, Mapping[str, int]]], roles: Sequence[str]
) -> dict[str, list[str]]:
    """Per role, the paths (with `-` for a negation) whose value equals the role's fact in every
    observation."""
    found: dict[str, list[str]] = {}
    for role in roles:
        paths: set[str] | None = None
        for body, facts in observations:
            if role not in facts:
                continue
            want = facts[role]
            here = set()
            for path, value in leaves(body):
                if is_int(value):
                    if value == want:
                        here.add(path)
                    if want != 0 and value == -want:
                        here.add("-" + path)
            paths = here if paths is None else paths & here
        found[role] = sorted(paths or ())
    return found


def _settle(found: dict[str, list[str]], surface: str) -> dict[str, list[str]]:
    """Constraint propagation: a field that is the only one for a role is no other role's; a
    field two roles both need only goes to the required one (an optional role then has none)."""
    found = {r: list(p) for r, p in found.items()}
    required = REQUIRED.get(surface, ())
    changed = True
    while changed:
        changed = False
        owners: dict[str, list[str]] = {}
        for role, paths in found.items():
            if len(paths) == 1:
                owners.setdefault(paths[0].lstrip("-"), []).append(role)
        for roles in owners.values():
            if len(roles) > 1:  # one field cannot be two roles: keep it where it is required
                for role in roles:
                    if role not in required or len([r for r in roles if r in required]) > 1:
                        found[role], changed = [], True
        fixed = {p[0].lstrip("-"): r for r, p in found.items() if len(p) == 1}
        for role, paths in found.items():
            if len(paths) > 1:
                kept = [p for p in paths if fixed.get(p.lstrip("-"), role) == role]
                if len(kept) < len(paths):
                    found[role], changed = kept, True
    return found


def _decide(
    surface: str,
    found: dict[str, list[str]],
    what: Mapping[str, str],
    extra: Mapping[str, str] | None = None,
    taken: frozenset[str] = frozenset(),
) -> Learned | Refused:
    """Mapping from settled candidates (fields in `taken` already fill another role): a
    required role must have exactly one field; an optional one is left out when not one."""
    found = {r: [p for p in paths if p.lstrip("-") not in taken] for r, paths in found.items()}
    found = _settle(found, surface)
    mapping: dict[str, str] = dict(extra or {})
    words: list[str] = []
    undecided: list[str] = []
    for role, paths in found.items():
        if len(paths) == 1:
            mapping[role] = paths[0]
            sign = " (negated)" if paths[0].startswith("-") else ""
            words.append(f"{role} = {paths[0].lstrip('-')}{sign} equals {what.get(role, role)}")
        elif role in REQUIRED.get(surface, ()):
            if not paths:
                return Refused(
                    f"no field (or not one alone) equals {what.get(role, role)} ({role})", found
                )
            return Refused(
                f"{role} is ambiguous: {', '.join(paths)} all equal {what.get(role, role)}; "
                "pin one in the contract file",
                found,
            )
        else:
            undecided.append(role)
    if undecided:
        words.append("not decided by the data: " + ", ".join(sorted(undecided)))
    return Learned(mapping, "; ".join(words), tuple(sorted(undecided)))


# ---- the surfaces -------------------------------------------------------------------------------
def learn_totals(observations: Sequence[tuple[Any, Mapping[str, int]]]) -> Learned | Refused:
    """`GET /v1/transactions/summary`: each observation is a body and the facts for the same
    filter (count: the list's `total`; income/expense/transfer/net: the rows' sums by type)."""
    if not observations or not all(isinstance(b, dict) for b, _ in observations):
        return Refused("the answer is not a JSON object")
    roles = ("count", "income", "expense", "transfer", "net")
    what = {
        "count": "the list's total",
        "income": "the income rows' sum",
        "expense": "the expense rows' sum",
        "transfer": "the transfer rows' sum",
        "net": "the sum of all rows",
    }
    found = _candidates(observations, roles)
    found["count"] = [p for p in found["count"] if not p.startswith("-")]
    return _decide(TRANSACTIONS_SUMMARY, found, what)


def _counts_by_type(balances: Sequence[tuple[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for kind, _ in balances:
        out[kind] = out.get(kind, 0) + 1
    return out


def balance_facts(balances: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """What net worth and account totals must equal, from the accounts' (type, balance)."""
    by_type: dict[str, int] = {}
    for kind, cents in balances:
        by_type[kind] = by_type.get(kind, 0) + cents
    assets = sum(c for _, c in balances if c > 0)
    liabilities = -sum(c for _, c in balances if c < 0)
    return {
        "total": assets - liabilities,
        "assets": assets,
        "liabilities": liabilities,
        "count": len(balances),
        "by_type": by_type,
    }


def instants(body: Any) -> list[str]:
    return [
        p for p, v in leaves(body) if isinstance(v, str) and _ISO_INSTANT.match(v) and _instant(v)
    ]


def _instant(text: str) -> bool:
    try:
        dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _strings_equal(body: Any, want: str | None) -> list[str]:
    if not want:
        return []
    return [p for p, v in leaves(body) if isinstance(v, str) and v.upper() == want.upper()]


def _type_pattern(path: str, kind: str) -> str | None:
    """`path` with the segment naming `kind` replaced by `{type}` (None when none does)."""
    parts = path.split(".")
    for i, part in enumerate(parts):
        if part == kind:
            return ".".join([*parts[:i], "{type}", *parts[i + 1 :]])
        if part.endswith(f"={kind}]"):
            parts[i] = part[: -len(kind) - 1] + "{type}]"
            return ".".join(parts)
    return None


def _by_type(body: Any, by_type: Mapping[str, int]) -> list[str]:
    """Path patterns (`{type}` for the type) holding every type's sum."""
    if not by_type:
        return []
    patterns: set[str] | None = None
    for kind, cents in by_type.items():
        here = {
            pattern
            for path, value in leaves(body)
            if is_int(value) and value == cents
            if (pattern := _type_pattern(path, kind)) is not None
        }
        patterns = here if patterns is None else patterns & here
    return sorted(patterns or ())


def by_type_of(body: Any, pattern: str, *, paths: bool = False) -> dict[str, Any]:
    """{type: cents} read through a `{type}` pattern (`by_type.{type}`,
    `t[kind={type}].v`); with `paths`, {type: the path it was read at}."""
    head, _, tail = pattern.partition("{type}")
    out: dict[str, Any] = {}
    for path, value in leaves(body):
        if path.startswith(head) and path.endswith(tail) and is_int(value):
            middle = path[len(head) : len(path) - len(tail)] if tail else path[len(head) :]
            if middle and "." not in middle and "[" not in middle and "]" not in middle:
                out[middle] = path if paths else value
    return out


def learn_balances(
    surface: str, body: Any, balances: Sequence[tuple[str, int]], currency: str | None
) -> Learned | Refused:
    """Net worth or account totals: sums over the accounts' balances (whatever the names), the
    accounts' currency, and (net worth) the one ISO 8601 instant (`as_of`)."""
    if not isinstance(body, dict):
        return Refused("the answer is not a JSON object")
    facts = balance_facts(balances)
    total_role = "total" if surface == NET_WORTH else "net_worth"
    numbers = {total_role: facts["total"], "assets": facts["assets"]}
    numbers["liabilities"] = facts["liabilities"]
    if surface == ACCOUNTS_SUMMARY:
        numbers["count"] = facts["count"]
    what = {
        total_role: "the sum of the account balances",
        "assets": "the sum of the positive balances",
        "liabilities": "the sum of the negative balances",
        "count": "the number of accounts",
    }
    found = _candidates([(body, numbers)], list(numbers))
    if "count" in found:
        found["count"] = [p for p in found["count"] if not p.startswith("-")]
    extra: dict[str, str] = {}
    words: list[str] = []
    taken: frozenset[str] = frozenset()
    stamp = instants(body)
    if surface == NET_WORTH and len(stamp) == 1:
        extra["as_of"] = stamp[0]
        words.append(f"as_of = {stamp[0]} is the one ISO 8601 instant")
    money = _strings_equal(body, currency)
    if len(money) == 1:
        extra["currency"] = money[0]
        words.append(f"currency = {money[0]} equals the accounts' currency")
    if surface == ACCOUNTS_SUMMARY:
        pattern = _by_type(body, facts["by_type"])
        if len(pattern) == 1:
            extra["by_type"] = pattern[0]
            words.append(f"by_type = {pattern[0]} equals each type's balance sum")
            taken = frozenset(by_type_of(body, pattern[0], paths=True).values())
    if surface == ACCOUNTS_SUMMARY and "by_type" in extra:
        counts = by_type_of(body, extra["by_type"], paths=True)
        head = extra["by_type"].partition("{type}")[0]
        per_type = _by_type(body, _counts_by_type(balances))
        per_type = [
            p for p in per_type if p != extra["by_type"] and p.startswith(head.split("[")[0])
        ]
        if len(per_type) == 1 and counts:
            extra["count_by_type"] = per_type[0]
            words.append(f"count_by_type = {per_type[0]} equals each type's number of accounts")
            taken |= frozenset(by_type_of(body, per_type[0], paths=True).values())
    got = _decide(surface, found, what, extra, taken)
    if (
        isinstance(got, Learned)
        and surface == ACCOUNTS_SUMMARY
        and not {"net_worth", "by_type"} & set(got.mapping)
    ):
        return Refused("no field equals the sum of the account balances, nor per type")
    if isinstance(got, Learned) and words:
        return Learned(got.mapping, "; ".join([got.evidence, *words]), got.undecided)
    return got


def learn_settings(body: Any, currency: str | None) -> Learned | Refused:
    """Settings: the time zone is the one value that is an IANA zone name, the currency the
    value equal to the accounts' currency (left undecided when no account tells it)."""
    if not isinstance(body, dict):
        return Refused("the answer is not a JSON object")
    named = [p for p, v in leaves(body) if isinstance(v, str) and v in iana_zones()]
    if not named:
        return Refused("no value is an IANA time zone name")
    if len(named) > 1:
        return Refused(
            f"several values are IANA time zone names ({', '.join(named)}); pin one",
            {"timezone": named},
        )
    mapping = {"timezone": named[0]}
    words = [f"timezone = {named[0]} is the one IANA zone name"]
    undecided: tuple[str, ...] = ()
    money = _strings_equal(body, currency)
    if len(money) == 1:
        mapping["currency"] = money[0]
        words.append(f"currency = {money[0]} equals the accounts' currency")
    else:
        undecided = ("currency",)
        words.append("currency not decided by the data")
    return Learned(mapping, "; ".join(words), undecided)
