"""The warehouse remembers (issue 45): server-side edits over several refreshes, checked against
what history.transaction_versions, `centsync changes`, the as-of macros and the marts as of say.

One household, in process (httpx.ASGITransport), its clock moved by the sandbox's admin API:
a pending charge that posts with another amount and day, a re-categorisation, a deletion, rows
of a hidden account that come back, our own write-back (an inbox file) and our rule (a rules
file), across an incremental refresh, a `--full` re-read and a `--months` refresh. After every
refresh the published ledger and marts are kept; at the end the as-of ledger of each refresh
(by number and by moment) must equal what was published then, row for row, and the changes
between two refreshes must explain each month's category total's difference to the cent.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import duckdb
import httpx
import jsonschema
import polars as pl
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from centsync.extract import ApiClient
from centsync.pipelines import history
from centsync.pipelines.cli.main import main
from centsync.pipelines.outputs import report
from centsync.pipelines.refresh.run import run_refresh
from centsync.pipelines.refresh.summary import RefreshOptions
from centsync.pipelines.results import json_schemas
from centsync.pipelines.writeback import rules as writeback_rules
from centsync.pipelines.writeback.run import run_writeback
from centsync.pipelines.writeback.summary import WritebackOptions
from centsync.sandbox import Sandbox
from helpers import make_sandbox

BASE = "http://sandbox.test"
LEDGER = (
    "SELECT id::VARCHAR, amount, booked_at, category_id::VARCHAR, concept, type, "
    "account_id::VARCHAR, updated_at FROM {}"
)
RECEIPTS = Path(__file__).parents[2] / "pipelines" / "examples" / "cash-receipts.csv"


class Household:
    """A sandbox, a warehouse, and what each refresh published."""

    def __init__(self, tmp: Path) -> None:
        self.sb: Sandbox = make_sandbox(rate_limit=False)
        self.tmp = tmp
        self.warehouse = tmp / "centsync.duckdb"
        self.ledgers: list[set[tuple[Any, ...]]] = []
        self.marts: list[pl.DataFrame] = []
        self.seen: list[dt.datetime] = []

    def client(self, key: str = "read_only") -> ApiClient:
        transport = httpx.ASGITransport(app=self.sb.app)
        return ApiClient(BASE, self.sb.keys[key], transport=transport, backoff_initial=0.01)

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        with TestClient(self.sb.app, base_url=BASE) as c:
            headers = {"Authorization": f"Bearer {self.sb.keys['admin_token']}"}
            r = c.request(method, path, json=body, headers=headers)
            assert r.status_code < 300, r.text
            return r.json() if r.content else None

    def refresh(self, **options: Any) -> None:
        with self.client() as client:
            run_refresh(client, self.warehouse, RefreshOptions(source="sandbox", **options))
        with self.read() as con:
            self.ledgers.append(set(con.execute(LEDGER.format("core.transactions")).fetchall()))
            self.marts.append(_spending(con, "marts.spending_by_month_category"))
            self.seen.append(
                con.execute("SELECT max(seen_at) FROM history.refreshes").fetchall()[0][0]
            )

    def read(self) -> duckdb.DuckDBPyConnection:
        return duckdb.connect(str(self.warehouse), read_only=True)

    def versions(self, tx_id: str) -> list[tuple[Any, ...]]:
        with self.read() as con:
            return con.execute(
                "SELECT kind, changed_fields, origin, amount, booked_at::VARCHAR, valid_to_refresh "
                "IS NULL FROM history.transaction_timeline WHERE id = ? ORDER BY valid_from_no",
                [tx_id],
            ).fetchall()


def _spending(con: duckdb.DuckDBPyConnection, table: str) -> pl.DataFrame:
    got = pl.from_arrow(
        con.sql(f"SELECT month, category_id, amount_cents, transactions FROM {table}").arrow()
    )
    assert isinstance(got, pl.DataFrame)
    return got.sort("month", "category_id", nulls_last=True)


def _totals(ledger: set[tuple[Any, ...]], names: dict[str, str]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = defaultdict(int)
    for _id, amount, booked, category, *_rest in ledger:
        name = (
            "Uncategorized" if category is None else names.get(category, f"category {category[:8]}")
        )
        out[(f"{booked.year:04d}-{booked.month:02d}", name)] += amount
    return out


def _changes(warehouse: Path, *args: str) -> dict[str, Any]:
    result = CliRunner(env={"CENTSYNC_WAREHOUSE": str(warehouse)}).invoke(
        main, ["changes", "--json", *args], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    jsonschema.validate(got, json_schemas()["changes"])  # docs/schemas/changes.json
    return got


def _pick(hh: Household) -> dict[str, Any]:
    """The rows the scenario edits: a November and an October expense, an account to hide."""
    with hh.read() as con:
        rows = con.execute(
            "SELECT id::VARCHAR, month, account_id::VARCHAR, category_id::VARCHAR, amount "
            "FROM core.transactions WHERE type = 'expense' AND category_id IS NOT NULL "
            "AND month >= DATE '2026-10-01' ORDER BY booked_at, id"
        ).fetchall()
        cats = dict(con.execute("SELECT name, id::VARCHAR FROM core.categories").fetchall())
        hidden = con.execute(
            "SELECT account_id::VARCHAR FROM core.transactions t JOIN core.accounts a "
            "ON a.id = t.account_id WHERE a.name <> 'Cash Wallet' GROUP BY 1 "
            "HAVING count(*) >= 2 ORDER BY count(*), 1 LIMIT 1"
        ).fetchall()[0][0]
        months = con.execute(
            "SELECT strftime(min(month), '%Y-%m') FROM core.transactions WHERE account_id = ?",
            [hidden],
        ).fetchall()[0][0]
        spender = con.execute(
            "SELECT id::VARCHAR FROM core.accounts WHERE type = 'depository' ORDER BY name LIMIT 1"
        ).fetchall()[0][0]
    october = next(r for r in rows if r[1] == dt.date(2026, 10, 1))
    november = [r for r in rows if r[1] == dt.date(2026, 11, 1) and r[2] != hidden]
    other = next(n for n, i in cats.items() if i != october[3] and n != "Groceries")
    return {
        "recategorised": october[0], "category": other, "category_id": cats[other],
        "deleted": november[0][0], "hidden": hidden,
        "ruled": next(r[0] for r in november[1:] if r[3] != cats[other]),
        "hidden_month": months, "spender": spender, "groceries": cats["Groceries"],
    }  # fmt: skip


@pytest.mark.slow
def test_history_keeps_every_version_and_explains_every_total(tmp_path: Path) -> None:
    hh = Household(tmp_path)
    hh.refresh()  # 1: the first sync writes no version
    with hh.read() as con:
        assert con.execute("SELECT count(*) FROM history.transaction_versions").fetchall() == [(0,)]
        kinds = con.execute("SELECT kind, count(*) FROM history.transaction_timeline GROUP BY 1")
        assert kinds.fetchall() == [("first seen", len(hh.ledgers[0]))]
    p = _pick(hh)

    # 2: a pending charge appears, an October expense is re-categorised, a row is deleted
    pending = hh.admin(
        "POST", "/_sandbox/transactions",
        {"account_id": p["spender"], "concept": "MERCADONA", "amount": -4510, "pending": True,
         "booked_at": "2026-11-15", "category_id": p["groceries"]},
    )["id"]  # fmt: skip
    hh.admin(
        "PATCH", f"/_sandbox/transactions/{p['recategorised']}", {"category_id": p["category_id"]}
    )
    hh.admin("DELETE", f"/_sandbox/transactions/{p['deleted']}")
    hh.refresh()
    assert hh.versions(pending) == [("added", None, "service", -4510, "2026-11-15", True)]
    assert [v[:3] for v in hh.versions(p["recategorised"])] == [
        ("first seen", None, "service"),
        ("changed", ["category_id", "updated_at"], "service"),
    ]
    assert [(v[0], v[5]) for v in hh.versions(p["deleted"])] == [
        ("first seen", False),
        ("deleted", True),
    ]

    # 3: a day later the charge posts with a tip, a day later; our write-back and our rule
    hh.admin("POST", "/_sandbox/clock/advance", {"days": 1})
    hh.admin(
        "PATCH", f"/_sandbox/transactions/{pending}", {"amount": -5750, "booked_at": "2026-11-16"}
    )
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / RECEIPTS.name).write_bytes(RECEIPTS.read_bytes())
    with hh.read() as con:
        concept = con.execute(
            "SELECT concept FROM core.transactions WHERE id = ?", [p["ruled"]]
        ).fetchall()[0][0]
    rules = tmp_path / "rules.toml"
    rules.write_text(
        f'[[rule]]\nid = "history"\nversion = 1\nconcept = "^{concept}$"\n'
        f'set = {{ category = "{p["category"]}" }}\n'
    )
    ruled = writeback_rules.apply_rules(hh.warehouse, rules, dt.datetime.now(dt.UTC), dry_run=False)
    assert ruled.queued >= 1, (ruled, rules.read_text())
    with hh.client("read_write") as client:
        sent = run_writeback(client, hh.warehouse, WritebackOptions())
    assert sent.counts.get("sent", 0) >= 6, sent
    hh.refresh()
    assert hh.versions(pending)[1:] == [
        ("changed", ["amount", "booked_at", "updated_at"], "service", -5750, "2026-11-16", True)
    ]
    assert hh.versions(p["ruled"])[-1][:3] == ("changed", ["category_id", "updated_at"], "rule")
    with hh.read() as con:
        ours = con.execute(
            "SELECT kind, origin, count(*) FROM history.transaction_versions "
            "WHERE concept IN ('Café Central', 'Bus ticket', 'Sold old bike') GROUP BY ALL"
        ).fetchall()
    assert ours == [("added", "write-back", 4)]

    # the report lists what changed since the page before it
    page = report.write(hh.warehouse)
    assert report.shown_refresh(page) == 3
    html = page.read_text()
    assert "MERCADONA amount -45.10 -&gt; -57.50, date 2026-11-15 -&gt; 2026-11-16" in html
    report.write(hh.warehouse)
    assert 'id="changes-none"' in page.read_text()

    # 4: an account hidden (its rows deleted), seen by a --full re-read; nothing else is new
    with hh.read() as con:
        hidden_rows = [r[0] for r in con.execute(
            "SELECT id::VARCHAR FROM core.transactions WHERE account_id = ?", [p["hidden"]]
        ).fetchall()]  # fmt: skip
    hh.admin("PATCH", f"/_sandbox/accounts/{p['hidden']}", {"hidden": True})
    hh.refresh(mode="full")
    with hh.read() as con:
        gone = con.execute(
            "SELECT id::VARCHAR FROM history.transaction_timeline WHERE valid_from_no = 4 "
            "AND kind = 'deleted'"
        ).fetchall()
    assert {r[0] for r in gone} == set(hidden_rows)

    # 5: the account comes back; a --months refresh of one month brings back that month's rows
    hh.admin("PATCH", f"/_sandbox/accounts/{p['hidden']}", {"hidden": False})
    month = p["hidden_month"]
    hh.refresh(months=(month, month))
    with hh.read() as con:
        back = con.execute(
            "SELECT id::VARCHAR, kind FROM history.transaction_timeline WHERE valid_from_no = 5"
        ).fetchall()
        in_month = {r[0] for r in con.execute(
            "SELECT id::VARCHAR FROM core.transactions WHERE account_id = ? AND "
            "strftime(month, '%Y-%m') = ?", [p["hidden"], month]
        ).fetchall()}  # fmt: skip
    assert in_month and {i for i, k in back if k == "came back"} == in_month
    hh.refresh(mode="full")  # 6: the rest come back
    assert set(hidden_rows) <= {r[0] for r in hh.ledgers[-1]}
    assert [v[0] for v in hh.versions(hidden_rows[0])] == ["first seen", "deleted", "came back"]

    _versions_are_what_changed(hh)
    _the_past_is_what_was_published(hh)
    _changes_explain_every_total(hh)


def _versions_are_what_changed(hh: Household) -> None:
    """Each refresh wrote a version for exactly the rows whose published row it changed (a
    --full re-read or a --months refresh writes none for a row it read unchanged)."""
    with hh.read() as con:
        for n in range(2, len(hh.ledgers) + 1):
            got = con.execute(
                "SELECT id::VARCHAR FROM history.transaction_versions v JOIN history.refreshes r "
                "ON r.refresh_id = v.valid_from_refresh WHERE r.refresh_no = ?",
                [n],
            ).fetchall()
            was = {r[0]: r for r in hh.ledgers[n - 2]}
            now = {r[0]: r for r in hh.ledgers[n - 1]}
            differ = {i for i in set(was) | set(now) if was.get(i) != now.get(i)}
            assert sorted(r[0] for r in got) == sorted(differ), n


def _the_past_is_what_was_published(hh: Household) -> None:
    """As of each refresh, by number and by moment, the ledger and the marts are what that
    refresh published."""
    with hh.read() as con:
        for n, (published, marts) in enumerate(zip(hh.ledgers, hh.marts, strict=True), 1):
            as_of = con.execute(LEDGER.format(f"history.ledger_as_of_refresh({n})")).fetchall()
            assert len(as_of) == len(published) and set(as_of) == published, n
            recomputed = history.marts_as_of(con, refresh=n)["spending_by_month_category"]
            assert (
                recomputed.select(marts.columns)
                .sort("month", "category_id", nulls_last=True)
                .equals(marts)
            ), n
        # by moment: the service's clock at each refresh (a refresh later at the same moment wins)
        for n, seen in enumerate(hh.seen, 1):
            if n < len(hh.seen) and hh.seen[n] == seen:
                continue
            got = con.execute(LEDGER.format("history.ledger_as_of(?)"), [seen]).fetchall()
            assert set(got) == hh.ledgers[n - 1], n
        before = con.execute(
            LEDGER.format("history.ledger_as_of(?)"), [hh.seen[0] - dt.timedelta(seconds=1)]
        ).fetchall()
        assert before == []


def _changes_explain_every_total(hh: Household) -> None:
    """`centsync changes --since N`: the effects per month and category add up to each total's
    difference between refresh N and the last, to the cent; the words name the rows."""
    with hh.read() as con:
        names = dict(con.execute("SELECT id::VARCHAR, name FROM core.categories").fetchall())
    last = _totals(hh.ledgers[-1], names)
    for since in range(1, len(hh.ledgers) + 1):
        got = _changes(hh.warehouse, "--since", str(since))
        assert got["since_refresh"] == since and got["to_refresh"] == len(hh.ledgers)
        effects: dict[tuple[str, str], int] = defaultdict(int)
        for c in got["changes"]:
            effects[(c["month"], c["category"])] += c["effect_cents"]
        then = _totals(hh.ledgers[since - 1], names)
        moved = {k: last.get(k, 0) - then.get(k, 0) for k in set(last) | set(then)}
        assert {k: v for k, v in effects.items() if v} == {k: v for k, v in moved.items() if v}
    # a day: the changes after the last refresh seen before it began (the clock's 2026-11-15)
    assert _changes(hh.warehouse, "--since", "2026-11-16") == {
        **_changes(hh.warehouse, "--since", "2"),
        "seconds": ANY,
    }
    refused = CliRunner(env={"CENTSYNC_WAREHOUSE": str(hh.warehouse)}).invoke(
        main, ["changes", "--since", "yesterday"]
    )
    assert refused.exit_code == 2 and "neither a day" in refused.output
    words = [c["explanation"] for c in _changes(hh.warehouse, "--since", "2")["changes"]]
    assert (
        "MERCADONA amount -45.10 -> -57.50, date 2026-11-15 -> 2026-11-16 on 2026-11-16 (changed by the service)"
        in words
    )
    assert any(w.endswith("(added by our write-back)") for w in words)
    assert any("(changed by our rule)" in w for w in words)
