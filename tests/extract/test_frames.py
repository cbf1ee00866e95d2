"""The bulk parse path: raw bytes in, typed frames out, raw text kept exactly."""

from __future__ import annotations

import datetime as dt

import orjson
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from centsync.extract import TRANSACTION_SCHEMA, _frames
from centsync.extract._frames import TRANSACTION_WIRE, cut_page, frame_from_chunks

# `_timestamp` takes a column of ARROW_CAST_ROWS timestamps or more through Arrow's cast first,
# a smaller one through Polars alone: every timestamp test runs both ways
BOTH_WAYS = pytest.mark.parametrize("arrow_rows", [0, 10**9], ids=["arrow-first", "polars"])

RECORD = {
    "id": "0ac7ba49-b043-4e18-a21b-7cf79e000001",
    "account_id": "ec148cb4-8e73-4a47-aa90-a8f0d6000001",
    "concept": "Deliveroo",
    "amount": -532,
    "booked_at": "2026-11-21",
    "type": "expense",
    "category_id": None,
    "expense_goal_id": None,
    "created_at": "2026-11-21T18:59:59.123Z",
    "updated_at": "2026-11-21T18:59:59.123Z",
}


def page(records: list[dict[str, object]], **envelope: object) -> bytes:
    env = {"total": len(records), "page": 1, "pages": 1, **envelope}
    return orjson.dumps({"data": records, **env})


def test_raw_text_is_byte_exact_and_unknown_fields_survive() -> None:
    rec = {**RECORD, "merchant_logo": {"url": "x", "size": [1, 2]}}
    body = page([rec, {**rec, "id": "0ac7ba49-b043-4e18-a21b-7cf79e000002"}])
    frame = frame_from_chunks([cut_page(body)], TRANSACTION_WIRE)
    assert dict(frame.schema) == TRANSACTION_SCHEMA
    assert frame["raw"][0] == orjson.dumps(rec).decode()
    assert orjson.loads(frame["raw"][1])["merchant_logo"] == {"url": "x", "size": [1, 2]}


def test_types_are_integer_cents_dates_and_utc_times() -> None:
    frame = frame_from_chunks([cut_page(page([RECORD]))], TRANSACTION_WIRE)
    row = frame.row(0, named=True)
    assert row["amount"] == -532
    assert str(row["booked_at"]) == "2026-11-21"
    assert frame["created_at"].dtype == pl.Datetime("ms", "UTC")
    assert row["created_at"].microsecond == 123_000


def test_separator_inside_a_string_falls_back_and_stays_exact() -> None:
    tricky = {**RECORD, "concept": 'Café "Luna" },{ and \\ more'}
    body = page([tricky, RECORD])
    frame = frame_from_chunks([cut_page(body)], TRANSACTION_WIRE)
    assert frame["concept"].to_list() == [tricky["concept"], "Deliveroo"]
    assert [orjson.loads(r) for r in frame["raw"]] == [tricky, RECORD]


def test_pretty_printed_pages_parse_too() -> None:
    body = orjson.dumps({"data": [RECORD, RECORD], "total": 2}, option=orjson.OPT_INDENT_2)
    chunk = cut_page(body)
    assert chunk.total == 2
    assert frame_from_chunks([chunk], TRANSACTION_WIRE).height == 2


def test_envelope_fields_in_any_order() -> None:
    body = b'{"total":1,"pages":1,"page":1,"data":[' + orjson.dumps(RECORD) + b"]}"
    chunk = cut_page(body)
    assert (chunk.total, chunk.pages) == (1, 1)
    assert frame_from_chunks([chunk], TRANSACTION_WIRE)["id"][0] == RECORD["id"]


def test_empty_page_gives_an_empty_typed_frame() -> None:
    frame = frame_from_chunks([cut_page(page([]))], TRANSACTION_WIRE)
    assert frame.height == 0 and dict(frame.schema) == TRANSACTION_SCHEMA


