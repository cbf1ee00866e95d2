"""Bank files read: OFX written by ofxtools' own models and CAMT.053 read back exactly (amounts
signed, dates, the bank's ids as event ids); hostile or foreign files refused with a reason."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from centsync.pipelines.writeback.bank_files import BankFileError, event_id, read_bank_file

from .statements import camt_statement, ofx_statement

DAY = dt.date(2026, 11, 20)
ROWS = [
    ("T-1", DAY, "-13.37", "Ferreteria Sol"),
    ("T-2", DAY - dt.timedelta(1), "120.00", "Employer"),
]


@pytest.mark.parametrize(
    ("fmt", "data"),
    [("ofx", ofx_statement("000123456789", ROWS)), ("camt053", camt_statement("ES91", ROWS))],
)
def test_a_statement_reads_back_exactly(fmt: str, data: bytes) -> None:
    found, rows = read_bank_file(data, "s")
    assert found == fmt
    assert [(r.txid, r.booked_at, r.amount, r.concept, r.currency) for r in rows] == [
        ("T-1", DAY, Decimal("-13.37"), "Ferreteria Sol", "EUR"),
        ("T-2", DAY - dt.timedelta(1), Decimal("120.00"), "Employer", "EUR"),
    ]
    assert event_id(rows[0]) == f"bank:{rows[0].account_ref}:T-1"


SGML = (
    "OFXHEADER:100\nDATA:OFXSGML\nVERSION:102\nSECURITY:NONE\nENCODING:USASCII\nCHARSET:1252\n"
    "COMPRESSION:NONE\nOLDFILEUID:NONE\nNEWFILEUID:NONE\n\n<OFX><SIGNONMSGSRSV1><SONRS><STATUS>"
    "<CODE>0<SEVERITY>INFO</STATUS><DTSERVER>20261120<LANGUAGE>ENG</SONRS></SIGNONMSGSRSV1>"
    "<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS><STMTRS>"
    "<CURDEF>EUR<BANKACCTFROM><BANKID>1<ACCTID>42<ACCTTYPE>CHECKING</BANKACCTFROM>"
    "<BANKTRANLIST><DTSTART>20261101<DTEND>20261120<STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20261110"
    "<TRNAMT>-5.50<FITID>X-9<NAME>Kiosk</STMTTRN><STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20261111"
    "<TRNAMT>-6.50<FITID>X-10<NAME>Bakery<MEMO>bread</STMTTRN></BANKTRANLIST><LEDGERBAL>"
    "<BALAMT>1.00<DTASOF>20261120</LEDGERBAL></STMTRS></STMTTRNRS></BANKMSGSRSV1></OFX>\n"
)


def test_an_ofx_1_sgml_statement_reads_too() -> None:
    sgml = (
        "OFXHEADER:100\nDATA:OFXSGML\nVERSION:102\nSECURITY:NONE\nENCODING:USASCII\nCHARSET:1252\n"
        "COMPRESSION:NONE\nOLDFILEUID:NONE\nNEWFILEUID:NONE\n\n<OFX><SIGNONMSGSRSV1><SONRS><STATUS>"
        "<CODE>0<SEVERITY>INFO</STATUS><DTSERVER>20261120<LANGUAGE>ENG</SONRS></SIGNONMSGSRSV1>"
        "<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS><STMTRS>"
        "<CURDEF>EUR<BANKACCTFROM><BANKID>1<ACCTID>42<ACCTTYPE>CHECKING</BANKACCTFROM>"
        "<BANKTRANLIST><DTSTART>20261101<DTEND>20261120<STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20261110"
        "<TRNAMT>-5.50<FITID>X-9<NAME>Kiosk</STMTTRN></BANKTRANLIST><LEDGERBAL><BALAMT>1.00"
        "<DTASOF>20261120</LEDGERBAL></STMTRS></STMTTRNRS></BANKMSGSRSV1></OFX>\n"
    )
    fmt, rows = read_bank_file(sgml.encode("ascii"), "old.qfx")
    assert fmt == "ofx"
    assert [(r.account_ref, r.txid, r.amount, r.booked_at) for r in rows] == [
        ("42", "X-9", Decimal("-5.50"), dt.date(2026, 11, 10))
    ]


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"<html>hello</html>", "neither an OFX/QFX statement"),
        (b"OFXHEADER:100\n\n<OFX><broken", "not a readable OFX statement"),
        (
            b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
            b"<Document><BkToCstmrStmt>&b;</BkToCstmrStmt></Document>",
            "not a readable CAMT.053 XML file",
        ),
    ],
)
def test_a_file_that_is_no_statement_or_is_hostile_is_refused(data: bytes, words: str) -> None:
    with pytest.raises(BankFileError) as e:
        read_bank_file(data, "f")
    assert words in str(e.value)


# ------------------------------------------------------------- the bank's own calendar day

NOV19 = dt.date(2026, 11, 19)


@pytest.mark.parametrize(
    ("written", "day"),
    [
        ("20261119003000[+1:CET]", NOV19),  # UTC: 2026-11-18 23:30
        ("20261118233000[-5:EST]", dt.date(2026, 11, 18)),  # UTC: 2026-11-19 04:30
        ("20261201003000.000[+1:CET]", dt.date(2026, 12, 1)),  # UTC: the month before
        ("20261130200000[-5:EST]", dt.date(2026, 11, 30)),  # UTC: the month after
        ("20261119003000", NOV19),  # no offset (GMT, as written)
        ("20261119", NOV19),  # a date alone
    ],
)
def test_an_ofx_row_is_booked_on_the_day_the_bank_wrote(written: str, day: dt.date) -> None:
    data = ofx_statement("42", [("T-1", NOV19, "-9.99", "Late kiosk")], posted={"T-1": written})
    assert written.encode() in data
    _, rows = read_bank_file(data, "s.ofx")
    assert [(r.txid, r.booked_at) for r in rows] == [("T-1", day)]


@pytest.mark.parametrize(
    ("stamp", "day"),
    [
        ("2026-11-19T00:30:00+01:00", NOV19),
        ("2026-11-18T23:30:00-05:00", dt.date(2026, 11, 18)),
        ("2026-12-01T00:30:00+01:00", dt.date(2026, 12, 1)),
        ("2026-11-30T20:00:00-05:00", dt.date(2026, 11, 30)),
        ("2026-11-19T10:00:00Z", NOV19),
    ],
)
def test_a_camt_booking_stamp_is_booked_on_the_day_the_bank_wrote(stamp: str, day: dt.date) -> None:
    data = camt_statement("ES91", [("R-1", NOV19, "-9.99", "Late kiosk")], stamps={"R-1": stamp})
    _, rows = read_bank_file(data, "s.xml")
    assert [(r.txid, r.booked_at, r.pending) for r in rows] == [("R-1", day, False)]


def test_a_pending_camt_entry_is_read_as_pending_in_either_status_form() -> None:
    rows = [("P-1", NOV19, "-4.20", "Pending shop"), ("B-1", NOV19, "-1.00", "Booked shop")]
    data = camt_statement("ES91", rows, pending=frozenset({"P-1"}))
    _, read = read_bank_file(data, "s.xml")
    assert [(r.txid, r.booked_at, r.pending) for r in read] == [
        ("P-1", NOV19, True),
        ("B-1", NOV19, False),
    ]
    nested = data.replace(b"<Sts>PDNG</Sts>", b"<Sts><Cd>PDNG</Cd></Sts>")  # camt.053.001.08+
    assert [r.pending for r in read_bank_file(nested, "s.xml")[1]] == [True, False]


# ------------------------------------------------------------- streamed, chunk by chunk


def test_a_statement_read_in_tiny_chunks_reads_every_row_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from centsync.pipelines.writeback import bank_read

    many = [
        (f"T-{n}", DAY - dt.timedelta(n % 40), f"-{n}.{n % 100:02d}", f"Shop {n}")
        for n in range(1, 300)
    ]
    whole = {}
    for fmt, data in [
        ("ofx", ofx_statement("42", many)),
        ("camt053", camt_statement("ES91", many)),
    ]:
        whole[fmt] = [
            (r.txid, r.booked_at, r.amount, r.concept) for r in read_bank_file(data, "s")[1]
        ]
    sgml = read_bank_file(SGML.encode("ascii"), "old.qfx")[1]
    monkeypatch.setattr(bank_read, "CHUNK", 7)
    assert read_bank_file(SGML.encode("ascii"), "old.qfx")[1] == sgml  # unclosed leaves too
    monkeypatch.setattr(bank_read, "CHUNK", 97)  # every tag and text cut somewhere
    for fmt, data in [
        ("ofx", ofx_statement("42", many)),
        ("camt053", camt_statement("ES91", many)),
    ]:
        got = [(r.txid, r.booked_at, r.amount, r.concept) for r in read_bank_file(data, "s")[1]]
        assert got == whole[fmt]
        assert got == [(t, d, Decimal(a), n) for t, d, a, n in many]


# ------------------------------------------------------------- encodings

NAMED = [("T-1", DAY, "-3.50", "Café Niño Ærø")]


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-8"])
def test_an_ofx_file_with_a_byte_order_mark_is_read(codec: str) -> None:
    text = ofx_statement("42", NAMED).decode("utf-8")
    bom = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff", "utf-8": b"\xef\xbb\xbf"}[codec]
    fmt, rows = read_bank_file(bom + text.encode(codec), "utf16.ofx")
    assert (fmt, [(r.txid, r.concept, r.amount) for r in rows]) == (
        "ofx",
        [("T-1", "Café Niño Ærø", Decimal("-3.50"))],
    )


def test_an_ofx_1_file_is_decoded_by_the_charset_it_declares() -> None:
    sgml = (
        "OFXHEADER:100\nDATA:OFXSGML\nVERSION:102\nSECURITY:NONE\nENCODING:USASCII\nCHARSET:1252\n"
        "COMPRESSION:NONE\nOLDFILEUID:NONE\nNEWFILEUID:NONE\n\n<OFX><SIGNONMSGSRSV1><SONRS><STATUS>"
        "<CODE>0<SEVERITY>INFO</STATUS><DTSERVER>20261120<LANGUAGE>ENG</SONRS></SIGNONMSGSRSV1>"
        "<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS><STMTRS>"
        "<CURDEF>EUR<BANKACCTFROM><BANKID>1<ACCTID>42<ACCTTYPE>CHECKING</BANKACCTFROM>"
        "<BANKTRANLIST><DTSTART>20261101<DTEND>20261120<STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20261110"
        "<TRNAMT>-5.50<FITID>X-9<NAME>Café €uro</STMTTRN></BANKTRANLIST><LEDGERBAL><BALAMT>1.00"
        "<DTASOF>20261120</LEDGERBAL></STMTRS></STMTTRNRS></BANKMSGSRSV1></OFX>\n"
    )
    assert [r.concept for r in read_bank_file(sgml.encode("cp1252"), "old.qfx")[1]] == ["Café €uro"]
    klingon = sgml.replace("CHARSET:1252", "CHARSET:KLINGON").encode("cp1252")
    with pytest.raises(BankFileError) as e:
        read_bank_file(klingon, "k.qfx")
    assert "declares the character set 'KLINGON', which centsync cannot read" in str(e.value)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "is a PDF document, not a bank statement"),
        (b"PK\x03\x04\x14\x00\x06\x00", "is a ZIP archive"),
        (ofx_statement("42", NAMED).decode().encode("utf-16-le"), "without a byte-order mark"),
        (ofx_statement("42", NAMED).decode().encode("utf-32"), None),  # UTF-32 with its mark: read
        (ofx_statement("42", NAMED).decode().encode("latin-1"), "is not utf-8 text as it says"),
    ],
)
def test_a_file_in_an_encoding_centsync_cannot_read_is_refused_saying_what_it_is(
    data: bytes, words: str | None
) -> None:
    if words is None:
        assert [r.concept for r in read_bank_file(data, "f")[1]] == ["Café Niño Ærø"]
        return
    with pytest.raises(BankFileError) as e:
        read_bank_file(data, "f")
    assert words in str(e.value) and "export the statement from your bank again" in str(e.value)


def test_an_ofx_pending_list_is_read_as_pending_rows_on_the_banks_day() -> None:
    pending = (
        "<BANKTRANLISTP><DTASOF>20261120</DTASOF><STMTTRNP><TRNTYPE>POS</TRNTYPE>"
        "<DTTRAN>20261120003000[+1:CET]</DTTRAN><TRNAMT>-4.20</TRNAMT><REFNUM>H-1</REFNUM>"
        "<NAME>Pending shop</NAME></STMTTRNP><STMTTRNP><TRNTYPE>POS</TRNTYPE>"
        "<DTTRAN>20261119</DTTRAN><TRNAMT>-1.10</TRNAMT><NAME>No id shop</NAME></STMTTRNP>"
        "</BANKTRANLISTP>"
    )
    data = ofx_statement("42", ROWS[:1]).replace(
        b"</BANKTRANLIST>", f"</BANKTRANLIST>{pending}".encode()
    )
    _, rows = read_bank_file(data, "p.ofx")
    assert [(r.txid, r.booked_at, r.amount, r.concept, r.pending) for r in rows] == [
        ("T-1", DAY, Decimal("-13.37"), "Ferreteria Sol", False),
        ("H-1", DAY, Decimal("-4.20"), "Pending shop", True),
        ("", NOV19, Decimal("-1.10"), "No id shop", True),
    ]
    assert event_id(rows[2]).startswith("bank:42:pending-")
    assert event_id(rows[2]) == event_id(read_bank_file(data, "again.ofx")[1][2])
