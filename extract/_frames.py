"""The bulk path: raw response bytes to typed Polars frames, with no Python dict per row.

A list response is ``{"data": [record, record, ...], "total": ..., ...}`` (or a bare array).
The fast path cuts the ``data`` array out of the page bytes, turns it into NDJSON by splitting
between top-level records (``},{`` becomes ``}\\n{``), and hands a whole batch of pages to one
``pl.read_ndjson`` call; the ``raw`` column is each record's text exactly as the server sent
it. A wrong cut can only land inside a string or a nested value, and either way leaves both
halves invalid JSON, which the strict NDJSON reader rejects: then (and for pretty-printed
bodies) the batch is re-split with orjson, still parsed in one ``read_ndjson`` call.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

if TYPE_CHECKING:
    import pyarrow as pa

from ._errors import ResponseFormatError

_DATA_KEY = re.compile(rb'"data"\s*:\s*\[')

TS = pl.Datetime("ms", "UTC")

# What the wire carries, per record type (dates and times arrive as text).
TRANSACTION_WIRE: dict[str, pl.DataType] = {
    "id": pl.Utf8(),
    "account_id": pl.Utf8(),
    "concept": pl.Utf8(),
    "amount": pl.Int64(),
    "booked_at": pl.Utf8(),
    "type": pl.Utf8(),
    "category_id": pl.Utf8(),
    "expense_goal_id": pl.Utf8(),
    "created_at": pl.Utf8(),
    "updated_at": pl.Utf8(),
}
ACCOUNT_WIRE: dict[str, pl.DataType] = {
    "id": pl.Utf8(),
    "name": pl.Utf8(),
    "type": pl.Utf8(),
    "subtype": pl.Utf8(),
    "currency": pl.Utf8(),
    "balance": pl.Int64(),
    "connection_id": pl.Utf8(),
    "institution": pl.Utf8(),
    "updated_at": pl.Utf8(),
}
CONNECTION_WIRE: dict[str, pl.DataType] = {
    "id": pl.Utf8(),
    "provider": pl.Utf8(),
    "institution": pl.Utf8(),
    "status": pl.Utf8(),
    "last_synced_at": pl.Utf8(),
    "account_ids": pl.List(pl.Utf8()),
}
SYNC_STATUS_WIRE: dict[str, pl.DataType] = {
    "connection_id": pl.Utf8(),
    "provider": pl.Utf8(),
    "status": pl.Utf8(),
    "last_synced_at": pl.Utf8(),
    "next_sync_at": pl.Utf8(),
}
SPENDING_WIRE: dict[str, pl.DataType] = {
    "key": pl.Utf8(),
    "label": pl.Utf8(),
    "amount": pl.Int64(),
    "count": pl.Int64(),
}

_DATES = {"booked_at"}
_TIMES = {"created_at", "updated_at", "last_synced_at", "next_sync_at"}


def final_schema(wire: dict[str, pl.DataType], *, raw: bool = True) -> dict[str, pl.DataType]:
    """The typed schema readers return for a wire schema."""
    out: dict[str, pl.DataType] = {}
    for name, dtype in wire.items():
        if name in _DATES:
            out[name] = pl.Date()
        elif name in _TIMES:
            out[name] = TS
        else:
            out[name] = dtype
    if raw:
        out["raw"] = pl.Utf8()
    return out


TRANSACTION_SCHEMA = final_schema(TRANSACTION_WIRE)
ACCOUNT_SCHEMA = final_schema(ACCOUNT_WIRE)
CONNECTION_SCHEMA = final_schema(CONNECTION_WIRE)
SYNC_STATUS_SCHEMA = final_schema(SYNC_STATUS_WIRE)


# A page waiting while its reader is held up (the caller committing a window) is kept as its
# records one per line (what its batch's parse reads), compressed: zstd at level 1 through
# pyarrow's codec, about 1.4 GB/s with the GIL released, and a list page shrinks about
# eightfold. Its lines are made while it waits, so the batch's parse has that much less to do.
# pyarrow is imported by the first big read that needs it (here and `_timestamp`), not by every
# process: a household's refresh never does (0.13-0.16 s and about 34 MB saved).
@functools.cache
def _packing() -> pa.Codec:
    import pyarrow as pa

    return pa.Codec("zstd")


# A text column of at least this many timestamps goes through Arrow's ISO 8601 cast (about a
# ninth of the CPU of Polars' `%+`: 9 against 82 ms for 200,000 values here); a smaller one
# through Polars (under 4 ms at 10,000 values), which imports nothing more.
ARROW_CAST_ROWS = 10_000


@dataclass(frozen=True)
class PageChunk:
    """One list response as received, with its envelope (without ``data``) and where the
    records sit in it; the records become NDJSON only when a batch is parsed, or when the page
    is packed to wait (`pack`)."""

    envelope: dict[str, Any]
    body: bytes  # b"" once packed
    start: int = 0  # the ``data`` array's inside is body[start:end]
    end: int = 0
    converted: bytes | None = None  # NDJSON already made (slow path)
    packed: bytes | None = None  # the records, one per line, compressed (`pack`)
    size: int = 0  # their length

    @property
    def held(self) -> int:
        """The bytes this page holds now."""
        return len(self.packed) if self.packed is not None else len(self.body)

    def pack(self) -> PageChunk:
        """The same page as its records, one per line, compressed (for a page that waits)."""
        if self.packed is not None or self.converted is not None:
            return self
        lines = self.ndjson()
        packed = _packing().compress(lines, asbytes=True)
        return replace(self, body=b"", packed=packed, size=len(lines))

    def records(self) -> bytes:
        """A JSON document whose ``data`` holds the page's records as sent: the body, or for a
        packed page its lines joined back (the cut turned each `},{` into `}\\n{`, and the
        records held no line break, so joining them back gives them as sent)."""
        if self.packed is None:
            return self.body
        return b'{"data":[' + self.ndjson().replace(b"}\n{", b"},{") + b"]}"

    @property
    def total(self) -> int | None:
        value = self.envelope.get("total")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def pages(self) -> int | None:
        value = self.envelope.get("pages")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def ndjson(self) -> bytes:
        """The records, one per line (b"" when there are none)."""
        if self.converted is not None:
            return self.converted
        if self.packed is not None:
            return _packing().decompress(self.packed, decompressed_size=self.size, asbytes=True)
        inner = self.body[self.start : self.end].strip()
        return inner.replace(b"},{", b"}\n{") if inner else b""


def cut_page(body: bytes) -> PageChunk:
    """Locate the envelope and the records of one list response (fast, byte level)."""
    stripped = body.lstrip()
    if stripped.startswith(b"["):
        start = body.index(b"[") + 1
        end = body.rfind(b"]")
        if end < start or b"\n" in body[start:end]:
            return _slow_cut(body)
        return PageChunk({}, body, start, end)
    match = _DATA_KEY.search(body)
    end = body.rfind(b"]")
    if match is None or end < match.end() - 1:
        return _slow_cut(body)
    try:
        envelope = orjson.loads(body[: match.start()] + b'"data":null' + body[end + 1 :])
    except orjson.JSONDecodeError:
        return _slow_cut(body)
    if not isinstance(envelope, dict) or envelope.get("data", 0) is not None:
        return _slow_cut(body)
    if body.find(b"\n", match.end(), end) != -1 or body.find(b"\r", match.end(), end) != -1:
        return _slow_cut(body)
    return PageChunk(envelope, body, match.end(), end)


def _slow_cut(body: bytes) -> PageChunk:
    """Cut with a full parse: for bodies the byte-level cut cannot take."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ResponseFormatError(f"response is not JSON ({exc})") from None
    if isinstance(doc, list):
        envelope: dict[str, Any] = {}
        records = doc
    elif isinstance(doc, dict) and isinstance(doc.get("data"), list):
        records = doc["data"]
        envelope = {k: v for k, v in doc.items() if k != "data"}
        envelope["data"] = None
    else:
        raise ResponseFormatError("list response without a 'data' array")
    if not all(isinstance(r, dict) for r in records):
        raise ResponseFormatError("list response with a non-object record")
    return PageChunk(envelope, body, converted=b"\n".join(orjson.dumps(r) for r in records))


