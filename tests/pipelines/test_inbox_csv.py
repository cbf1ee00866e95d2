"""The inbox's CSV codec: every errors file it writes is CSV a strict reader reads back."""

from __future__ import annotations

import csv
import io

import pytest

from centsync.pipelines.writeback.inbox_csv import errors_csv, file_errors_csv, read_csv
from centsync.transform.writeback import Planned


def strict(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline=""), strict=True))


@pytest.mark.parametrize(
    "header",
    [
        b'"account"x,booked_at,amount,concept\n',  # csv.Error: ',' expected after '"'
        b'account,"booked_at""",amount,concept\n',  # an unknown column with a quote in its name
        b'account;booked_at;amount;concept;\'colour\';"x""y"\n',
    ],
)
def test_a_file_rejected_whole_has_an_errors_file_a_strict_reader_reads(header: bytes) -> None:
    problem = read_csv(header).problem
    assert problem is not None and '"' in problem
    assert strict(file_errors_csv(problem)) == [["line", "reason", "row"], ["0", problem, ""]]


def test_rejected_rows_keep_their_reason_and_text_verbatim() -> None:
    p = Planned("inbox", "f.csv", 3, "event:x", "create", "k", 'a;"b";c', reason='concept: "x"')
    ok = Planned("inbox", "f.csv", 4, "event:y", "create", "k2", "fine")
    assert strict(errors_csv([p, ok], ",")) == [
        ["line", "reason", "row"],
        ["3", 'concept: "x"', 'a;"b";c'],
    ]
    rows = list(csv.reader(io.StringIO(errors_csv([p], ";")), delimiter=";", strict=True))
    assert rows[1] == ["3", 'concept: "x"', 'a;"b";c']
