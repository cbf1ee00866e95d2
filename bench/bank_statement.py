"""A big bank statement read by `centsync import`'s reader: peak memory and time (issue 43).

    uv run --frozen python bench/bank_statement.py [--format ofx|camt053|both] [--mb 50]

Writes one statement of about `--mb` MB (OFX 2 XML, or CAMT.053) of card payments to a
temporary folder, then reads it in a fresh child process (so each figure is that read's alone)
through `centsync.pipelines.writeback.bank_read.read_statement`, the reader `centsync import`
uses, and prints the rows read (kept in a list, as the import keeps them), the seconds, the
child's CPU seconds (steadier than the wall clock on a shared machine) and its peak RSS
(ru_maxrss).
No statement is kept; nothing is asserted (the tests hold behaviour, not memory).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

OFX_HEAD = (
    '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
    '<?OFX OFXHEADER="200" VERSION="220" SECURITY="NONE" OLDFILEUID="NONE" NEWFILEUID="NONE"?>\n'
    "<OFX><SIGNONMSGSRSV1><SONRS><STATUS><CODE>0</CODE><SEVERITY>INFO</SEVERITY></STATUS>"
    "<DTSERVER>20261130120000</DTSERVER><LANGUAGE>ENG</LANGUAGE></SONRS></SIGNONMSGSRSV1>"
    "<BANKMSGSRSV1><STMTTRNRS><TRNUID>1</TRNUID><STATUS><CODE>0</CODE><SEVERITY>INFO</SEVERITY>"
    "</STATUS><STMTRS><CURDEF>EUR</CURDEF><BANKACCTFROM><BANKID>0049</BANKID>"
    "<ACCTID>000123456789</ACCTID><ACCTTYPE>CHECKING</ACCTTYPE></BANKACCTFROM>"
    "<BANKTRANLIST><DTSTART>20200101</DTSTART><DTEND>20261130</DTEND>\n"
)
OFX_ROW = (
    "<STMTTRN><TRNTYPE>DEBIT</TRNTYPE><DTPOSTED>{day}003000[+1:CET]</DTPOSTED>"
    "<TRNAMT>-{cents}</TRNAMT><FITID>F-{n}</FITID><NAME>Card payment {n}</NAME>"
    "<MEMO>card payment at a shop, reference {n}</MEMO></STMTTRN>\n"
)
OFX_TAIL = (
    "</BANKTRANLIST><LEDGERBAL><BALAMT>0.00</BALAMT><DTASOF>20261130</DTASOF></LEDGERBAL>"
    "</STMTRS></STMTTRNRS></BANKMSGSRSV1></OFX>\n"
)
CAMT_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.02"><BkToCstmrStmt>'
    "<GrpHdr><MsgId>M-1</MsgId></GrpHdr><Stmt><Id>S-1</Id><Acct><Id>"
    "<IBAN>ES9121000418450200051332</IBAN></Id><Ccy>EUR</Ccy></Acct>\n"
)
CAMT_ROW = (
    '<Ntry><Amt Ccy="EUR">{cents}</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts>BOOK</Sts>'
    "<BookgDt><Dt>{iso}</Dt></BookgDt><AcctSvcrRef>R-{n}</AcctSvcrRef><NtryDtls><TxDtls>"
    "<RltdPties><Cdtr><Nm>Card payment {n}</Nm></Cdtr></RltdPties><RmtInf>"
    "<Ustrd>card payment at a shop, reference {n}</Ustrd></RmtInf></TxDtls></NtryDtls></Ntry>\n"
)
CAMT_TAIL = "</Stmt></BkToCstmrStmt></Document>\n"


def write_statement(path: Path, fmt: str, mb: float) -> int:
    """A statement of about `mb` MB at `path`; its row count."""
    head, row, tail = (
        (OFX_HEAD, OFX_ROW, OFX_TAIL) if fmt == "ofx" else (CAMT_HEAD, CAMT_ROW, CAMT_TAIL)
    )
    start, n, size = dt.date(2020, 1, 1), 0, 0
    with path.open("w", encoding="utf-8") as f:
        f.write(head)
        while size < mb * 1_000_000:
            day = start + dt.timedelta(days=n % 2500)
            line = row.format(
                day=day.strftime("%Y%m%d"), iso=day.isoformat(), cents=f"{n % 9000 + 1}.25", n=n
            )
            f.write(line)
            size += len(line)
            n += 1
        f.write(tail)
    return n


CHILD = """
import json, resource, sys, time
from pathlib import Path
from centsync.pipelines.writeback.bank_read import read_statement
t = time.perf_counter()
fmt, rows = read_statement(Path(sys.argv[1]))
n = len(rows)  # the rows are kept, as `centsync import` keeps them
used = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"format": fmt, "rows": n, "seconds": round(time.perf_counter() - t, 2),
                  "cpu_seconds": round(used.ru_utime + used.ru_stime, 2),
                  "peak_rss_mb": round(used.ru_maxrss / 1024)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--format", choices=["ofx", "camt053", "both"], default="both")
    ap.add_argument("--mb", type=float, default=50.0)
    args = ap.parse_args()
    formats = ["ofx", "camt053"] if args.format == "both" else [args.format]
    with tempfile.TemporaryDirectory(prefix="centsync-bank-") as tmp:
        for fmt in formats:
            path = Path(tmp) / ("big.ofx" if fmt == "ofx" else "big.xml")
            written = write_statement(path, fmt, args.mb)
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(path)], check=True, capture_output=True, text=True
            ).stdout
            figures = json.loads(out.strip().splitlines()[-1])
            size = path.stat().st_size / 1_000_000
            print(
                f"{fmt}: {size:.1f} MB, {written} rows written, {figures['rows']} read in "
                f"{figures['seconds']} s ({figures['cpu_seconds']} CPU-s, the child's whole life), "
                f"peak RSS {figures['peak_rss_mb']} MB"
            )


if __name__ == "__main__":
    main()
