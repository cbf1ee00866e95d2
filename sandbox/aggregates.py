"""The service's aggregates (summary, spending, accounts summary) and its exact state."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

from centsync.sandbox.household import Account, Connection, Expense
from centsync.sandbox.ledger import EXPENSE, INCOME, TRANSFER, Ledger, iso_ms


class Aggregates:
    """What the analytics endpoints compute, and the state dump tests compare with."""

    if TYPE_CHECKING:  # what Service holds and provides
        ledger: Ledger
        accounts: dict[str, Account]
        connections: list[Connection]
        categories: dict[str, str]
        expenses: dict[str, Expense]
        currency: str
        now_ms: int

        def visible_accounts(self) -> list[Account]: ...
        def settings(self) -> dict[str, Any]: ...
        def expense_balance(self, e: Expense) -> int: ...

    def summary(
        self, lo: int | None, hi: int | None, preds: tuple[tuple[str, object], ...]
    ) -> dict[str, int]:
        sums = {EXPENSE: 0, INCOME: 0, TRANSFER: 0}
        count = 0
        if not preds:
            for _, st in self.ledger.day_range(lo, hi):
                count += st.count
                for k, v in st.sums.items():
                    sums[k] += v
        else:
            sel = self.ledger.select(lo, hi, preds)
            rows = self.ledger.rows[sel[0] : sel[1]] if isinstance(sel, tuple) else sel
            for t in rows:
                count += 1
                sums[t.type] += t.amount
        return {
            "count": count,
            "income": sums[INCOME],
            "expense": sums[EXPENSE],
            "transfer": sums[TRANSFER],
            "net": sums[INCOME] + sums[EXPENSE] + sums[TRANSFER],
        }

    def spending(self, lo: int, hi: int, group_by: str) -> tuple[int, list[dict[str, Any]]]:
        cells: dict[Any, list[int]] = {}
        if group_by == "merchant":
            for _, st in self.ledger.day_range(lo, hi):
                for merchant, (amt, cnt) in st.spend_merchant.items():
                    cell = cells.setdefault(merchant, [0, 0])
                    cell[0] += amt
                    cell[1] += cnt
        else:
            for day, st in self.ledger.day_range(lo, hi):
                for cat, (amt, cnt) in st.spend_cat.items():
                    key = cat if group_by == "category" else date.fromordinal(day).strftime("%Y-%m")
                    cell = cells.setdefault(key, [0, 0])
                    cell[0] += amt
                    cell[1] += cnt
        rows = []
        for key, (amt, cnt) in cells.items():
            if group_by == "category":
                label = (
                    self.categories.get(key, "Uncategorized")
                    if key is not None
                    else "Uncategorized"
                )
            else:
                label = key
            rows.append({"key": key, "label": label, "amount": amt, "count": cnt})
        rows.sort(key=lambda r: (r["amount"], r["key"] or ""))
        return sum(r["amount"] for r in rows), rows

    def accounts_summary(self) -> dict[str, Any]:
        assets = liabilities = 0
        by_type: dict[str, int] = {}
        accs = self.visible_accounts()
        for a in accs:
            if a.balance >= 0:
                assets += a.balance
            else:
                liabilities -= a.balance
            by_type[a.type] = by_type.get(a.type, 0) + a.balance
        return {
            "currency": self.currency,
            "assets": assets,
            "liabilities": liabilities,
            "net_worth": assets - liabilities,
            "count": len(accs),
            "by_type": by_type,
        }

    # ---- the exact state, for comparison ---------------------------------------------------
    def dump(self) -> dict[str, Any]:
        return {
            "now": iso_ms(self.now_ms),
            "settings": self.settings(),
            "accounts": [a.record(self.currency) for a in self.visible_accounts()],
            "transactions": [t.record(notes=True) for t in self.ledger.rows],
            "connections": self.connection_records(),
            "sync_status": self.sync_status_records(),
            "categories": [{"id": k, "name": v} for k, v in self.categories.items()],
            "expenses": [
                {"id": e.id, "name": e.name, "budget": e.budget, "balance": self.expense_balance(e)}
                for e in self.expenses.values()
            ],
        }

    def connection_records(self) -> list[dict[str, Any]]:
        return [
            {
                "id": c.id,
                "provider": c.provider,
                "institution": c.institution,
                "status": c.status,
                "last_synced_at": iso_ms(c.last_synced_ms),
                "account_ids": [
                    a for a in c.account_ids if a in self.accounts and not self.accounts[a].hidden
                ],
            }
            for c in self.connections
        ]

    def sync_status_records(self) -> list[dict[str, Any]]:
        return [
            {
                "connection_id": c.id,
                "provider": c.provider,
                "status": c.status,
                "last_synced_at": iso_ms(c.last_synced_ms),
                "next_sync_at": iso_ms(c.next_sync_ms),
            }
            for c in self.connections
        ]