@pytest.mark.parametrize(("amount", "text"), [(12.5, "12.5"), ("12", "12"), (True, "true")])
def test_a_batch_with_a_non_integer_amount_comes_back_as_text_for_validation(
    amount: object, text: str
) -> None:
    # the warehouse's validation then rejects that row with a reason and lands the others
    good = {**RECORD, "id": "00000000-0000-0000-0000-0000000000aa"}
    frame = frame_from_chunks(
        [cut_page(page([{**RECORD, "amount": amount}, good]))], TRANSACTION_WIRE
    )
    assert frame.schema["amount"] == pl.String and frame.height == 2
    assert frame["amount"].to_list() == [text, str(RECORD["amount"])]
    assert frame["raw"].str.contains('"amount"').all()


def test_missing_optional_fields_are_null() -> None:
    slim = {k: v for k, v in RECORD.items() if k not in {"created_at", "updated_at"}}
    frame = frame_from_chunks([cut_page(page([slim]))], TRANSACTION_WIRE)
    assert frame["updated_at"].null_count() == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=8))
def test_any_concept_text_round_trips(concepts: list[str]) -> None:
    records = [
        {**RECORD, "id": f"0ac7ba49-b043-4e18-a21b-7cf79e{i:06d}", "concept": c}
        for i, c in enumerate(concepts)
    ]
    frame = frame_from_chunks([cut_page(page(records))], TRANSACTION_WIRE)
    assert frame["concept"].to_list() == concepts
    assert [orjson.loads(r) for r in frame["raw"]] == records


def test_raw_lines_keep_every_line_verbatim_even_with_separator_bytes() -> None:
    from centsync.extract._frames import raw_lines

    lines = [b'{"a":"x, \\"q\\" ;\\t"}', b'{"b":1}', b'{"c":"\x1f raw unit separator"}']
    assert raw_lines(b"\n".join(lines)).to_list() == [x.decode() for x in lines]
    assert raw_lines(b"\n".join(lines[:2])).to_list() == [x.decode() for x in lines[:2]]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-21T18:59:59.123Z", "2026-11-21 18:59:59.123000+00:00"),
        ("2026-11-21T18:59:59Z", "2026-11-21 18:59:59+00:00"),  # no fraction
        ("2026-11-21T20:59:59.5+02:00", "2026-11-21 18:59:59.500000+00:00"),  # an offset
        ("2026-11-21T13:59:59.123-05:00", "2026-11-21 18:59:59.123000+00:00"),
        ("2026-11-21 18:59:59", "2026-11-21 18:59:59+00:00"),  # not RFC 3339: inferred, UTC
        ("2026-11-21T18:59:59.123456Z", "2026-11-21 18:59:59.123000+00:00"),  # finer than ms
        ("2026-11-21", "2026-11-21 00:00:00+00:00"),  # a date alone: its midnight, UTC
        ("2026-11-21T18:59Z", "2026-11-21 18:59:00+00:00"),  # no seconds
        ("2026-11-21T18:59:59+0200", "2026-11-21 16:59:59+00:00"),  # an offset without a colon
        ("20261121T185959Z", "2026-11-21 18:59:59+00:00"),  # ISO 8601's basic format
    ],
)
@BOTH_WAYS
def test_timestamps_in_any_iso_form_become_utc_instants(
    text: str, expected: str, arrow_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_frames, "ARROW_CAST_ROWS", arrow_rows)
    body = page([{**RECORD, "created_at": text, "updated_at": None}])
    frame = frame_from_chunks([cut_page(body)], TRANSACTION_WIRE)
    assert str(frame["created_at"][0]) == expected
    assert frame["updated_at"][0] is None


