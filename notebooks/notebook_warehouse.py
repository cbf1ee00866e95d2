"""What every notebook here opens with: the warehouse file, read only.

The path is `CENTSYNC_WAREHOUSE`, else the documented default (as `centsync` resolves it).
Plain Python with no centsync import: notebooks read the DuckDB file as any analyst's own code
would (docs/architecture.md). The notebooks import this module from their own folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import polars as pl


def warehouse_path() -> Path:
    """CENTSYNC_WAREHOUSE, else `$XDG_DATA_HOME/centsync/centsync.duckdb` (or ~/.local/share)."""
    if os.environ.get("CENTSYNC_WAREHOUSE"):
        return Path(os.environ["CENTSYNC_WAREHOUSE"]).absolute()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).absolute() / "centsync" / "centsync.duckdb"


class ReadOnlyWarehouse:
    """A read-only connection: a refresh publishes a new file by rename and never blocks it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.con = duckdb.connect(str(path), read_only=True)
        currency = self.q("SELECT currency FROM core.settings").get_column("currency").to_list()
        self.currency = (currency or [""])[0]

    def q(self, sql: str, params: list | None = None) -> pl.DataFrame:
        """A query's result as a Polars frame (Polars reads the result's Arrow stream)."""
        return pl.DataFrame(self.con.sql(sql, params=params or None))

    def money(self, cents: int | None) -> str:
        """Integer cents as text (display only): 1234567 -> '12,345.67 EUR'."""
        if cents is None:
            return ""
        sign = "-" if cents < 0 else ""
        whole, part = divmod(abs(int(cents)), 100)
        return f"{sign}{whole:,}.{part:02d} {self.currency}".strip()

    def table(self, frame: pl.DataFrame, money: tuple[str, ...] = (), **options: Any) -> Any:
        """A marimo table whose `money` columns (integer cents) sort as numbers and read as
        money: each holds the amount in currency units (a number) and shows it with the
        currency ('12,345.67 EUR'); the warehouse keeps the cents."""
        import marimo as mo

        units = frame.with_columns((pl.col(c) / 100).alias(c) for c in money)

        def shown(value: float | None) -> str:
            return "" if value is None else self.money(round(value * 100))

        return mo.ui.table(
            units, format_mapping={c: shown for c in money}, selection=None, **options
        )
