"""Every query the use cases and outputs run against a warehouse, behind named functions.

`pipelines/` holds no SQL (the demo's printed example queries aside): what it needs to know of a
warehouse it asks here, by name, the way sqlite-utils keeps every statement behind its library.
Each function takes an open connection (read only or the refresh's own) and returns plain
Python values or Polars frames. Sections by the room that asks.
"""

from __future__ import annotations

# --- refresh and reconciliation (pipelines/refresh/, pipelines/reconcile.py) -----------------


# --- write-back (pipelines/writeback/) ---------------------------------------------------------


# --- outputs: status, report (pipelines/outputs/) --------------------------------------------


# --- the CLI (pipelines/cli/) ----------------------------------------------------------------
