"""The inbox's CSV codec: an inbox file's bytes into source rows, and the `.errors.csv` beside a
rejected file, always written through csv.writer (so a reason holding a quote stays CSV)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from centsync.transform.writeback import COLUMNS, REQUIRED, Planned, SourceRow

ERRORS_HEADER = ("line", "reason", "row")


@dataclass
class ReadFile:
    """An inbox file as read: its rows, or the problem that rejects it whole."""

    rows: list[SourceRow]
    problem: str | None  # a file-level problem (encoding, header): no row is used
    decimal_comma: bool = False
    delimiter: str = ","
    header: str = ""  # the header line as written (the rejected rows' file repeats it)


def read_csv(data: bytes) -> ReadFile:
    """Decode an inbox file (UTF-8 with or without BOM; comma or semicolon; quoted fields)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        return ReadFile(
            [],
            f"not UTF-8 (byte {e.start}: {data[e.start : e.start + 1]!r}): save the file as "
            "UTF-8 and drop it again",
        )
    if not text.strip():
        return ReadFile([], "empty file: the first line must be the header")
    first = text.split("\n", 1)[0]
    delimiter = ";" if first.count(";") > first.count(",") else ","
    lines = text.splitlines(keepends=True)
    reader = csv.reader(lines, delimiter=delimiter, strict=True)
    try:
        header = [h.strip().lower() for h in next(reader)]
    except csv.Error as e:
        return ReadFile([], f"unreadable header: {e}")
    problem = header_problem(header)
    if problem is not None:
        return ReadFile([], problem)
    rows = _rows(reader, lines, header)
    return ReadFile(
        rows,
        None,
        decimal_comma=delimiter == ";",
        delimiter=delimiter,
        header=lines[0].rstrip("\r\n"),
    )


def header_problem(header: Sequence[str]) -> str | None:
    """Why a header cannot be used (unknown, repeated or missing columns), or None."""
    unknown = [h for h in header if h not in COLUMNS]
    dupes = sorted({h for h in header if header.count(h) > 1})
    # a file of edits and assigns names transaction_id; any other file must be able to create
    missing = (
        [] if "transaction_id" in header else [c for c in REQUIRED["create"] if c not in header]
    )
    if not (unknown or dupes or missing):
        return None
    parts = []
    if unknown:
        parts.append(f"unknown column(s) {', '.join(map(repr, unknown))}")
    if dupes:
        parts.append(f"repeated column(s) {', '.join(dupes)}")
    if missing:
        parts.append(f"missing column(s) {', '.join(missing)}")
    return (
        f"the header has {'; '.join(parts)}: the first line must name columns among "
        f"{', '.join(COLUMNS)} (see the README's inbox format)"
    )


class _Reader(Protocol):
    """What of csv.reader the row loop uses: the next record and the line it ended on."""

    line_num: int

    def __next__(self) -> list[str]: ...


def _rows(reader: _Reader, lines: list[str], header: list[str]) -> list[SourceRow]:
    """The rows after the header, each with its line number and text as read."""
    rows: list[SourceRow] = []
    try:
        while True:
            start = reader.line_num + 1
            try:
                cells = next(reader)
            except StopIteration:
                break
            raw = "".join(lines[start - 1 : reader.line_num]).rstrip("\r\n")
            if not cells or all(not c.strip() for c in cells):
                continue  # blank lines are not requests
            if len(cells) != len(header):
                rows.append(
                    SourceRow(
                        start,
                        {},
                        raw,
                        f"{len(cells)} fields where the header has {len(header)}: "
                        "quote a field that contains the separator",
                    )
                )
                continue
            rows.append(SourceRow(start, dict(zip(header, cells, strict=True)), raw))
    except csv.Error as e:
        rows.append(SourceRow(reader.line_num, {}, "", f"unreadable from here on: {e}"))
    return rows


def _table(rows: Iterable[Sequence[object]], delimiter: str) -> str:
    """An errors file's text: the header, then one line per row, quoted by csv.writer."""
    out = io.StringIO()
    w = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    w.writerow(ERRORS_HEADER)
    w.writerows(rows)
    return out.getvalue()


def errors_csv(planned: Sequence[Planned], delimiter: str = ",") -> str:
    """The rejected rows of a file, each with its line and reason (kept verbatim)."""
    return _table(([p.line, p.reason, p.text] for p in planned if p.reason is not None), delimiter)


def append_errors(path: Path, row: Sequence[object]) -> None:
    """One more row of an errors file (its header first when the file is new)."""
    new = not path.exists()
    first = "" if new else path.read_text("utf-8").partition("\n")[0]
    out = io.StringIO()
    # the separator the file already has (a file's errors use its own: `errors_csv`)
    w = csv.writer(out, delimiter=";" if ";" in first else ",", lineterminator="\n")
    if new:
        w.writerow(ERRORS_HEADER)
    w.writerow(row)
    with path.open("a", encoding="utf-8") as f:
        f.write(out.getvalue())


def rejected_rows_csv(header: str, planned: Sequence[Planned]) -> str:
    """The rejected rows of a file, as written, under its header: fix them and drop it again."""
    return "\n".join([header, *(p.text for p in planned if p.reason is not None)]) + "\n"


def file_errors_csv(problem: str) -> str:
    """The errors file of a file rejected whole: line 0, its reason, no row."""
    return _table([[0, problem, ""]], ",")
