"""Bank files into the inbox: an OFX/QFX statement (parsed by ofxtools) or a CAMT.053 statement
(parsed by defusedxml's ElementTree) becomes an inbox CSV of `create` rows.

Each row's event id is the bank's own transaction id (`bank:<file account id>:<FITID or
AcctSvcrRef>`), so the same statement imported twice, or two overlapping statements, give the
same keys: each transaction is posted once. The account is chosen by a mapping from the file's
account id (the `[accounts]` table of a TOML file, or `--account ID=NAME`). A row the service
already has from its bank feed (the same account, day and amount, not created by this outbox) is
held as a likely duplicate in `inbox/held/`, never posted: move that file into the inbox to post
its rows anyway.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import defusedxml.ElementTree as DET

from centsync.pipelines.results import BankFormat, ImportFileResult
from centsync.pipelines.writeback import inbox_csv, intake
from centsync.transform import writeback as wb
from centsync.warehouse.errors import NoWarehouseError
from centsync.warehouse.outbox import Outbox, outbox_path
from centsync.warehouse.paths import reading
from centsync.warehouse.reads import ledger_rows_between

CSV_COLUMNS = ("event_id", "account", "booked_at", "amount", "concept", "notes")


class BankFileError(ValueError):
    """A bank file that cannot be imported: what is wrong and what to do."""


@dataclass(frozen=True)
class BankRow:
    """One transaction of a statement, as the bank wrote it."""

    account_ref: str  # the file's account id (OFX ACCTID, CAMT IBAN or other id)
    txid: str  # the bank's transaction id (FITID, AcctSvcrRef); "" when it gave none
    booked_at: dt.date
    amount: Decimal  # negative is money out
    currency: str
    concept: str
    notes: str = ""


# ---------------------------------------------------------------------------------- reading


def read_bank_file(data: bytes, name: str) -> tuple[BankFormat, list[BankRow]]:
    """(format, rows) of a statement's bytes: CAMT.053 XML or OFX/QFX (1.x SGML or 2.x XML)."""
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if b"BkToCstmrStmt" in data[:65536] or b"camt.053" in head:
        return "camt053", _camt(data, name)
    if b"OFXHEADER" in head or b"<OFX>" in data[:65536].upper():
        return "ofx", _ofx(data, name)
    raise BankFileError(
        f"{name} is neither an OFX/QFX statement (no OFXHEADER) nor a CAMT.053 one (no "
        "BkToCstmrStmt): export the statement from your bank as OFX, QFX or CAMT.053"
    )


def _ofx(data: bytes, name: str) -> list[BankRow]:
    """An OFX/QFX statement's transactions, through ofxtools."""
    from ofxtools.Parser import OFXTree

    tree = OFXTree()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ofxtools warns on over-long ids; they are kept
            tree.parse(io.BytesIO(data))
            ofx = tree.convert()
    except Exception as e:  # ofxtools raises many kinds for a malformed file
        raise BankFileError(f"{name} is not a readable OFX statement ({e})") from None
    rows = []
    for st in ofx.statements:
        acct = str(st.account.acctid)
        for t in st.banktranlist or []:
            concept = str(t.name or t.memo or t.trntype or "bank transaction")
            memo = str(t.memo or "")
            rows.append(
                BankRow(
                    acct, str(t.fitid or ""), t.dtposted.date(), Decimal(t.trnamt),
                    str(getattr(getattr(t, "currency", None), "cursym", None) or st.curdef), concept,
                    memo if memo != concept else "",
                )
            )  # fmt: skip
    return rows


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


def _camt(data: bytes, name: str) -> list[BankRow]:
    """A CAMT.053 statement's booked entries (defusedxml: no entity expansion, no DTDs)."""
    try:
        root = DET.fromstring(data)
    except Exception as e:  # ParseError, or defusedxml's refusal of entities and DTDs
        raise BankFileError(f"{name} is not a readable CAMT.053 XML file ({e})") from None
    statement = _find(root, "BkToCstmrStmt")
    if statement is None:
        raise BankFileError(f"{name}: no BkToCstmrStmt element: not a CAMT.053 statement")
    rows = []
    for st in (c for c in statement if _local(c.tag) == "Stmt"):
        acct = _text(st, "Acct/Id/IBAN") or _text(st, "Acct/Id/Othr/Id")
        for n, entry in enumerate((c for c in st if _local(c.tag) == "Ntry"), 1):
            rows.append(_camt_entry(entry, acct, _text(st, "Acct/Ccy"), f"{name}, entry {n}"))
    return rows


