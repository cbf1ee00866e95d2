"""centsync's transforms: pure Polars, frames in and frames out, no I/O at all.

The layer between the warehouse's typed tables and what analysts and reconciliation read:
spending, net worth, balance history, reconciliation diffs (the marts issue fills it). It
imports no other centsync layer; `pipelines` reads frames from the warehouse, passes them
through these functions and writes the results back.
"""
