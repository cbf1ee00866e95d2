"""What a refresh did and what its reconciliation found, in the words a person uses: the one
wording the CLI, the report and a scheduled run's log line show.

Counts are of what they name: "changes" are transactions (new, updated, removed); the rows of
other entities a refresh rewrites (accounts, settings, the service's own figures) are behind
`--verbose` and `--json`. "The app" is the service whose numbers the reconciliation proves.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from centsync.pipelines.results import RefreshResult

# keyed by transform.contract.VERDICTS (tests/test_docs.py holds them to it)
VERDICT_WORDS: dict[str, str] = {
    "agree": "every number agrees with the service's own, to the cent",
    "explained": "every difference from the service's own numbers is explained",
    "differ": "some differences from the service's own numbers are not explained",
}


def plural(n: int, one: str, many: str | None = None) -> str:
    """`n` and its noun, singular or plural ("1 change", "1,775 transactions")."""
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def changes(result: RefreshResult) -> str:
    """The transactions a refresh changed: "6 changes (4 new, 2 updated)", "no changes"."""
    rows = result.rows
    parts = [
        f"{n:,} {what}"
        for n, what in ((rows.new, "new"), (rows.updated, "updated"), (rows.removed, "removed"))
        if n
    ]
    total = rows.new + rows.updated + rows.removed
    return f"{plural(total, 'change')} ({', '.join(parts)})" if total else "no changes"


def what_was_read(result: RefreshResult) -> str:
    """The refresh's kind as a person asks for it (the planner's reasoning is `--verbose`'s)."""
    if result.mode == "full" and result.reason == "first sync":
        return "First sync"
    if result.mode == "full":
        why = "as --full asked" if result.reason == "--full" else result.reason
        return f"Up to date, everything re-read ({why})"
    if result.mode == "hot":
        return "This month and last up to date"
    if result.mode == "months":
        return f"Up to date, {result.reason.removesuffix(' forced')} re-read"
    return "Up to date"


def match_sentence(result: RefreshResult) -> str:
    """The reconciliation in one sentence ("All 124 numbers match the app."), "" without one."""
    recon = result.reconciliation
    if not result.verdict:
        return ""
    proved = recon.checked
    unchecked = (
        f"; {plural(recon.unavailable, 'number')} could not be checked (`centsync doctor` says why)"
        if recon.unavailable
        else ""
    )
    if result.verdict == "agree":
        head = f"All {plural(proved, 'number')} match the app"
    elif result.verdict == "explained":
        head = (
            f"All {plural(proved, 'number')} match the app, or differ for a known reason "
            f"({recon.explained:,} explained, below)"
        )
    else:
        head = f"{recon.differ:,} of {plural(proved, 'number')} differ from the app's (below)"
    return head + unchecked + "."


def refresh_headline(result: RefreshResult, *, with_verdict: bool = True) -> str:
    """The one line a person wants from a refresh: what changed, how long it took, whether
    every number matches ("Up to date: 6 changes (4 new, 2 updated) in 0.41 s. All 124 numbers
    match the app.")."""
    took = f" in {result.durations.seconds:.2f} s" if result.durations.seconds else ""
    kind = what_was_read(result)
    if kind == "First sync":
        done = f"First sync: {plural(result.rows.total, 'transaction')}{took}."
    else:
        done = f"{kind}: {changes(result)}{took} ({plural(result.rows.total, 'transaction')})."
    match = match_sentence(result) if with_verdict else ""
    return f"{done} {match}".strip()


def run_line(result: RefreshResult, at: dt.datetime) -> str:
    """A scheduled run's one log line: "refresh 08:32: 4 new, 2 updated, AGREE 124/124"."""
    rows = result.rows
    counts = [f"{n:,} {what}" for n, what in ((rows.new, "new"), (rows.updated, "updated"))]
    if rows.removed:
        counts.append(f"{rows.removed:,} removed")
    recon = result.reconciliation
    verdict = (
        f"{result.verdict.upper()} {recon.checked - recon.differ}/{recon.checked}"
        if result.verdict
        else "not reconciled"
    )
    rejected = f", {rows.rejected:,} rejected" if rows.rejected else ""
    return (
        f"refresh {at:%H:%M %Z} ({result.mode}): {', '.join(counts)}{rejected}, {verdict} "
        f"({result.durations.seconds:.2f} s)"
    )
