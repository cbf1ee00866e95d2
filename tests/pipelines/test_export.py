"""`centsync export` on the demo warehouse: Parquet and CSV files read back by Polars and DuckDB
with equal rows, the comments carried as Parquet metadata, the manifest, `--tables` and
`--since`; the Beancount ledger checked by `bean-check` and beancount's own loader."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from beancount import loader
from beancount.core import data, realization

from centsync.pipelines.outputs import beancount as ledger
from centsync.pipelines.outputs.export import (
    BESIDE,
    META_COLUMN,
    META_COMMENT,
    META_REFRESH,
    META_TABLE,
)

from .test_sql_cli import centsync, copy_warehouse, in_utc, query, shared_demo

pytestmark = pytest.mark.e2e

BEAN_CHECK = Path(sys.executable).with_name("bean-check")


@pytest.fixture(scope="session")
def demo_warehouse(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    return shared_demo(tmp_path_factory, worker_id)


def relations(warehouse: Path) -> dict[str, tuple[str | None, dict[str, str | None]]]:
    """Every table and view of marts, core, recon and history: its comment and its columns' comments."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        found: dict[str, tuple[str | None, dict[str, str | None]]] = {}
        for s, t, c in con.execute(
            "SELECT schema_name, table_name, comment FROM duckdb_tables() WHERE schema_name IN ('marts', 'core', 'recon', 'history') "
            "UNION ALL SELECT schema_name, view_name, comment FROM duckdb_views() WHERE schema_name IN ('marts', 'core', 'recon', 'history')"
        ).fetchall():
            columns = con.execute(
                "SELECT column_name, comment FROM duckdb_columns() WHERE schema_name = ? AND table_name = ? ORDER BY column_index",
                [s, t],
            ).fetchall()
            found[f"{s}.{t}"] = (c, dict(columns))
    finally:
        con.close()
    return found


def ordered(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows in one order: a relation's own order is DuckDB's choice (a view's GROUP BY on
    two threads gives its groups in either order), the rows are what is compared."""
    flat = [c for c, t in frame.schema.items() if not t.is_nested()]
    return frame.sort(flat, nulls_last=True) if flat else frame


def as_text(warehouse: Path, table: str, where: str = "") -> pl.DataFrame:
    """A relation of the warehouse as an export holds it (UUIDs as text)."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        columns = con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name || '.' || table_name = ? ORDER BY column_index",
            [table],
        ).fetchall()
        select = ", ".join(
            f'"{c}"::VARCHAR AS "{c}"' if t == "UUID" else f'"{c}"' for c, t in columns
        )
        frame = pl.from_arrow(con.sql(f"SELECT {select} FROM {table} {where}").to_arrow_table())
    finally:
        con.close()
    assert isinstance(frame, pl.DataFrame)
    return in_utc(frame)


@pytest.fixture(scope="module")
def parquet(
    demo_warehouse: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any]]:
    """`centsync export` (Parquet, every table) of the demo warehouse: (folder, manifest)."""
    out = tmp_path_factory.mktemp("export") / "parquet"
    done = centsync(demo_warehouse, "export", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"manifest: {out / 'manifest.json'}" in done.stdout.decode()
    return out, json.loads((out / "manifest.json").read_text())


def test_parquet_export_has_every_table_of_marts_core_and_recon(
    parquet: tuple[Path, dict[str, Any]], demo_warehouse: Path
) -> None:
    out, manifest = parquet
    assert sorted(t["table"] for t in manifest["tables"]) == sorted(relations(demo_warehouse))
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [t["file"] for t in manifest["tables"]] + ["manifest.json"]
    )
    latest = query(
        demo_warehouse,
        "SELECT refresh_id FROM ops.refreshes WHERE status = 'succeeded' ORDER BY started_at DESC LIMIT 1",
    )["refresh_id"][0]
    assert manifest["refresh_id"] == latest
    assert manifest["reconciliation"]["verdict"] == "agree"
    assert manifest["since"] is None


def test_parquet_files_read_back_by_polars_and_duckdb_with_equal_rows(
    parquet: tuple[Path, dict[str, Any]], demo_warehouse: Path
) -> None:
    out, manifest = parquet
    for table in manifest["tables"]:
        want = ordered(as_text(demo_warehouse, table["table"]))
        by_polars = ordered(in_utc(pl.read_parquet(out / table["file"])))
        assert by_polars.equals(want), table["table"]
        assert table["rows"] == want.height
        by_duckdb = query(demo_warehouse, f"SELECT * FROM read_parquet('{out / table['file']}')")
        assert ordered(by_duckdb).equals(want), table["table"]
    assert sum(t["rows"] for t in manifest["tables"] if t["table"] == "core.transactions") > 1000


