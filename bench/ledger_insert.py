"""What a first sync's DuckDB inserts cost, and what the alternatives would: one variant per
process, on a real DuckDB file, windows of about 170,000 rows landed as the refresh lands them.

    uv run --frozen python bench/ledger_insert.py [--rows 1000000] [--variants "a;b;..."]

The rows are the sandbox's (10 years), served as its list pages are (200 a page), cut and
parsed by the extract client's own parser in batches of 150 pages and validated, exactly the
frames a first sync stages (cached in the temp folder). Each window is one transaction of
core.transactions then raw.transactions (the refresh's `_apply` on new months), a CHECKPOINT
after each window (the read's), and a last one (the publish's). Printed per variant: CPU-s of
the windows' statements, of the checkpoints, their sum, wall, the peak RSS above the process's
before the first window, and the file's size. Figures only, nothing asserted on time; each
variant checks that every id landed once and that the payloads read back exactly as sent.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import polars as pl
import psutil

from centsync.extract._frames import TRANSACTION_WIRE, cut_page, frame_from_chunks
from centsync.pipelines.refresh.plan import STREAM_BATCH_PAGES, WINDOW_ROWS
from centsync.warehouse.common import _TX_SELECT
from centsync.warehouse.validation import split_valid

CORE = """CREATE TABLE core.transactions (
    id UUID {pk}, account_id UUID NOT NULL, concept VARCHAR NOT NULL, amount BIGINT NOT NULL,
    booked_at DATE NOT NULL, month DATE NOT NULL, type VARCHAR NOT NULL, category_id UUID,
    expense_goal_id UUID, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ,
    refresh_id VARCHAR NOT NULL)"""
RAW = """CREATE TABLE raw.transactions (id UUID NOT NULL, booked_at DATE NOT NULL,
    refresh_id VARCHAR NOT NULL, raw {raw_type} NOT NULL {compression})"""

BASE = {
    "pk": True,  # core.transactions.id PRIMARY KEY (else NOT NULL and the anti-join check)
    "raw_type": "JSON",  # raw.transactions.raw's type (VARCHAR: stored as sent, uncast)
    "compression": "zstd",  # raw's USING COMPRESSION (auto: DuckDB's choice)
    "checkpoint": "window",  # window: after each window (the read's); end: the publish's only
    "threshold": "64MB",  # checkpoint_threshold (the working copy's)
    "memory": "160MB",  # memory_limit (the refresh's default)
    "threads": 2,
    "preserve_order": True,
    "order": "read",  # read: as the pages came (newest first); id: sorted by id
    "check": False,  # the uniqueness check without a key: window distinct + anti-join on core
    "attach": "",  # options of the file's ATTACH (DuckDB's storage: ROW_GROUP_SIZE, RECOVERY_MODE)
}
NOW = {"pk": False, "check": True}  # since migration 015
VARIANTS: dict[str, dict[str, object]] = {
    "primary key (before 015)": {},
    "key, rows sorted by id": {"order": "id"},
    "no key, ids checked (015)": NOW,
    "015, no check (what the check costs)": {"pk": False},
    "015 + raw VARCHAR (no JSON cast)": {**NOW, "raw_type": "VARCHAR"},
    "015 + raw auto compression": {**NOW, "compression": ""},
    "015 + raw uncompressed": {**NOW, "compression": "uncompressed"},
    "015 + checkpoint at the end only": {**NOW, "checkpoint": "end"},
    "015 + checkpoint_threshold 1GB, at the end": {**NOW, "checkpoint": "end", "threshold": "1GB"},
    "015 + preserve_insertion_order false": {**NOW, "preserve_order": False},
    "015 + one thread": {**NOW, "threads": 1},
    "015 + row groups of 30,720": {**NOW, "attach": "ROW_GROUP_SIZE 30720"},
    "015 + row groups of 61,440": {**NOW, "attach": "ROW_GROUP_SIZE 61440"},
    "015 + no WAL writes": {**NOW, "attach": "RECOVERY_MODE no_wal_writes"},
}


def _cache(rows: int) -> Path:
    return Path(tempfile.gettempdir()) / f"ledger_insert_{rows}.parquet"


def build(rows: int) -> Path:
    """The sandbox's ledger as the client parses its pages: validated batches, with `batch`
    (the 150-page batch a row came in) and `window` (its ~170,000-row month window)."""
    path = _cache(rows)
    if path.exists():
        return path
    from centsync.sandbox import Sandbox, SandboxConfig

    t = time.perf_counter()
    sb = Sandbox(SandboxConfig(seed=1, years=10, transactions=rows, rate_limit=False))
    txs = sb.service.ledger.rows  # newest first, as the list pages them
    frames: list[pl.DataFrame] = []
    per_batch = 200 * STREAM_BATCH_PAGES
    for n, start in enumerate(range(0, len(txs), per_batch)):
        chunk = txs[start : start + per_batch]
        pages = [
            cut_page(b'{"data":[%b],"total":%d}' % (b",".join(t.list_json() for t in part), 0))
            for part in (chunk[i : i + 200] for i in range(0, len(chunk), 200))
        ]
        valid = split_valid("transactions", frame_from_chunks(pages, TRANSACTION_WIRE)).valid
        frames.append(valid.with_columns(batch=pl.lit(n, pl.Int32)))
    frame = pl.concat(frames)
    months = frame.select(pl.col("booked_at").dt.truncate("1mo").alias("m"))["m"]
    per_month = frame.height / months.n_unique()
    size = max(1, int(WINDOW_ROWS // per_month))
    order = months.unique().sort(descending=True).to_list()
    window = {m: i // size for i, m in enumerate(order)}
    frame = frame.with_columns(window=months.replace_strict(window, return_dtype=pl.Int32))
    frame.write_parquet(path)
    print(f"built {frame.height:,} rows in {time.perf_counter() - t:.0f} s: {path}", flush=True)
    return path


def _windows(path: Path, order: str) -> list[pl.DataFrame]:
    """Each window as the stage hands it to DuckDB: its batches, unrechunked."""
    frame = pl.read_parquet(path)
    out = []
    for _, w in frame.group_by("window", maintain_order=True):
        if order == "id":
            w = w.sort("id")
        batches = [b.drop("batch", "window") for _, b in w.group_by("batch", maintain_order=True)]
        out.append(pl.concat(batches, rechunk=False))
    return out


class Peak:
    def __init__(self) -> None:
        self.proc = psutil.Process()
        self.peak = self.proc.memory_info().rss
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.01)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_variant(name: str, path: Path, folder: Path) -> str:
    v = {**BASE, **VARIANTS[name]}
    windows = _windows(path, str(v["order"]))
    db = folder / "v.duckdb"
    con = duckdb.connect()
    attach = f", {v['attach']}" if v["attach"] else ""
    con.execute(f"ATTACH '{db}' AS v (BLOCK_SIZE 262144{attach}); USE v")
    for sql in (
        f"SET checkpoint_threshold = '{v['threshold']}'",
        "SET fsync_mode = 'NONE'",
        f"SET memory_limit = '{v['memory']}'",
        f"SET threads = {v['threads']}",
        f"SET preserve_insertion_order = {str(v['preserve_order']).lower()}",
        "CREATE SCHEMA core; CREATE SCHEMA raw",
        CORE.format(pk="PRIMARY KEY" if v["pk"] else "NOT NULL"),
        RAW.format(
            raw_type=v["raw_type"],
            compression=f"USING COMPRESSION {v['compression']}" if v["compression"] else "",
        ),
    ):
        con.execute(sql)
    con.execute("CHECKPOINT")
    raw = "raw::JSON" if v["raw_type"] == "JSON" else "raw"
    base_rss = psutil.Process().memory_info().rss
    peak = Peak()
    t0, c0 = time.perf_counter(), _cpu()
    cp = 0.0
    parts = dict.fromkeys(("check", "core", "raw", "commit"), 0.0)

    def timed(part: str, sql: str) -> list[tuple[object, ...]]:
        c = _cpu()
        rows = con.execute(sql).fetchall()
        parts[part] += _cpu() - c
        return rows

    for i, w in enumerate(windows):
        con.register("_w", w)
        con.begin()
        if v["check"]:
            twice, known = timed(
                "check",
                "SELECT (SELECT count(*) - count(DISTINCT id) FROM _w), "
                "(SELECT count(*) FROM core.transactions WHERE id IN (SELECT id::UUID FROM _w))",
            )[0]
            if twice or known:
                raise SystemExit(f"window {i}: {twice} ids twice, {known} already landed")
        timed("core", f"INSERT INTO core.transactions SELECT {_TX_SELECT}, 'r' FROM _w")
        timed("raw", f"INSERT INTO raw.transactions SELECT id::UUID, booked_at, 'r', {raw} FROM _w")
        timed("commit", "COMMIT")
        con.unregister("_w")
        if v["checkpoint"] == "window":
            c = _cpu()
            con.execute("CHECKPOINT")
            cp += _cpu() - c
    c = _cpu()
    con.execute("CHECKPOINT")
    cp += _cpu() - c
    cpu, wall = _cpu() - c0, time.perf_counter() - t0
    peak.stop.set()
    peak.thread.join()
    _check(con, windows)
    con.close()
    size = db.stat().st_size
    split = " | ".join(f"{parts[k]:.2f}" for k in ("check", "core", "raw", "commit"))
    return (
        f"| {name} | {split} | {cp:.2f} | **{cpu:.2f}** | {wall:.2f} "
        f"| {(peak.peak - base_rss) / 2**20:.0f} | {size / 2**20:.0f} |"
    )


def _check(con: duckdb.DuckDBPyConnection, windows: list[pl.DataFrame]) -> None:
    """Every id once in core and raw; a sample of payloads reads back byte for byte."""
    n = sum(w.height for w in windows)
    got = con.execute(
        "SELECT count(*), count(DISTINCT id) FROM core.transactions "
        "UNION ALL SELECT count(*), count(DISTINCT id) FROM raw.transactions"
    ).fetchall()
    if got != [(n, n), (n, n)]:
        raise SystemExit(f"landed {got}, expected {n} distinct ids in each")
    sample = pl.concat([w.gather_every(997) for w in windows]).select("id", "raw")
    con.register("_s", sample)
    differ = con.execute(
        "SELECT count(*) FROM _s JOIN raw.transactions r ON r.id = _s.id::UUID "
        "WHERE r.raw::VARCHAR IS DISTINCT FROM _s.raw"
    ).fetchall()[0][0]
    if differ:
        raise SystemExit(f"{differ} payloads differ from what was sent")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--variants", default=";".join(VARIANTS), help="names separated by ;")
    ap.add_argument("--reps", type=int, default=1, help="rounds of every variant, interleaved")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # a child: run this variant
    args = ap.parse_args()
    path = build(args.rows)
    if args.one:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as folder:
            print(run_variant(args.one, path, Path(folder)), flush=True)
        return
    print(f"{args.rows:,} rows; windows of about {WINDOW_ROWS:,}; one process per variant")
    print(
        "CPU-s of each part over all windows (check: the uniqueness check without a key; "
        "commit: the COMMITs; checkpoints: the windows' and the last)"
    )
    names = [n.strip() for n in args.variants.split(";")]
    for name in names:
        if name not in VARIANTS:
            raise SystemExit(f"no variant {name!r}; known: {'; '.join(VARIANTS)}")
    header = (
        "| variant | check | core insert | raw insert | commit | checkpoints | total CPU-s "
        "| wall s | peak RSS +MB | file MB |\n| - | -: | -: | -: | -: | -: | -: | -: | -: | -: |"
    )
    if args.reps == 1:
        print(header)
    runs: dict[str, list[list[float]]] = {name: [] for name in names}
    for _ in range(args.reps):  # interleaved: a busy moment hits every variant alike
        for name in names:
            out = subprocess.run(
                [sys.executable, __file__, "--rows", str(args.rows), "--one", name],
                capture_output=True,
                text=True,
            )
            if out.returncode:
                print(f"| {name} | failed: {out.stderr.strip().splitlines()[-1]} |", flush=True)
                continue
            line = out.stdout.strip()
            print(line if args.reps == 1 else f"run: {line}", flush=True)
            runs[name].append([float(x.strip(" *")) for x in line.strip("|").split("|")[1:]])
    if args.reps > 1:
        print(f"medians of {args.reps} interleaved runs:\n{header}")
        for name, rows in runs.items():
            if rows:
                cols = [statistics.median(col) for col in zip(*rows, strict=True)]
                cells = [f"{x:.2f}" for x in cols[:7]] + [f"{x:.0f}" for x in cols[7:]]
                cells[5] = f"**{cells[5]}**"
                print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
