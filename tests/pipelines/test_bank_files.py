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
