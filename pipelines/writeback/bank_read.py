"""Bank statements read, streamed: OFX/QFX (ofxtools' own tokenizer, header classes and models)
and CAMT.053 (defusedxml's iterparse: no entity expansion, no DTDs), one transaction at a time.

Neither format is read whole: the file is decoded a chunk at a time and each transaction's
element is converted and dropped as soon as it ends, so a 50 MB statement costs its rows, not
its tree (bench/bank_statement.py measures it).

Every row is booked on the bank's own calendar day, the date as the bank wrote it: OFX
`DTPOSTED` `20261119003000[+1:CET]` is 2026-11-19 (ofxtools would give 2026-11-18 23:30 UTC),
CAMT `BookgDt/DtTm` `2026-11-19T00:30:00+01:00` is 2026-11-19. A CAMT entry whose status
(`Sts`, or `Sts/Cd`) is not BOOK (PDNG, INFO, FUTR) is read as pending.

The text encoding: a byte-order mark decides (UTF-8, UTF-16 or UTF-32); else what the file
declares (OFX 1 `CHARSET`, an XML declaration's `encoding`). A file in another encoding, or
not text at all, is refused saying what it is.
"""

from __future__ import annotations

import codecs
import datetime as dt
import io
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO

import defusedxml.ElementTree as DET

from centsync.pipelines.results import BankFormat