@BOTH_WAYS
def test_a_column_mixing_timestamp_forms_reads_every_row(
    arrow_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_frames, "ARROW_CAST_ROWS", arrow_rows)
    texts = ["2026-11-21T18:59:59.123Z", "2026-11-21 18:59:59", "2026-11-21T20:59:59+02:00"]
    body = page([{**RECORD, "created_at": t} for t in texts])
    frame = frame_from_chunks([cut_page(body)], TRANSACTION_WIRE)
    assert [str(v) for v in frame["created_at"]] == [
        "2026-11-21 18:59:59.123000+00:00",
        "2026-11-21 18:59:59+00:00",
        "2026-11-21 18:59:59+00:00",
    ]


@BOTH_WAYS
@pytest.mark.parametrize("text", ["yesterday", "2026-11-21T24:00:00Z", "2026-02-30T10:00:00Z"])
def test_an_unreadable_timestamp_comes_back_as_text_for_validation(
    text: str, arrow_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_frames, "ARROW_CAST_ROWS", arrow_rows)
    body = page([{**RECORD, "created_at": text}])
    frame = frame_from_chunks([cut_page(body)], TRANSACTION_WIRE)
    assert frame["created_at"].to_list() == [text]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(2099, 12, 30)),
            st.sampled_from(["Z", "+00:00", "+02:00", "-05:30", "+14:00"]),
            st.sampled_from([0, 1, 3, 6]),  # digits of the fraction
        ),
        min_size=1,
        max_size=40,
    )
)
def test_both_ways_read_every_rfc_3339_timestamp_alike(
    stamps: list[tuple[dt.datetime, str, int]],
) -> None:
    """What Arrow's cast reads, Polars' `%+` reads to the same instant: the size of a column
    decides which one reads it, never what it holds."""
    texts = []
    for when, offset, digits in stamps:
        fraction = f"{when.microsecond:06d}"[:digits]
        texts.append(
            when.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if digits else "") + offset
        )
    column = pl.Series("created_at", texts)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_frames, "ARROW_CAST_ROWS", 0)
        arrow_first = _frames._timestamp(column)
        mp.setattr(_frames, "ARROW_CAST_ROWS", 10**9)
        polars_only = _frames._timestamp(column)
    assert arrow_first.dtype == polars_only.dtype == pl.Datetime("ms", "UTC")
    assert arrow_first.to_list() == polars_only.to_list()
    assert arrow_first.null_count() == 0


def test_a_page_waiting_compressed_parses_as_received() -> None:
    """A page kept compressed while it waits (`PageChunk.pack`: its records one per line) gives
    the same rows, raw text and envelope, on the fast path and on the slow one (a separator
    inside a string, re-cut from the records joined back); a page already converted whole
    (pretty-printed) is kept as it is."""
    tricky = {**RECORD, "concept": 'a "},{" b', "id": "0ac7ba49-b043-4e18-a21b-7cf79e000002"}
    bodies = [
        page([RECORD, {**RECORD, "id": "0ac7ba49-b043-4e18-a21b-7cf79e000003"}]),
        page([RECORD, tricky]),
        orjson.dumps({"data": [RECORD], "total": 1, "pages": 1}, option=orjson.OPT_INDENT_2),
    ]
    pretty = cut_page(bodies[2])
    assert pretty.converted is not None and pretty.pack() is pretty
    for body in bodies[:2]:
        chunk = cut_page(body)
        packed = chunk.pack()
        assert packed.body == b"" and packed.packed is not None
        assert packed.held < len(body) and chunk.held == len(body)
        assert packed.ndjson() == chunk.ndjson() and packed.envelope == chunk.envelope
        assert orjson.loads(packed.records())["data"] == orjson.loads(body)["data"]
        assert packed.pack() is packed  # packed once
        assert frame_from_chunks([packed], TRANSACTION_WIRE).equals(
            frame_from_chunks([chunk], TRANSACTION_WIRE)
        )
    chunks = [cut_page(b) for b in bodies[:2]]
    mixed = [chunks[0].pack(), chunks[1]]
    assert frame_from_chunks(mixed, TRANSACTION_WIRE).equals(
        frame_from_chunks(chunks, TRANSACTION_WIRE)
    )
