"""centsync's transforms: pure Polars, frames in and frames out, no I/O at all.

The layer between the warehouse's typed tables and what analysts and reconciliation read:
`spending` (the spending rules), `balances` (balance history and net worth), `marts` (every
mart and its pandera schema) and `reconcile` (comparisons with the service's aggregates in
`compare`, row differences in `row_diff`, the explaining rules in `explain`; `reconcile`
gathers their names). It imports no other centsync layer; `pipelines` reads frames
from the warehouse, passes them through these functions and writes the results back.
"""
