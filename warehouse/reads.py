"""Every query the use cases and outputs run against a warehouse, behind named functions.

`pipelines/` holds no SQL (the demo's printed example queries aside): what it needs to know of a
warehouse it asks here, by name, the way sqlite-utils keeps every statement behind its library.
Each function takes an open connection (read only or the refresh's own) and returns plain
Python values or Polars frames. Sections by the room that asks.
"""

from __future__ import annotations

import duckdb

# --- refresh and reconciliation (pipelines/refresh/, pipelines/reconcile.py) -----------------


# --- write-back (pipelines/writeback/) ---------------------------------------------------------


# --- outputs: status, report (pipelines/outputs/) --------------------------------------------


# --- the CLI (pipelines/cli/) ----------------------------------------------------------------


def rejected_in_latest_refresh(con: duckdb.DuckDBPyConnection) -> tuple[int, str | None]:
    """Rows validation rejected in the latest succeeded refresh, and one of their reasons
    (the `no_rejected_rows` asset check)."""
    row = con.execute(
        """
        SELECT count(*), any_value(reason) FROM raw.rejected_rows
        WHERE refresh_id = (SELECT refresh_id FROM ops.refreshes WHERE status = 'succeeded' ORDER BY started_at DESC LIMIT 1)
        """
    ).fetchone()
    n, reason = row or (0, None)
    return int(n), None if reason is None else str(reason)
