"""Reconciliation: every number the service also computes, compared with ours to the cent.

This module gathers the names of three: `compare` (the comparisons and their statuses),
`row_diff` (row differences) and `explain` (the rules that explain a difference).

Pure Polars. `pipelines` reads the local tables and the service's aggregates (`server.*`, or
freshly fetched ones), and these functions return one row per comparison:

    check, scope, subject, label, from_date, to_date,
    local_cents, server_cents, difference_cents, local_count, server_count, status, explanation

`status` is `agree` (same cents and count), or, for a difference, `explained` when the evidence
shows the local copy is exactly what the service sent and the service changed afterwards, else
`differ`; `unavailable` when the service's side could not be read (an answer the API document
leaves "not shown" that centsync could not learn, or a figure it does not give): listed with
the reason, never counted as agreeing, and no part of the verdict. `difference_cents` is local minus server. The rules:

- spending (`spending.month`, `spending.category`, `spending.merchant`): each spending request
  the refresh made, over its own from..to, against the local expense rows of the same range;
- transaction totals (`transactions.income`, `.expense`, `.transfer`, `.net`, with the counts
  on `.net`): each `/v1/transactions/summary` the refresh made;
- accounts (`accounts.assets`, `.liabilities`, `.net_worth`, `.by_type`) and net worth
  (`net_worth.assets`, `.liabilities`, `.total`);
- a category or merchant that differs over a range is placed in its months (`to_narrow`,
  `month_rows`: scope `YYYY-MM/label`) with the service's spending of halves of the range.
"""

from __future__ import annotations

from centsync.transform.compare import (
    EPOCH,
    RESULT_SCHEMA,
    STATUS_ORDER,
    Cell,
    account_checks,
    month_rows,
    narrowest_first,
    period_label,
    spending_checks,
    subject_spending,
    summary_checks,
    to_narrow,
    unavailable_checks,
    verdict,
    with_status,
)
from centsync.transform.explain import RULES, Evidence, Explanation, explain
from centsync.transform.row_diff import ACCOUNT_FIELDS, ROW_DIFF_SCHEMA, TX_FIELDS, diff_rows

__all__ = [
    "ACCOUNT_FIELDS",
    "EPOCH",
    "RESULT_SCHEMA",
    "ROW_DIFF_SCHEMA",
    "RULES",
    "STATUS_ORDER",
    "TX_FIELDS",
    "Cell",
    "Evidence",
    "Explanation",
    "account_checks",
    "diff_rows",
    "explain",
    "month_rows",
    "narrowest_first",
    "period_label",
    "spending_checks",
    "subject_spending",
    "summary_checks",
    "to_narrow",
    "unavailable_checks",
    "verdict",
    "with_status",
]
