"""The analysts' marts on known truth: precision, recall and build time.

The sandbox's household with its `noise` option (price rises, skipped and moved occurrences,
an ended subscription, one-off purchases at recurring merchants, lone transfer legs of equal
amounts) records which rows belong to which recurring series and transfer pair
(sandbox/household_truth.py). This builds `transform/analyst_marts.py` on it, for several seeds
and sizes, and prints precision and recall of series membership and of transfer pairing, and
the build time (Polars + pandera, the warehouse's read and write not included; the best of
three builds) at 1,000,000 rows.

    uv run --frozen python bench/analyst_marts.py [--seeds 1 2 3 4 5] [--big 1000000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import time

import polars as pl

from centsync.sandbox.household import generate
from centsync.sandbox.household_truth import ledger_columns, pair_score, series_score
from centsync.transform import analyst_marts

NOW = dt.datetime(2026, 3, 15, 12, tzinfo=dt.UTC)
NOW_MS = int(NOW.timestamp() * 1000)


def frames(
    seed: int, years: int, transactions: int | None
) -> tuple[object, analyst_marts.LedgerFrames]:
    """The noisy household and the marts' inputs from it."""
    hh = generate(seed, NOW_MS, years=years, transactions=transactions, noise=True)
    tx = pl.DataFrame(ledger_columns(hh), schema_overrides={"amount": pl.Int64})
    accounts = pl.DataFrame(
        {
            "id": [a.id for a in hh.accounts if not a.hidden],
            "name": [a.name for a in hh.accounts if not a.hidden],
            "type": [a.type for a in hh.accounts if not a.hidden],
        }
    )
    return hh, analyst_marts.LedgerFrames(tx.lazy(), accounts.lazy(), NOW.date())


def measure(seed: int, years: int, transactions: int | None, repeat: int = 1) -> dict[str, object]:
    """Scores and build time (the best of `repeat` builds: the machine is shared) of one size."""
    hh, inputs = frames(seed, years, transactions)
    inputs = analyst_marts.LedgerFrames(
        inputs.transactions.collect().lazy(), inputs.accounts, inputs.today
    )  # the ledger in memory, as the warehouse's read gives it
    seconds = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        marts = analyst_marts.build(inputs)
        seconds = min(seconds, time.perf_counter() - started)
    members = marts["recurring_transactions"].select("transaction_id", "series_id").rows()
    pairs = marts["transfer_pairs"].select("out_transaction_id", "in_transaction_id").rows()
    s = series_score(hh.truth, members)  # type: ignore[attr-defined]
    p = pair_score(hh.truth, pairs)  # type: ignore[attr-defined]
    return {
        "seed": seed,
        "years": years,
        "rows": inputs.transactions.select(pl.len()).collect().item(),
        "series_precision": round(s.precision, 4),
        "series_recall": round(s.recall, 4),
        "pairs_precision": round(p.precision, 4),
        "pairs_recall": round(p.recall, 4),
        "series": marts["recurring_series"].height,
        "pairs": marts["transfer_pairs"].height,
        "seconds": round(seconds, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--big", type=int, default=1_000_000, help="rows of the timed build")
    args = parser.parse_args()
    # natural histories of 1, 3 and 6 years (the scale knob's trim drops rows at random, not a
    # ledger: its series lose half their occurrences), and one padded with variable spending
    sizes = [(1, None), (3, None), (6, None), (3, 20_000)]
    header = "seed years rows series_P series_R pairs_P pairs_R series pairs seconds"
    print(header)
    for seed in args.seeds:
        for years, n in sizes:
            r = measure(seed, years, n)
            print(" ".join(str(v) for v in r.values()))
    if args.big:
        for seed in args.seeds[:2]:
            r = measure(seed, 3, args.big, repeat=3)
            print(" ".join(str(v) for v in r.values()), "(the timed build)")


if __name__ == "__main__":
    main()
