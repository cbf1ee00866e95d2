"""Bank statements for the tests, written by the parsers' own side: OFX through ofxtools'
models (its writer), CAMT.053 through ElementTree."""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from decimal import Decimal

from ofxtools.header import make_header
from ofxtools.models import (
    BANKACCTFROM,
    BANKMSGSRSV1,
    BANKTRANLIST,
    FI,
    LEDGERBAL,
    OFX,
    SIGNONMSGSRSV1,
    SONRS,
    STATUS,
    STMTRS,
    STMTTRN,
    STMTTRNRS,
)
from ofxtools.utils import UTC

# (transaction id, day, amount in currency units, name)
Row = tuple[str, dt.date, str, str]


def _at(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, 12, tzinfo=UTC)


def ofx_statement(
    acctid: str, rows: list[Row], currency: str = "EUR", posted: Mapping[str, str] | None = None
) -> bytes:
    """An OFX 2.2 bank statement of these rows; `posted` writes a transaction's DTPOSTED as
    given (by FITID: `20261119003000[+1:CET]`), as a bank in another timezone writes it."""
    days = [r[1] for r in rows]
    trns = [
        STMTTRN(
            trntype="DEBIT" if Decimal(amount) < 0 else "CREDIT",
            dtposted=_at(day),
            trnamt=Decimal(amount),
            fitid=fitid,
            name=name,
            memo=f"card payment {fitid}",
        )
        for fitid, day, amount, name in rows
    ]
    status = STATUS(code=0, severity="INFO")
    stmtrs = STMTRS(
        curdef=currency,
        bankacctfrom=BANKACCTFROM(bankid="0049", acctid=acctid, accttype="CHECKING"),
        ledgerbal=LEDGERBAL(balamt=Decimal("0.00"), dtasof=_at(max(days))),
        banktranlist=BANKTRANLIST(*trns, dtstart=_at(min(days)), dtend=_at(max(days))),
    )
    ofx = OFX(
        signonmsgsrsv1=SIGNONMSGSRSV1(
            sonrs=SONRS(
                status=status, dtserver=_at(max(days)), language="ENG", fi=FI(org="B", fid="1")
            )
        ),
        bankmsgsrsv1=BANKMSGSRSV1(STMTTRNRS(trnuid="1", status=status, stmtrs=stmtrs)),
    )
    tree = ofx.to_etree()
    for trn in tree.iter("STMTTRN"):
        written = (posted or {}).get(trn.findtext("FITID") or "")
        if written:
            trn.find("DTPOSTED").text = written  # type: ignore[union-attr]
    return (str(make_header(version=220)) + ET.tostring(tree, encoding="unicode")).encode()


def camt_statement(
    iban: str,
    rows: list[Row],
    currency: str = "EUR",
    *,
    stamps: Mapping[str, str] | None = None,
    pending: frozenset[str] = frozenset(),
) -> bytes:
    """A CAMT.053.001.02 statement of these rows: booked entries (`BookgDt/Dt`, or `DtTm` as
    `stamps` gives it by reference), or pending ones (their references in `pending`: `Sts`
    PDNG and a value date only)."""
    ns = "urn:iso:std:iso:20022:tech:xsd:camt.053.001.02"
    doc = ET.Element("Document", xmlns=ns)
    stmt = ET.SubElement(ET.SubElement(doc, "BkToCstmrStmt"), "Stmt")
    ET.SubElement(stmt, "Id").text = "STMT-1"
    acct = ET.SubElement(stmt, "Acct")
    ET.SubElement(ET.SubElement(acct, "Id"), "IBAN").text = iban
    ET.SubElement(acct, "Ccy").text = currency
    for ref, day, amount, name in rows:
        e = ET.SubElement(stmt, "Ntry")
        value = Decimal(amount)
        ET.SubElement(e, "Amt", Ccy=currency).text = format(abs(value), "f")
        ET.SubElement(e, "CdtDbtInd").text = "DBIT" if value < 0 else "CRDT"
        ET.SubElement(e, "Sts").text = "PDNG" if ref in pending else "BOOK"
        stamp = (stamps or {}).get(ref)
        when = ET.SubElement(e, "ValDt" if ref in pending else "BookgDt")
        ET.SubElement(when, "DtTm" if stamp else "Dt").text = stamp or day.isoformat()
        ET.SubElement(e, "AcctSvcrRef").text = ref
        tx = ET.SubElement(ET.SubElement(e, "NtryDtls"), "TxDtls")
        party = "Cdtr" if value < 0 else "Dbtr"
        ET.SubElement(ET.SubElement(ET.SubElement(tx, "RltdPties"), party), "Nm").text = name
        ET.SubElement(ET.SubElement(tx, "RmtInf"), "Ustrd").text = f"transfer {ref}"
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(doc)
