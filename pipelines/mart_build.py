"""The marts built: the service's seven from `core` (validated by pandera, each monthly one
with its `partial` month), then the analysts' own; one builder for a refresh, `centsync
reconcile` and the marts recomputed as of a refresh (`pipelines/history.py`)."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
from pathlib import Path

import duckdb
import orjson
import polars as pl

import centsync.transform
from centsync.transform import analyst_marts as analyst_rules
from centsync.transform import marts as mart_rules
from centsync.warehouse import analyst_marts as analyst_store
from centsync.warehouse import marts as store
from centsync.warehouse import validation
from centsync.warehouse.session import ONE_THREAD_ROWS

# The ledger the marts and checks run on: a household's frame, a big one's scan (store.ledger)
Ledger = pl.DataFrame | pl.LazyFrame


def build(
    core: mart_rules.CoreFrames, ledger: Ledger, *, validate: bool = True
) -> dict[str, pl.DataFrame]:
    """Every mart's frame from `core`, validated unless told not to; a monthly mart's current
    month (the service's `core.today`) and any later one are still running: `partial`
    (their figures are to date), in the frames handed on as in the tables."""
    kwargs = {"validate": validation.validated} if validate else {}
    marts = mart_rules.build(core, engine=engine(ledger), **kwargs)
    first = core.today.replace(day=1)
    return {
        name: frame.with_columns(partial=pl.col("month") >= first)
        if "month" in frame.columns
        else frame
        for name, frame in marts.items()
    }


def rebuild_marts(
    con: duckdb.DuckDBPyConnection,
    today: dt.date,
    tx: Ledger | None = None,
    *,
    analyst_ledger: pl.LazyFrame | None = None,
) -> dict[str, pl.DataFrame]:
    """Rebuild every mart from `core` and replace them in one transaction, then the analysts'
    own; returns every mart's frame written (the service's seven, then the analysts'), by
    table name: what the lake takes instead of reading the tables back.

    `tx` is `core.transactions` when the caller has already read it (a million rows: read once);
    `analyst_ledger` the same ledger's scan with the analysts' columns (store.analyst_scan).
    """
    ledger = store.transactions(con) if tx is None else tx
    core = mart_rules.CoreFrames(
        transactions=ledger.lazy(),
        accounts=store.accounts(con).lazy(),
        categories=store.categories(con).lazy(),
        net_worth_history=store.net_worth_history(con).lazy(),
        today=today,
    )
    marts = build(core, ledger)
    store.replace_marts(con, marts)
    return {**marts, **rebuild_analyst_marts(con, today, analyst_ledger)}  # ours, after theirs


def rebuild_analyst_marts(
    con: duckdb.DuckDBPyConnection, today: dt.date, scan: pl.LazyFrame | None = None
) -> dict[str, pl.DataFrame]:
    """The analysts' own marts (recurring series, transfer pairs, Expenses drawn down, merchant
    names: transform/analyst_marts.py), validated, replaced in one transaction; their frames
    written, by table name.

    A household's marts are not rebuilt when everything they are built from is as it was at
    their last build (`inputs`: the ledger, the accounts, the service's today, the renames, the
    schema and this code): a refresh that changed nothing keeps them, and returns no frame for
    them (the lake reads such a table back). `scan`: a big ledger's Parquet copy
    (store.analyst_scan), its plans run on the streaming engine (at 1,000,000 rows the ledger
    read whole, ids as text, was the refresh's peak), always rebuilt; otherwise the ledger is
    read whole, and a household's plans run "in-memory" (`engine`)."""
    names = analyst_store.renames(con)
    built_from = None if scan is not None else inputs(con, today, names)
    if built_from is not None and analyst_store.built_from(con) == built_from:
        return {}
    ledger = analyst_store.ledger(con) if scan is None else scan
    frames = analyst_rules.LedgerFrames(
        ledger.lazy(), analyst_store.accounts(con).lazy(), today, names
    )
    built = analyst_rules.build(frames, validate=validation.validated, engine=engine(ledger))
    analyst_store.replace(con, built, built_from)
    return built


def inputs(con: duckdb.DuckDBPyConnection, today: dt.date, renames: dict[str, str]) -> str:
    """A digest of everything the analysts' marts are a function of: what they read of the
    warehouse (`analyst_store.input_marks`), the service's today, the merchant renames, and
    the code that builds them (`_code`). Equal digests, equal marts."""
    parts = [analyst_store.input_marks(con), today.isoformat(), sorted(renames.items()), _code()]
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()


@functools.cache
def _code() -> str:
    """A digest of the source that builds the analysts' marts: the transform package, their
    reads and writes, their validation, and this module (read once a process)."""
    files = sorted(Path(centsync.transform.__file__).parent.glob("*.py"))
    files += [Path(m.__file__ or "") for m in (analyst_store, validation)] + [Path(__file__)]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def engine(ledger: Ledger) -> mart_rules.Engine:
    """The Polars engine a ledger's plans run on: a household's runs "in-memory" (the default
    engine's start-up is most of a small plan's cost); a big one's scan "streaming", in
    batches of its row groups (store.ledger)."""
    if isinstance(ledger, pl.LazyFrame):
        return "streaming"
    return "in-memory" if ledger.height <= ONE_THREAD_ROWS else "auto"
