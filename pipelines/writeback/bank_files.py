"""Bank files into the inbox: an OFX/QFX or CAMT.053 statement (read, streamed, by bank_read)
becomes an inbox CSV of `create` rows.

Each row's event id is the bank's own transaction id (`bank:<file account id>:<FITID or
AcctSvcrRef>`), so the same statement imported twice, or two overlapping statements, give the
same keys: each transaction is posted once. The account is chosen by a mapping from the file's
account id (the `[accounts]` table of a TOML file, or `--account ID=NAME`).

Likely duplicates are held in `inbox/held/`, never posted (move a held file into the inbox to
post its rows anyway): a row of the same account and exact amount, within
`transform.duplicates.DUPLICATE_WINDOW_DAYS` days, as a ledger row this outbox did not create
(the bank feed's) or as a row of another statement (posted, or waiting in the inbox); the
candidate is shown. A pending entry is only ever held (`<file>.pending.csv`), and when its booked
entry arrives under a new reference that entry replaces it: the held row is removed.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from centsync.pipelines.results import ImportFileResult
from centsync.pipelines.writeback import inbox_csv, intake
from centsync.pipelines.writeback.bank_read import (
    BankFileError,
    BankRow,
    read_bank_file,
    read_statement,
)
from centsync.transform import duplicates as dup
from centsync.transform import writeback as wb
from centsync.warehouse.errors import NoWarehouseError
from centsync.warehouse.outbox import Outbox, outbox_path
from centsync.warehouse.paths import reading
from centsync.warehouse.reads import ledger_rows_between

__all__ = ["BankFileError", "BankRow", "event_id", "import_bank_file", "read_bank_file"]

CSV_COLUMNS = ("event_id", "account", "booked_at", "amount", "concept", "notes")
PENDING_SUFFIX = ".pending.csv"  # a held file of pending entries (inbox/held/)


# ---------------------------------------------------------------------------------- importing


def event_id(row: BankRow) -> str:
    """The row's event id: the bank's own transaction id under the file's account id (a pending
    row without one: its day, amount and payee, so importing it again holds it once)."""
    if row.txid:
        return f"bank:{row.account_ref}:{row.txid}"
    if row.pending:
        what = f"{row.booked_at}|{row.amount}|{row.concept}".encode()
        return f"bank:{row.account_ref}:pending-{hashlib.sha256(what).hexdigest()[:16]}"
    return ""


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
    """One bank file into the inbox: new rows in an inbox CSV, likely duplicates and pending
    entries held, held pending entries replaced by their booked ones."""
    path = Path(path)
    fmt, rows = read_statement(path)
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
    mine = {c["event_id"] for c in cells if c["event_id"]}
    held_cells: dict[str, dict[str, str]] = {}
    dups = dup.LikelyDuplicates(
        _candidates(warehouse, inbox, rows, ids, outbox, ref, mine, held_cells)
    )
    replaced = _sort(run, rows, cells, ids, ref, known, dups, held_cells)
    if not dry_run:
        _write_all(run, inbox, f"{path.stem}.{fmt}", replaced)
    return run


def _shown(c: dup.Candidate) -> dict[str, str]:
    """A candidate as the result shows it: what it is, its id, day and payee."""
    return {"kind": c.kind, "id": c.id, "booked_at": c.booked_at.isoformat(), "concept": c.concept}


def _sort(
    run: ImportFileResult,
    rows: list[BankRow],
    cells: list[dict[str, str]],
    ids: Mapping[str, str],
    ref: wb.Reference,
    known: set[str],
    dups: dup.LikelyDuplicates,
    held_cells: Mapping[str, dict[str, str]],
) -> list[dup.Candidate]:
    """Each row new, already imported, held (with its candidate), pending (held) or superseded
    (a pending row whose booked entry is known); the held pending rows replaced are returned."""
    replaced = []
    for r, c in zip(rows, cells, strict=True):
        account = ids[c["account"]]
        cents = _cents(r, ref, account)
        if (key := _key(c)) and key in known:
            run.already_imported.append(c)
        elif r.pending:
            booked = dups.claim(account, r.booked_at, cents, ["statement"])
            if booked is not None:
                run.superseded.append({**c, "by": _shown(booked)})
            else:
                feed = dups.claim(account, r.booked_at, cents, ["bank feed"])
                run.pending.append({**c, "candidate": _shown(feed) if feed else None})
        else:
            pending = dups.claim(account, r.booked_at, cents, ["pending"])
            if pending is not None:
                replaced.append(pending)
                by = {"kind": "statement", "id": c["event_id"], "booked_at": c["booked_at"]}
                run.superseded.append(
                    {**held_cells[pending.id], "by": {**by, "concept": c["concept"]}}
                )
            dup = dups.claim(account, r.booked_at, cents, ["bank feed", "statement"])
            if dup is not None:
                run.held.append({**c, "candidate": _shown(dup)})
            else:
                run.new.append(c)
    return replaced


def _write_all(
    run: ImportFileResult, inbox: Path, stem: str, replaced: list[dup.Candidate]
) -> None:
    """The new rows into the inbox, the fresh held and pending rows into inbox/held/, the
    replaced pending rows out of their held files."""
    if run.new:
        run.inbox_file = str(_write(inbox, f"{stem}.csv", run.new))
    # a row held by an earlier import of the same statement is not held twice over
    held_before = _waiting(inbox / "held")
    fresh = [c for c in run.held if _key(c) not in held_before]
    if fresh:
        run.held_file = str(_write(inbox / "held", f"{stem}.held.csv", fresh))
    fresh = [c for c in run.pending if not _key(c) or _key(c) not in held_before]
    if fresh:
        run.pending_file = str(_write(inbox / "held", f"{stem}{PENDING_SUFFIX}", fresh))
    by_file: dict[str, set[str]] = {}
    for c in replaced:
        by_file.setdefault(c.where, set()).add(c.id)
    for where, gone in by_file.items():
        _drop(Path(where), gone)


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


def _candidates(
    warehouse: Path,
    inbox: Path,
    rows: list[BankRow],
    ids: Mapping[str, str],
    outbox: Outbox,
    ref: wb.Reference,
    mine: set[str],
    held_cells: dict[str, dict[str, str]],
) -> list[dup.Candidate]:
    """What a row of the file may duplicate, within the window around the file's days: the
    ledger's rows this outbox did not create (the bank feed's), the rows of other statements in
    the outbox or the inbox, and the pending rows held in inbox/held/ (their cells kept)."""
    window = dt.timedelta(days=dup.DUPLICATE_WINDOW_DAYS)
    first = min(r.booked_at for r in rows) - window
    last = max(r.booked_at for r in rows) + window
    ours = outbox.server_ids()
    with reading(warehouse) as con:
        ledger = ledger_rows_between(con, sorted(set(ids.values())), first, last)
    out = [
        dup.Candidate(
            "bank feed", t["id"], t["account_id"], t["booked_at"], t["amount"], t["concept"]
        )
        for t in ledger.iter_rows(named=True)
        if t["id"] not in ours
    ]
    seen = set(mine)
    for o in outbox.rows("state <> 'rejected' AND event_ref LIKE 'event:bank:%'"):
        eid = o["event_ref"].removeprefix("event:")
        if eid not in seen and o["booked_at"] is not None and o["amount"] is not None:
            seen.add(eid)
            out.append(
                dup.Candidate(
                    "statement", eid, str(o["account_id"]), o["booked_at"], o["amount"],
                    o["concept"] or "",
                )
            )  # fmt: skip
    out += [cand for _, cand in _csv_rows(intake.inbox_files(inbox), "statement", ref, seen)]
    held = [f for f in intake.inbox_files(inbox / "held") if f.name.endswith(PENDING_SUFFIX)]
    for c, cand in _csv_rows(held, "pending", ref, seen):
        held_cells[cand.id] = c
        out.append(cand)
    return out


def _csv_rows(
    files: Iterable[Path], kind: str, ref: wb.Reference, seen: set[str]
) -> list[tuple[dict[str, str], dup.Candidate]]:
    """The rows of imported statements in these inbox files, as candidates (each event once;
    a row that does not read as one, hand-edited, is left out)."""
    account_ids = {
        key: str(i)
        for i, name in zip(
            ref.accounts["id"].to_list(), ref.accounts["name"].to_list(), strict=True
        )
        for key in (str(i), name)
    }
    currency = dict(
        zip(ref.accounts["id"].to_list(), ref.accounts["currency"].to_list(), strict=True)
    )
    out = []
    for f in files:
        for r in inbox_csv.read_csv(f.read_bytes()).rows:
            c = r.cells
            eid = c.get("event_id", "").strip()
            account = account_ids.get(c.get("account", "").strip())
            if not eid.startswith("bank:") or eid in seen or account is None:
                continue
            try:
                cents = wb.parse_amount(c.get("amount", ""), str(currency[account] or "EUR"))
                day = dt.date.fromisoformat(c.get("booked_at", "").strip())
            except (wb.RowError, ValueError):
                continue
            seen.add(eid)
            cand = dup.Candidate(kind, eid, account, day, cents, c.get("concept", ""), str(f))
            out.append((dict(c), cand))
    return out


def _drop(path: Path, event_ids: set[str]) -> None:
    """A held file without these rows (removed when none is left)."""
    if not path.exists():
        return
    with path.open(encoding="utf-8", newline="") as f:
        kept = [r for r in csv.DictReader(f) if r.get("event_id", "") not in event_ids]
    if kept:
        _write(path.parent, path.name, kept, replace=True)
    else:
        path.unlink()


def _write(
    folder: Path, name: str, rows: Iterable[Mapping[str, Any]], *, replace: bool = False
) -> Path:
    """An inbox CSV of rows (a new name when one is there already, unless `replace`)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    n = 1
    while target.exists() and not replace:
        target = folder / name.replace(".csv", f".{n}.csv")
        n += 1
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    tmp = target.with_name(f".{target.name}.part")  # the inbox never sees half a file
    tmp.write_text(buf.getvalue(), "utf-8")
    tmp.replace(target)
    return target