def test_the_comments_travel_as_parquet_metadata(
    parquet: tuple[Path, dict[str, Any]], demo_warehouse: Path
) -> None:
    out, manifest = parquet
    comments = relations(demo_warehouse)
    for table in manifest["tables"]:
        comment, columns = comments[table["table"]]
        meta = pl.read_parquet_metadata(out / table["file"])  # Polars reads them
        assert meta[META_TABLE] == table["table"]
        assert meta[META_COMMENT] == comment and comment
        assert meta[META_REFRESH] == manifest["refresh_id"]
        assert {
            k.removeprefix(META_COLUMN): v for k, v in meta.items() if k.startswith(META_COLUMN)
        } == columns
        assert [c["comment"] for c in table["columns"]] == list(columns.values())
    kv = query(  # and DuckDB
        demo_warehouse,
        f"SELECT key::VARCHAR AS k, value::VARCHAR AS v FROM parquet_kv_metadata('{out / 'core.transactions.parquet'}')",
    )
    assert (
        dict(kv.iter_rows())[META_COLUMN + "amount"] == comments["core.transactions"][1]["amount"]
    )


def test_csv_export_of_chosen_tables_since_a_month(demo_warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "csv"
    args = [
        "export",
        "--format",
        "csv",
        "--tables",
        "core,marts.spending_by_month",
        "--since",
        "2026-06",
    ]
    done = centsync(demo_warehouse, *args, "--out", str(out))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    chosen = {t["table"]: t for t in manifest["tables"]}
    assert set(chosen) == {r for r in relations(demo_warehouse) if r.startswith("core.")} | {
        "marts.spending_by_month"
    }
    assert manifest["since"] == "2026-06-01"
    filters = {
        "core.transactions": ("booked_at", "WHERE booked_at >= DATE '2026-06-01'"),
        "marts.spending_by_month": ("month", "WHERE month >= DATE '2026-06-01'"),
        "core.accounts": (None, ""),  # what is now: whole
    }
    for name, (column, where) in filters.items():
        table = chosen[name]
        assert table["since_column"] == column
        want = as_text(demo_warehouse, name, where)
        assert 0 < table["rows"] == want.height
        back = query(demo_warehouse, f"SELECT * FROM read_csv('{out / table['file']}')")
        assert back.height == want.height
        by_polars = pl.read_csv(out / table["file"], infer_schema=False)
        columns = want.columns
        if name == "core.transactions":  # a person's CSV: the names beside the ids
            columns = [x for c in columns for x in (c, BESIDE.get(c)) if x]
        assert by_polars.columns == columns and by_polars.height == want.height
    total = query(demo_warehouse, "SELECT count(*) AS n FROM core.transactions")["n"][0]
    assert chosen["core.transactions"]["rows"] < total


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--tables", "marts.nothing"], "no marts.nothing"),
        (["--since", "2026-13"], "is not a date"),
        (["--format", "beancount", "--tables", "core"], "a ledger has no tables"),
    ],
)
def test_a_bad_request_is_a_usage_error(
    demo_warehouse: Path, tmp_path: Path, args: list[str], says: str
) -> None:
    done = centsync(demo_warehouse, "export", *args, "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert says in done.stderr.decode()
    assert not (tmp_path / "out").exists()


def test_export_of_a_missing_warehouse_exits_6(tmp_path: Path) -> None:
    done = centsync(tmp_path / "nowhere.duckdb", "export", "--out", str(tmp_path / "out"))
    assert done.returncode == 6 and b"no warehouse at" in done.stderr


# ---------------------------------------------------------------------------------- beancount


def write_ledger(warehouse: Path, out: Path, *args: str) -> str:
    done = centsync(warehouse, "export", "--format", "beancount", *args, "--out", str(out))
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def bean_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BEAN_CHECK), str(path)], capture_output=True, text=True, timeout=120)


def test_the_ledger_passes_bean_check_and_ends_at_the_services_balances(
    demo_warehouse: Path, tmp_path: Path
) -> None:
    path = tmp_path / "centsync.beancount"
    printed = write_ledger(demo_warehouse, path)
    check = bean_check(path)
    assert check.returncode == 0, check.stdout + check.stderr
    entries, errors, options = loader.load_file(str(path))
    assert errors == []
    transactions = [e for e in entries if isinstance(e, data.Transaction)]
    ids = {e.meta["id"] for e in transactions if "id" in e.meta}
    want = query(demo_warehouse, "SELECT id::VARCHAR AS id, type, amount FROM core.transactions")
    assert ids == set(want["id"])  # one transaction per row
    accounts = query(demo_warehouse, "SELECT id::VARCHAR AS id, name, balance FROM core.accounts")
    opened = {
        e.meta["id"]: e.account for e in entries if isinstance(e, data.Open) and "id" in e.meta
    }
    assert set(opened) == set(accounts["id"])
    balances = [e for e in entries if isinstance(e, data.Balance)]
    assert {b.account for b in balances} == set(opened.values())  # each account asserted
    real = realization.realize(entries)
    for account_id, _name, cents in accounts.iter_rows():
        held = realization.get(real, opened[account_id]).balance.get_currency_units("EUR").number
        assert held == Decimal(cents) / 100  # to the cent
    expenses = {
        e.postings[1].account
        for e in transactions
        if e.meta.get("id") in set(want.filter(pl.col("type") == "expense")["id"])
    }
    assert "Expenses:Groceries" in expenses and all(a.startswith("Expenses:") for a in expenses)
    assert options["operating_currency"] == ["EUR"]
    assert f"{len(balances)} balance assertions" in printed