CHUNK = 1 << 20  # bytes decoded at a time
HEAD = 1 << 16  # bytes looked at to tell the format and the encoding
BOMS = (  # UTF-32 first: its little-endian mark starts with UTF-16's
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
NOT_TEXT = {  # what a file that is no text most often is, by its first bytes
    b"%PDF": "a PDF document",
    b"PK\x03\x04": "a ZIP archive (an .xlsx or .zip file)",
    b"\x1f\x8b": "a gzip-compressed file",
    b"\xd0\xcf\x11\xe0": "an old Excel or Word (.xls, .doc) file",
}
EXPORT = "export the statement from your bank again as OFX, QFX or CAMT.053, in UTF-8"
_OPEN_TAG = re.compile(r"<[A-Za-z0-9]")


class BankFileError(ValueError):
    """A bank file that cannot be imported: what is wrong and what to do."""


@dataclass(frozen=True, slots=True)
class BankRow:
    """One transaction of a statement, as the bank wrote it."""

    account_ref: str  # the file's account id (OFX ACCTID, CAMT IBAN or other id)
    txid: str  # the bank's transaction id (FITID, AcctSvcrRef); "" when it gave none
    booked_at: dt.date  # the bank's own calendar day, as written
    amount: Decimal  # negative is money out
    currency: str
    concept: str
    notes: str = ""
    pending: bool = False  # not booked yet (CAMT Sts PDNG, INFO, FUTR): only ever held


def read_statement(path: Path) -> tuple[BankFormat, list[BankRow]]:
    """(format, rows) of a statement file, streamed."""
    with Path(path).open("rb") as f:
        return read_stream(f, Path(path).name)


def read_bank_file(data: bytes, name: str) -> tuple[BankFormat, list[BankRow]]:
    """(format, rows) of a statement's bytes."""
    return read_stream(io.BytesIO(data), name)


def read_stream(f: BinaryIO, name: str) -> tuple[BankFormat, list[BankRow]]:
    """(format, rows) of a seekable binary stream: CAMT.053 XML or OFX/QFX (1.x SGML, 2.x XML)."""
    head = f.read(HEAD)
    f.seek(0)
    bom = next((codec for mark, codec in BOMS if head.startswith(mark)), None)
    if bom is None:
        _text_or_refuse(head, name)
    text = head.decode(bom or "latin-1", "replace")
    if "BkToCstmrStmt" in text or "camt.053" in text[:4096]:
        return "camt053", list(_camt(f, name))
    if "OFXHEADER" in text[:4096] or "<OFX>" in text.upper():
        return "ofx", list(_ofx(f, name, bom))
    raise BankFileError(
        f"{name} is neither an OFX/QFX statement (no OFXHEADER) nor a CAMT.053 one (no "
        f"BkToCstmrStmt): {EXPORT}"
    )


def _text_or_refuse(head: bytes, name: str) -> None:
    """A file with no byte-order mark must be text in a one-byte-based encoding."""
    for magic, what in NOT_TEXT.items():
        if head.startswith(magic):
            raise BankFileError(f"{name} is {what}, not a bank statement: {EXPORT}")
    if b"\x00" in head[:4096]:
        raise BankFileError(
            f"{name} holds NUL bytes: it is UTF-16 or UTF-32 text without a byte-order mark, or "
            "not text at all, and centsync cannot tell which: save it as UTF-8 (or as UTF-16 "
            f"with a byte-order mark), or {EXPORT}"
        )


# ---------------------------------------------------------------------------------- OFX


def _ofx_codec(text: str, name: str) -> str:
    """The codec an OFX file without a byte-order mark declares (ofxtools' header classes)."""
    from ofxtools.header import XML_REGEX, OFXHeaderError, OFXHeaderV1

    xml = XML_REGEX.search(text[:4096])
    if xml:  # OFX 2: the XML declaration's encoding (UTF-8 when it names none)
        declared = xml.group("encoding") or "utf-8"
    else:
        try:
            return str(OFXHeaderV1.parse(text.lstrip())[0].codec)
        except OFXHeaderError as e:
            charset = re.search(r"CHARSET:\s*([^\s<]+)", text[:4096])
            if charset is None:
                raise BankFileError(
                    f"{name} is not a readable OFX statement (its header: {_short(e)}): {EXPORT}"
                ) from None
            declared = charset.group(1)
    try:
        return codecs.lookup(declared).name
    except LookupError:
        raise BankFileError(
            f"{name} declares the character set {declared!r}, which centsync cannot read: {EXPORT}"
        ) from None


def _decoded(f: BinaryIO, codec: str, name: str) -> Iterator[str]:
    """The stream's text, a chunk at a time (a character split between chunks is kept whole)."""
    decoder = codecs.getincrementaldecoder(codec)("strict")
    offset = 0
    try:
        while chunk := f.read(CHUNK):
            yield decoder.decode(chunk)
            offset += len(chunk)
        yield decoder.decode(b"", final=True)
    except UnicodeDecodeError as e:
        raise BankFileError(
            f"{name} is not {codec} text as it says (byte {offset + e.start} cannot be read as "
            f"{codec}): save it as UTF-8, or {EXPORT}"
        ) from None


def _ofx(f: BinaryIO, name: str, bom: str | None) -> Iterator[BankRow]:
    """An OFX/QFX statement's transactions: its header through ofxtools' header classes, its
    body through ofxtools' tokenizer, each STMTTRN converted by ofxtools' models as it ends."""
    from ofxtools.header import XML_REGEX, OFXHeaderError, OFXHeaderV1, OFXHeaderV2

    codec = bom or _ofx_codec(f.read(HEAD).decode("latin-1"), name)
    f.seek(0)
    chunks = _decoded(f, codec, name)
    text = ""
    for piece in chunks:  # the header lies in the first 4 KiB of text
        text += piece
        if len(text) >= 4096:
            break
    text = text.lstrip("\ufeff \t\r\n")
    try:
        header = OFXHeaderV2 if XML_REGEX.match(text) else OFXHeaderV1
        end = header.parse(text)[1]
    except (OFXHeaderError, ValueError) as e:
        raise BankFileError(f"{name} is not a readable OFX statement ({_short(e)})") from None
    yield from _ofx_body(name, text[end:], chunks)


def _short(e: BaseException) -> str:
    """An exception's message cut short (ofxtools quotes the whole text it was given)."""
    text = " ".join(str(e).split())
    return text if len(text) <= 200 else text[:200] + "..."


class _Builder:
    """ofxtools' tokenizer fed a piece at a time; each STMTTRN taken out of the tree as it ends."""

    def __init__(self) -> None:
        from ofxtools.Parser import TreeBuilder

        outer = self

        class Builder(TreeBuilder):
            def start(self, tag: str, attrs: dict[str, str]) -> Any:
                el = super().start(tag, attrs)
                outer.stack.append(el)
                return el

            def end(self, tag: str) -> Any:
                el = super().end(tag)
                outer.stack.pop()
                if tag in ("STMTTRN", "STMTTRNP") and outer.stack:
                    outer.stack[-1].remove(el)  # the tree keeps no transaction
                    stmt = next(
                        (s for s in reversed(outer.stack) if s.tag in ("STMTRS", "CCSTMTRS")), None
                    )
                    outer.ended.append((stmt, el))
                return el

        self.stack: list[Any] = []
        self.ended: list[tuple[Any, Any]] = []
        self.builder = Builder()


def _ofx_body(name: str, first: str, rest: Iterator[str]) -> Iterator[BankRow]:
    """The body's transactions, fed to ofxtools' tokenizer cut at opening tags (a tag, its text
    and its closing tag are never split), then the rest of the tree validated by its models."""
    from ofxtools.models.base import Aggregate

    b = _Builder()
    feed = _pieces(first, rest)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ofxtools warns on over-long ids; they are kept
            for piece in feed:
                b.builder.feed(piece)
                for stmt, el in b.ended:
                    yield _ofx_row(stmt, el)
                b.ended.clear()
            Aggregate.from_etree(b.builder.close())  # the statement around them, validated
    except BankFileError:
        raise
    except Exception as e:  # ofxtools raises many kinds for a malformed file
        raise BankFileError(f"{name} is not a readable OFX statement ({_short(e)})") from None


def _pieces(first: str, rest: Iterator[str]) -> Iterator[str]:
    """The text cut just before its last opening tag in each chunk, the rest carried on."""
    carry = first
    for text in rest:
        carry += text
        cut = _last_open_tag(carry)
        if cut > 0:
            yield carry[:cut]
            carry = carry[cut:]
    yield carry


def _last_open_tag(text: str) -> int:
    pos = len(text)
    while (pos := text.rfind("<", 0, pos)) >= 0:
        if _OPEN_TAG.match(text, pos):
            return pos
    return -1


def _ofx_row(stmt: Any, el: Any) -> BankRow:
    """One STMTTRN element: ofxtools' model of it, on the day DTPOSTED was written. A STMTTRNP
    (OFX 2.1's pending list, which ofxtools does not model) is a pending row."""
    from ofxtools.models.base import Aggregate

    pending = el.tag == "STMTTRNP"
    written = (el.findtext("DTTRAN" if pending else "DTPOSTED") or "").strip()
    t = _pending(el) if pending else Aggregate.from_etree(el)  # validates the stamp whole
    day = dt.date(int(written[:4]), int(written[4:6]), int(written[6:8]))
    acct = stmt.find("BANKACCTFROM") if stmt is not None else None
    if acct is None and stmt is not None:
        acct = stmt.find("CCACCTFROM")
    account = (acct.findtext("ACCTID") or "").strip() if acct is not None else ""
    curdef = (stmt.findtext("CURDEF") or "").strip() if stmt is not None else ""
    concept = str(t.name or t.memo or t.trntype or "bank transaction")
    memo = str(t.memo or "")
    currency = getattr(getattr(t, "currency", None), "cursym", None) or curdef or "EUR"
    return BankRow(
        account, str(t.fitid or ""), day, Decimal(t.trnamt), str(currency), concept,
        memo if memo != concept else "", pending,
    )  # fmt: skip


@dataclass
class _PendingTrn:
    trntype: str
    dttran: dt.datetime
    trnamt: Decimal
    fitid: str
    name: str
    memo: str


def _pending(el: Any) -> _PendingTrn:
    """A STMTTRNP's fields, each checked by ofxtools' own types (its REFNUM as the id)."""
    from ofxtools import Types

    def leaf(tag: str) -> str:
        return (el.findtext(tag) or "").strip()

    return _PendingTrn(
        leaf("TRNTYPE"),
        Types.DateTime(required=True).convert(leaf("DTTRAN")),
        Types.Decimal(required=True).convert(leaf("TRNAMT")),
        leaf("REFNUM"),
        leaf("NAME") or leaf("PAYEE/NAME"),
        leaf("MEMO"),
    )


# ---------------------------------------------------------------------------------- CAMT.053


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _find(el: Any, path: str) -> Any:
    """The first descendant along `a/b/c` by local names (CAMT's namespace varies by version)."""
    for part in path.split("/"):
        if el is None:
            return None
        el = next((c for c in el if _local(c.tag) == part), None)
    return el


def _text(el: Any, path: str) -> str:
    found = _find(el, path)
    return (found.text or "").strip() if found is not None else ""


def _camt(f: BinaryIO, name: str) -> Iterator[BankRow]:
    """A CAMT.053 statement's entries, each taken out of the tree as it ends."""
    stack: list[Any] = []
    acct = currency = ""
    seen = n = 0
    try:
        for event, el in DET.iterparse(f, events=("start", "end")):
            if event == "start":
                stack.append(el)
                seen |= _local(el.tag) == "BkToCstmrStmt"
                continue
            stack.pop()
            tag, parent = _local(el.tag), (_local(stack[-1].tag) if stack else "")
            if tag == "Acct" and parent == "Stmt":
                acct = _text(el, "Id/IBAN") or _text(el, "Id/Othr/Id")
                currency = _text(el, "Ccy")
            elif tag == "Ntry" and parent == "Stmt":
                n += 1
                yield _camt_entry(el, acct, currency, f"{name}, entry {n}")
                stack[-1].remove(el)
            elif tag == "Stmt" and stack:
                stack[-1].remove(el)
    except BankFileError:
        raise
    except Exception as e:  # ParseError, or defusedxml's refusal of entities and DTDs
        hint = f": {EXPORT}" if "encoding" in str(e) else ""
        raise BankFileError(
            f"{name} is not a readable CAMT.053 XML file ({_short(e)}){hint}"
        ) from None
    if not seen:
        raise BankFileError(f"{name}: no BkToCstmrStmt element: not a CAMT.053 statement")


def _day(e: Any, element: str) -> dt.date | None:
    """A CAMT date element (`Dt`, or `DtTm` with its offset) as the bank wrote it."""
    day, stamp = _text(e, f"{element}/Dt"), _text(e, f"{element}/DtTm")
    try:
        if day:
            return dt.date.fromisoformat(day)
        if stamp:
            return dt.datetime.fromisoformat(stamp).date()  # the day written, never UTC's
    except ValueError:
        return None
    return None


def _camt_entry(e: Any, acct: str, currency: str, where: str) -> BankRow:
    """One CAMT entry: amount signed by CdtDbtInd, booking date, the bank's reference."""
    amt = _find(e, "Amt")
    try:
        amount = Decimal((amt.text or "").strip()) if amt is not None else None
    except ArithmeticError:
        amount = None
    status = (_text(e, "Sts/Cd") or _text(e, "Sts") or "BOOK").upper()
    pending = status != "BOOK"
    day = _day(e, "BookgDt") or (_day(e, "ValDt") if pending else None)
    if amount is None or day is None:
        raise BankFileError(f"{where}: no amount (Amt) or booking date (BookgDt)")
    if _text(e, "CdtDbtInd") == "DBIT":
        amount = -amount
    details = "NtryDtls/TxDtls"
    txid = _text(e, "AcctSvcrRef") or _text(e, f"{details}/Refs/AcctSvcrRef") or _text(e, "NtryRef")
    party = _text(e, f"{details}/RltdPties/{'Cdtr' if amount < 0 else 'Dbtr'}/Nm")
    info = _text(e, f"{details}/RmtInf/Ustrd") or _text(e, "AddtlNtryInf")
    concept = party or info or "bank transaction"
    return BankRow(
        acct, txid, day, amount,
        (amt.get("Ccy") if amt is not None else None) or currency or "EUR", concept,
        info if info != concept else "", pending,
    )  # fmt: skip