def frame_from_chunks(
    chunks: Sequence[PageChunk], wire: dict[str, pl.DataType], *, raw: bool = True
) -> pl.DataFrame:
    """Parse a batch of cut pages into one typed frame, in one NDJSON parse."""
    parts = [p for p in (c.ndjson() for c in chunks) if p]
    if not parts:
        return pl.DataFrame(schema=final_schema(wire, raw=raw))
    try:
        return _typed(b"\n".join(parts), wire, raw=raw)
    except (pl.exceptions.ComputeError, pl.exceptions.InvalidOperationError):
        pass
    # a cut landed inside a value (or the records are not flat JSON objects): full parse
    parts = [p for p in (_slow_cut(c.records()).ndjson() for c in chunks) if p]
    try:
        return _typed(b"\n".join(parts), wire, raw=raw)
    except (pl.exceptions.ComputeError, pl.exceptions.InvalidOperationError):
        pass
    # some record holds a value of the wrong type (a string amount, an impossible date): every
    # field as text, so the warehouse's validation rejects exactly those rows, with a reason,
    # and lands the rest
    return _as_text(b"\n".join(parts), wire, raw=raw)


def _as_text(ndjson: bytes, wire: dict[str, pl.DataType], *, raw: bool) -> pl.DataFrame:
    """Records as text columns (JSON numbers and booleans as their JSON text), plus `raw`."""
    lines = [line for line in ndjson.split(b"\n") if line.strip()]
    columns: dict[str, list[str | None]] = {name: [] for name in wire}
    for line in lines:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ResponseFormatError(f"a record is not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise ResponseFormatError("a list record is not a JSON object")
        for name, values in columns.items():
            value = record.get(name)
            values.append(
                None
                if value is None
                else value
                if isinstance(value, str)
                else orjson.dumps(value).decode()
            )
    frame = pl.DataFrame(columns, schema={name: pl.String() for name in wire})
    if raw:
        frame = frame.with_columns(pl.Series("raw", [ln.decode() for ln in lines], dtype=pl.String))
    return frame


def _typed(ndjson: bytes, wire: dict[str, pl.DataType], *, raw: bool) -> pl.DataFrame:
    frame = pl.read_ndjson(ndjson, schema=wire)
    exprs: list[pl.Expr | pl.Series] = []
    for name in wire:
        if name in _DATES:
            exprs.append(pl.col(name).str.to_date("%Y-%m-%d"))
        elif name in _TIMES:
            exprs.append(_timestamp(frame[name]).alias(name))
    if raw:
        lines = raw_lines(ndjson)
        if len(lines) != frame.height:
            raise pl.exceptions.ComputeError("line count differs from record count")
        exprs.append(lines)
    return frame.with_columns(exprs) if exprs else frame


def raw_lines(ndjson: bytes) -> pl.Series:
    """Each NDJSON line as text, split natively (no Python object per line).

    The CSV reader is told the one byte valid JSON text never holds unescaped (0x1F, a control
    character) as its separator and to ignore quotes, so every line is one field, verbatim.
    A body that does hold it (a server breaking the JSON rules) takes the slow split.
    """
    if b"\x1f" in ndjson:
        return pl.Series("raw", ndjson.split(b"\n"), dtype=pl.Binary).cast(pl.Utf8)
    return pl.read_csv(
        ndjson,
        has_header=False,
        separator="\x1f",
        quote_char=None,
        schema={"raw": pl.Utf8()},
    ).to_series()


def _timestamp(column: pl.Series) -> pl.Series:
    """ISO 8601 text to Datetime(ms, UTC), any offset.

    Arrow's ISO 8601 cast takes the contract's ``...T..:..:..mmmZ`` (and any offset) at about
    a fifth of the CPU of Polars' ``%+`` (chrono): it is tried first. What it refuses (no
    offset, a fraction finer than the millisecond, a stray space) goes to ``%+`` (RFC 3339),
    and the values that refuses to Polars' inferring parser (no seconds, a space for ``T``);
    a value none of them reads is an error. A column under `ARROW_CAST_ROWS` starts at `%+`:
    the two agree on every value both read (`tests/extract/test_frames.py`)."""
    if column.len() >= ARROW_CAST_ROWS:
        import pyarrow as pa
        import pyarrow.compute as pc

        try:
            parsed = pc.cast(column.to_arrow(), pa.timestamp("ms", tz="UTC"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        else:
            return pl.Series(column.name, parsed)
    parsed = column.str.strptime(TS, "%+", strict=False)
    unread = parsed.is_null() & column.is_not_null()
    if not unread.any():
        return parsed
    rest = column.filter(unread).str.to_datetime(time_unit="ms", time_zone="UTC", strict=True)
    return parsed.scatter(unread.arg_true(), rest)


def frame_from_records(
    records: list[dict[str, Any]], wire: dict[str, pl.DataType], *, raw: bool = True
) -> pl.DataFrame:
    """Typed frame for a handful of already-parsed records (writer results, small lists)."""
    if not records:
        return pl.DataFrame(schema=final_schema(wire, raw=raw))
    return _typed(b"\n".join(orjson.dumps(r) for r in records), wire, raw=raw)


def transactions_from_payloads(payloads: Sequence[str]) -> pl.DataFrame:
    """Transactions as the list parses them, from their payloads as sent (one JSON object
    each, as ``raw.transactions`` keeps them): a stopped read's kept rows, staged again."""
    ndjson = "\n".join(payloads).encode()
    return frame_from_chunks([PageChunk({}, ndjson, converted=ndjson)], TRANSACTION_WIRE)