def test_bean_check_catches_a_balance_off_by_one_cent(demo_warehouse: Path, tmp_path: Path) -> None:
    path = tmp_path / "centsync.beancount"
    write_ledger(demo_warehouse, path)
    text = path.read_text()
    line = next(x for x in text.splitlines() if " balance Assets:Depository:Everyday-Checking" in x)
    amount = line.split()[3]  # date balance account AMOUNT ~ 0.00 EUR: no tolerance
    assert line.split()[4:] == ["~", "0.00", "EUR"]
    one_cent_off = str(Decimal(amount) + Decimal("0.01"))
    path.write_text(text.replace(line, line.replace(f" {amount} ", f" {one_cent_off} ")))
    check = bean_check(path)
    assert check.returncode != 0 and "Balance failed" in check.stdout + check.stderr


def test_a_snapshot_the_ledger_does_not_match_is_listed_not_asserted(
    demo_warehouse: Path, tmp_path: Path
) -> None:
    """Two earlier snapshots of Everyday Checking: one that holds, one 35 cents off (as when the
    service changed rows after it); only the first becomes an assertion."""
    warehouse = copy_warehouse(demo_warehouse, tmp_path / "wh")
    con = duckdb.connect(str(warehouse))
    try:
        (account_id, balance, day_sum) = con.execute(
            """
            SELECT a.id, a.balance, (SELECT sum(amount) FROM core.transactions t
                                     WHERE t.account_id = a.id AND t.booked_at > DATE '2026-03-10')
            FROM core.accounts a WHERE a.name = 'Everyday Checking'
            """
        ).fetchone()
        held = balance - day_sum  # at the end of 2026-03-10
        for rid, day, cents in (("r-held", "2026-03-10", held), ("r-off", "2026-04-20", 35)):
            con.execute(
                """
                INSERT INTO history.accounts
                SELECT ?, TIMESTAMPTZ '{day} 20:00:00+00', id, name, type, subtype, currency,
                       ?, connection_id, institution, updated_at
                FROM core.accounts WHERE id = ?
                """.replace("{day}", day),
                [rid, cents, account_id],
            )
    finally:
        con.close()
    path = tmp_path / "centsync.beancount"
    printed = write_ledger(warehouse, path)
    assert "Not asserted: Assets:Depository:Everyday-Checking on 2026-04-20" in printed
    check = bean_check(path)
    assert check.returncode == 0, check.stdout + check.stderr
    entries, _errors, _ = loader.load_file(str(path))
    asserted = {(b.account, b.date) for b in entries if isinstance(b, data.Balance)}
    assert ("Assets:Depository:Everyday-Checking", dt.date(2026, 3, 11)) in asserted
    assert ("Assets:Depository:Everyday-Checking", dt.date(2026, 4, 21)) not in asserted
    assert "; not asserted: Assets:Depository:Everyday-Checking on 2026-04-20" in path.read_text()


def test_a_ledger_since_a_day_opens_with_the_balances_of_that_day(
    demo_warehouse: Path, tmp_path: Path
) -> None:
    path = tmp_path / "since.beancount"
    write_ledger(demo_warehouse, path, "--since", "2026-01-01")
    check = bean_check(path)
    assert check.returncode == 0, check.stdout + check.stderr
    entries, _errors, _ = loader.load_file(str(path))
    dated = [e.date for e in entries if isinstance(e, data.Transaction)]
    assert min(dated) == dt.date(2026, 1, 1)
    n = query(
        demo_warehouse,
        "SELECT count(*) AS n FROM core.transactions WHERE booked_at >= DATE '2026-01-01'",
    )["n"][0]
    accounts = query(demo_warehouse, "SELECT count(*) AS n FROM core.accounts")["n"][0]
    assert len(dated) == n + accounts  # the rows, and one opening balance per account