def _camt_entry(e: Any, acct: str, currency: str, where: str) -> BankRow:
    """One CAMT entry: amount signed by CdtDbtInd, booking date, the bank's reference."""
    amt = _find(e, "Amt")
    try:
        amount = Decimal((amt.text or "").strip()) if amt is not None else None
    except ArithmeticError:
        amount = None
    day = _text(e, "BookgDt/Dt") or _text(e, "BookgDt/DtTm")[:10]
    if amount is None or not re.match(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", day):
        raise BankFileError(f"{where}: no amount (Amt) or booking date (BookgDt)")
    if _text(e, "CdtDbtInd") == "DBIT":
        amount = -amount
    details = "NtryDtls/TxDtls"
    txid = _text(e, "AcctSvcrRef") or _text(e, f"{details}/Refs/AcctSvcrRef") or _text(e, "NtryRef")
    party = _text(e, f"{details}/RltdPties/{'Cdtr' if amount < 0 else 'Dbtr'}/Nm")
    info = _text(e, f"{details}/RmtInf/Ustrd") or _text(e, "AddtlNtryInf")
    concept = party or info or "bank transaction"
    return BankRow(
        acct, txid, dt.date.fromisoformat(day), amount,
        (amt.get("Ccy") if amt is not None else None) or currency or "EUR", concept,
        info if info != concept else "",
    )  # fmt: skip


# ---------------------------------------------------------------------------------- importing


def event_id(row: BankRow) -> str:
    """The row's event id: the bank's own transaction id under the file's account id."""
    return f"bank:{row.account_ref}:{row.txid}" if row.txid else ""


def _cells(row: BankRow, account: str) -> dict[str, str]:
    """A bank row as the inbox's columns (concept cut to the contract's 200 code points)."""
    concept = " ".join(row.concept.split())[: wb.MAX_CONCEPT] or "bank transaction"
    return {
        "event_id": event_id(row),
        "account": account,
        "booked_at": row.booked_at.isoformat(),
        "amount": format(row.amount, "f"),
        "concept": concept,
        "notes": row.notes[: wb.MAX_NOTES],
    }


def _mapped(rows: list[BankRow], accounts: Mapping[str, str], name: str) -> None:
    """Every account id of the file must be mapped to an account."""
    unmapped = sorted({r.account_ref for r in rows} - set(accounts))
    if unmapped:
        raise BankFileError(
            f"{name}: the file's account {', '.join(map(repr, unmapped))} is not mapped to an "
            f'account: add `"{unmapped[0]}" = "<account name>"` under [accounts] in the file '
            f"given to --account-map, or pass --account {unmapped[0]}=<account name or id>"
        )


def import_bank_file(
    warehouse: Path,
    inbox: Path,
    path: Path,
    accounts: Mapping[str, str],
    *,
    dry_run: bool,
) -> ImportFileResult:
    """One bank file into the inbox: new rows in an inbox CSV, likely duplicates held."""
    path = Path(path)
    fmt, rows = read_bank_file(path.read_bytes(), path.name)
    run = ImportFileResult(file=path.name, format=fmt, rows=len(rows), dry_run=dry_run)
    if not rows:
        return run
    _mapped(rows, accounts, path.name)
    cells = [_cells(r, accounts[r.account_ref]) for r in rows]
    ref = intake.reference(warehouse, [wb.SourceRow(0, c, "") for c in cells])
    if ref is None:
        raise NoWarehouseError(f"no warehouse at {warehouse}: run `centsync refresh` first")
    ids = _account_ids(cells, ref, path.name)
    _same_currency(rows, cells, ids, ref, path.name)
    outbox = Outbox(outbox_path(Path(warehouse)))
    known = {r["idempotency_key"] for r in outbox.rows("state <> 'rejected'")}
    known |= _waiting(inbox)
    feed = _bank_feed(warehouse, rows, ids, outbox, ref)
    new_rows, held_rows = [], []
    for r, c in zip(rows, cells, strict=True):
        key = _key(c)
        mark = (ids[c["account"]], r.booked_at, _cents(r, ref, ids[c["account"]]))
        if key and key in known:
            run.already_imported.append(c)
        elif feed[mark] > 0:
            feed[mark] -= 1
            held_rows.append(c)
        else:
            new_rows.append(c)
    run.new, run.held = new_rows, held_rows
    if not dry_run:
        stem = f"{path.stem}.{fmt}"
        if new_rows:
            run.inbox_file = str(_write(inbox, f"{stem}.csv", new_rows))
        # a row held by an earlier import of the same statement is not held twice over
        held_before = _waiting(inbox / "held")
        fresh = [c for c in held_rows if _key(c) not in held_before]
        if fresh:
            run.held_file = str(_write(inbox / "held", f"{stem}.held.csv", fresh))
    return run


def _key(cells: Mapping[str, str]) -> str:
    """The idempotency key an inbox row with an event id is posted under ("" without one)."""
    given = cells.get("event_id", "").strip()
    return wb.derive_key("inbox", f"event:{given}", "create") if given else ""


def _waiting(folder: Path) -> set[str]:
    """The keys of the rows with event ids in a folder's CSV files (the inbox: imported, not yet
    posted; inbox/held: held already): importing the same statement again adds nothing."""
    return {
        _key(r.cells)
        for f in intake.inbox_files(folder)
        for r in inbox_csv.read_csv(f.read_bytes()).rows
        if r.cells.get("event_id", "").strip()
    }


def _account_ids(cells: list[dict[str, str]], ref: wb.Reference, name: str) -> dict[str, str]:
    """Each mapped account (a name or id) -> its id in the warehouse."""
    out = {}
    for account in sorted({c["account"] for c in cells}):
        found = ref.accounts.filter(
            (ref.accounts["name"] == account) | (ref.accounts["id"] == account.lower())
        )
        if found.height != 1:
            raise BankFileError(
                f"{name}: the account map names {account!r}, which is "
                f"{'not an account' if not found.height else 'several accounts'} of the "
                f"warehouse: {wb.did_you_mean(account, ref.accounts['name'].to_list())}map the "
                "file's account id to an account's exact name or id"
            )
        out[account] = str(found.item(0, "id"))
    return out


def _same_currency(
    rows: list[BankRow],
    cells: list[dict[str, str]],
    ids: Mapping[str, str],
    ref: wb.Reference,
    name: str,
) -> None:
    """A statement in another currency than its account's would post wrong amounts: refused."""
    currency = dict(
        zip(ref.accounts["id"].to_list(), ref.accounts["currency"].to_list(), strict=True)
    )
    for r, c in zip(rows, cells, strict=True):
        theirs = str(currency[ids[c["account"]]] or "EUR").upper()
        if r.currency.upper() != theirs:
            raise BankFileError(
                f"{name}: transaction {r.txid or r.booked_at} is in {r.currency} but "
                f"{c['account']!r} keeps {theirs}: map the file's account {r.account_ref!r} to "
                f"an account in {r.currency}"
            )


def _cents(row: BankRow, ref: wb.Reference, account_id: str) -> int | None:
    """The row's amount in cents, or None when it is not one (the write-back rejects it)."""
    currency = str(ref.accounts.filter(ref.accounts["id"] == account_id).item(0, "currency"))
    try:
        return wb.parse_amount(format(row.amount, "f"), currency)
    except wb.RowError:
        return None


def _bank_feed(
    warehouse: Path,
    rows: list[BankRow],
    ids: Mapping[str, str],
    outbox: Outbox,
    ref: wb.Reference,
) -> Counter[tuple[str, dt.date, int | None]]:
    """(account, day, amount) of the ledger's rows in the file's days that this outbox did not
    create: what the service already has from its bank feed."""
    ours = outbox.server_ids()
    days = min(r.booked_at for r in rows), max(r.booked_at for r in rows)
    with reading(warehouse) as con:
        ledger = ledger_rows_between(con, sorted(set(ids.values())), *days)
    return Counter(
        (t["account_id"], t["booked_at"], t["amount"])
        for t in ledger.iter_rows(named=True)
        if t["id"] not in ours
    )


def _write(folder: Path, name: str, rows: list[dict[str, str]]) -> Path:
    """An inbox CSV of rows (a new name when one is there already)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    n = 1
    while target.exists():
        target = folder / name.replace(".csv", f".{n}.csv")
        n += 1
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    tmp = target.with_name(f".{target.name}.part")  # the inbox never sees half a file
    tmp.write_text(buf.getvalue(), "utf-8")
    tmp.replace(target)
    return target