def test_money_is_exact_decimal_cents() -> None:
    assert [str(ledger.money(c)) for c in (0, 1, -1, -1234, 123456789012)] == [
        "0.00",
        "0.01",
        "-0.01",
        "-12.34",
        "1234567890.12",
    ]
    assert ledger.component("car loan") == "Car-Loan"
    assert ledger.component("Food & Drink") == "Food-Drink"


def test_rows_of_an_account_no_longer_listed_still_balance(
    demo_warehouse: Path, tmp_path: Path
) -> None:
    warehouse = copy_warehouse(demo_warehouse, tmp_path / "wh")
    con = duckdb.connect(str(warehouse))
    try:
        con.execute("DELETE FROM core.accounts WHERE name = 'Cash Wallet'")
    finally:
        con.close()
    path = tmp_path / "centsync.beancount"
    write_ledger(warehouse, path)
    check = bean_check(path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert " open Assets:Unlisted:Account-" in path.read_text()


def test_the_csv_of_transactions_names_accounts_categories_and_merchants(
    demo_warehouse: Path, tmp_path: Path
) -> None:
    out = tmp_path / "csv"
    args = ["export", "--format", "csv", "--tables", "core.transactions", "--out", str(out)]
    assert centsync(demo_warehouse, *args).returncode == 0
    got = query(
        demo_warehouse,
        f"""
        SELECT f.account_name = a.name AS account_ok,
               f.category_name IS NOT DISTINCT FROM c.name AS category_ok,
               f.merchant = lower(regexp_replace(trim(t.concept), '\\s+', ' ', 'g')) AS merchant_ok,
               c.name IS NOT NULL AS named
        FROM read_csv('{out / "core.transactions.csv"}', all_varchar = true) f
        JOIN core.transactions t ON t.id::VARCHAR = f.id
        JOIN core.accounts a ON a.id = t.account_id
        LEFT JOIN core.categories c ON c.id = t.category_id
        """,
    )
    total = query(demo_warehouse, "SELECT count(*) AS n FROM core.transactions")["n"][0]
    assert got.height == total
    assert got["account_ok"].all() and got["category_ok"].all() and got["merchant_ok"].all()
    assert got["named"].sum() > 1000  # the expense categories have names
    manifest = json.loads((out / "manifest.json").read_text())
    names = [c["name"] for c in manifest["tables"][0]["columns"]]
    assert names[names.index("account_id") + 1] == "account_name"
    assert names[names.index("category_id") + 1] == "category_name"


def test_the_ledger_names_income_categories_from_payees_or_the_persons_file(
    demo_warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unnamed = query(
        demo_warehouse,
        "SELECT DISTINCT t.category_id::VARCHAR AS id FROM core.transactions t LEFT JOIN "
        "core.categories c ON c.id = t.category_id WHERE t.type = 'income' AND c.name IS NULL "
        "AND t.category_id IS NOT NULL ORDER BY 1",
    )["id"].to_list()
    assert unnamed  # the API lists no name for income categories
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # its default place: centsync/
    names = tmp_path / "centsync" / "categories.toml"
    names.parent.mkdir()
    path = tmp_path / "payees.beancount"
    printed = write_ledger(demo_warehouse, path)
    text = path.read_text()
    assert "Category-" not in text and bean_check(path).returncode == 0
    for category_id in unnamed:  # named after the payee, the id said, and how to name it
        assert f"the service lists no name for category {category_id}" in text
        assert category_id[:8] in printed
    assert "Income:Acme-Corp-Payroll" in text and "categories.toml" in printed
    # the person's names win: by an id's first 8 characters or the whole id
    names.write_text(
        f'[categories]\n"{unnamed[0][:8]}" = "Salary"\n"{unnamed[-1]}" = "Other income"\n'
    )
    named = tmp_path / "named.beancount"
    printed = write_ledger(demo_warehouse, named)
    text = named.read_text()
    assert bean_check(named).returncode == 0
    assert "open Income:Salary" in text and "payee" not in printed
    assert "open Income:Other-Income" in text or len(unnamed) == 1
    # and the CSV of transactions carries the same names
    csv = tmp_path / "csv"
    args = ["export", "--format", "csv", "--tables", "core.transactions", "--out", str(csv)]
    assert centsync(demo_warehouse, *args).returncode == 0
    rows = pl.read_csv(csv / "core.transactions.csv", infer_schema=False)
    salary = rows.filter(pl.col("category_id") == unnamed[0])["category_name"].unique()
    assert salary.to_list() == ["Salary"]
    names.write_text('[categories]\n"1e2" = "Salary"\n')
    bad = tmp_path / "bad.beancount"
    done = centsync(demo_warehouse, "export", "--format", "beancount", "--out", str(bad))
    assert done.returncode == 2 and "categories.toml" in done.stderr.decode()
