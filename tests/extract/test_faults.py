"""A hostile network and a changing ledger: the result still equals the server's state."""

from __future__ import annotations

import logging
import time

import polars as pl
import pytest

from centsync.extract import (
    DriftError,
    ExtractError,
    NotFound,
    RateLimited,
    ServiceUnavailable,
)

from .conftest import AsgiEnv, comparable, run, state_frame

HOSTILE = {
    "error_rate": 0.1,
    "error_statuses": [500, 500, 500, 503],
    "drop_rate": 0.05,
    "latency_ms": 2,
}


@pytest.mark.parametrize("parse_batch_pages", [100, 1, 3])
def test_faulty_drifting_run_reads_exactly_the_server_state(
    asgi_env: AsgiEnv, parse_batch_pages: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # small parse batches: a window's pages are parsed in several batches while it is read
    monkeypatch.setattr("centsync.extract._reader.PARSE_BATCH_PAGES", parse_batch_pages)

    async def go() -> None:
        admin = asgi_env.admin()
        await admin.faults(**HOSTILE, drift={"inserts": 1, "updates": 1, "deletes": 1, "pages": 10})
        years = [("2026-01-01", None), ("2025-01-01", "2025-12-31"), (None, "2024-12-31")]
        async with asgi_env.client(max_attempts=12) as c:
            batches = [b async for b in c.read_transactions(years)]
            stats = c.stats.total()
        frame = pl.concat([b.frame for b in batches])
        reports = [b.report for b in batches]
        await admin.clear_faults()
        state = await admin.state()
        assert comparable(frame).equals(state_frame(state))
        assert sum(r.rereads for r in reports) >= 1  # the drift was seen and repaired
        assert all(r.verified for r in reports)
        assert stats.retries > 0  # faults were met (and got past)

    run(go())


def test_insert_and_delete_between_pages_triggers_a_reread(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        admin = asgi_env.admin()
        await admin.faults(drift={"inserts": 2, "deletes": 1, "pages": 2})
        async with asgi_env.client() as c:
            batches = [b async for b in c.read_transactions([("2025-01-01", "2025-12-31")])]
            snapshot = c.stats.snapshot()["GET /v1/transactions"]
        report = batches[0].report
        assert report.rereads >= 1 and report.reasons
        assert snapshot["rereads"] == report.rereads
        summary_total = (await admin.state())["transactions"]
        in_window = [t for t in summary_total if "2025-01-01" <= t["booked_at"] <= "2025-12-31"]
        assert batches[0].frame.height == len(in_window)

    run(go())


def test_amount_changes_on_read_pages_are_caught_by_the_summary(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        admin = asgi_env.admin()
        # updates only: total and ids never move, only the server's sums can tell
        await admin.faults(drift={"updates": 3, "pages": 3})
        async with asgi_env.client() as c:
            batches = [b async for b in c.read_transactions([("2025-01-01", "2025-12-31")])]
        state = await admin.state()
        rows = {t["id"]: t["amount"] for t in state["transactions"]}
        frame = batches[0].frame
        # whether a change landed on a page already read depends on the draw; either way the
        # rows returned are the server's final amounts
        assert all(rows[i] == a for i, a in frame.select("id", "amount").iter_rows())
        assert batches[0].report.verified

    run(go())


def test_endless_drift_raises_after_the_reread_budget(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        await asgi_env.admin().faults(drift={"inserts": 1, "deletes": 1, "pages": 1000})
        async with asgi_env.client(max_rereads=2) as c:
            with pytest.raises(DriftError) as err:
                async for _ in c.read_transactions([("2025-01-01", "2025-12-31")]):
                    pass
        assert "kept changing" in str(err.value)

    run(go())


def test_retry_after_is_honoured_on_429(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        async with asgi_env.client() as c:
            await c.me()  # the pace is set; the next two requests meet the injected 429s
            await asgi_env.admin().faults(rate_limit_burst=2)
            started = time.monotonic()
            await c.settings()
            elapsed = time.monotonic() - started
            stats = c.stats.snapshot()["GET /v1/settings"]
        assert stats["rate_limited"] == 2 and stats["retries"] == 2
        assert elapsed >= 1.9  # two answers of Retry-After: 1, each waited out

    run(go())


def test_a_burst_of_429s_longer_than_the_retry_count_is_waited_out(
    asgi_env: AsgiEnv, caplog: pytest.LogCaptureFixture
) -> None:
    """Four 429s with Retry-After: 1, more than the 2 attempts other failures get: a wait the
    service asks for is a time budget, not a count; each wait is a visible warning. (Ten, on a
    whole refresh: tests/pipelines/test_edit_kinds_e2e.py.)"""

    async def go() -> None:
        async with asgi_env.client(max_attempts=2) as c:
            await asgi_env.admin().faults(rate_limit_burst=4)
            started = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="centsync.extract"):
                me = await c.me()
            elapsed = time.monotonic() - started
            stats = c.stats.snapshot()["GET /v1/me"]
        assert me.account_id
        assert stats["rate_limited"] == 4 and stats["retries"] == 4
        assert elapsed >= 3.8  # four answers of Retry-After: 1, each waited out
        waits = [
            r.getMessage() for r in caplog.records if "rate limited on GET /v1/me" in r.getMessage()
        ]
        assert len(waits) == 4 and "wait budget" in waits[-1]

    run(go())


def test_a_rate_limit_past_the_wait_budget_stops_saying_when_to_retry(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        async with asgi_env.client(max_wait=2.5) as c:
            await c.me()
            await asgi_env.admin().faults(rate_limit_burst=10)
            started = time.monotonic()
            with pytest.raises(RateLimited) as err:
                await c.settings()
            elapsed = time.monotonic() - started
            stats = c.stats.snapshot()["GET /v1/settings"]
        # two 1 s waits fit in 2.5 s (with jitter), a third would not: three attempts in all
        assert stats["rate_limited"] == 3 and 1.9 <= elapsed < 2.5
        text = str(err.value)
        assert "wait budget (CENTSYNC_MAX_WAIT)" in text and "run again after" in text

    run(go())


def test_503_retry_after_is_waited_then_succeeds(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        await asgi_env.admin().faults(error_rate=1.0, error_statuses=[503])
        async with asgi_env.client(max_attempts=2) as c:
            started = time.monotonic()
            with pytest.raises(ServiceUnavailable) as err:
                await c.settings()
            elapsed = time.monotonic() - started
        assert err.value.retry_after == 1.0 and err.value.retryable
        assert elapsed >= 0.95

    run(go())


def test_permanent_error_surfaces_once_with_code_and_no_retry(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        await asgi_env.admin().faults(latency_ms=1)
        async with asgi_env.client() as c:
            with pytest.raises(NotFound) as err:
                await c.transaction("00000000-0000-4000-8000-000000000000")
            stats = c.stats.snapshot()["GET /v1/transactions/{id}"]
        assert stats["requests"] == 1 and stats["retries"] == 0
        e = err.value
        assert (e.status, e.error_code, e.method) == (404, "not_found", "GET")
        assert e.path.startswith("/v1/transactions/") and e.permanent

    run(go())


def test_key_never_appears_in_logs_exceptions_or_reprs(
    asgi_env: AsgiEnv, caplog: pytest.LogCaptureFixture, key_leak_check
) -> None:
    key = asgi_env.keys["read_only"]
    texts: list[str] = []

    async def go() -> None:
        admin = asgi_env.admin()
        await admin.faults(
            error_rate=0.1,
            drop_rate=0.05,
            error_statuses=[500],
            rate_limit_burst=1,
            drift={"inserts": 1, "pages": 3},
        )
        async with asgi_env.client(key, max_attempts=12) as c:
            texts.append(repr(c))
            texts.append(repr(c._http))
            texts.append(repr(c._auth))
            frame, reports = await c.read_all_transactions()
            texts.extend(str(r.to_json()) for r in reports)
            texts.append(str(c.stats.snapshot()))
            for bad in (
                c.create_transaction(
                    account_id="x",
                    amount=-1,
                    concept="x",
                    booked_at="2025-01-01",
                    idempotency_key="k",
                ),
                c.transaction("00000000-0000-4000-8000-000000000000"),
                c.trigger_sync(),
            ):
                try:
                    await bad
                except ExtractError as exc:
                    texts.extend([str(exc), repr(exc), str(exc.__cause__), str(exc.__context__)])
            assert frame.height > 0

    with caplog.at_level(logging.DEBUG):
        run(go())
    texts.extend(r.getMessage() for r in caplog.records)
    texts.extend(str(r.args) for r in caplog.records)
    assert len(caplog.records) > 10
    key_leak_check(key, texts)


def test_summary_check_flags_a_changed_amount_with_the_same_ids() -> None:
    import orjson

    from centsync.extract._frames import TRANSACTION_WIRE, frame_from_records
    from centsync.extract._models import TransactionsSummary
    from centsync.extract._paging import WindowCheck

    rows = [
        {
            "id": "a",
            "account_id": "x",
            "concept": "c",
            "amount": -500,
            "booked_at": "2025-01-02",
            "type": "expense",
            "category_id": None,
            "expense_goal_id": None,
        },
        {
            "id": "b",
            "account_id": "x",
            "concept": "c",
            "amount": 900,
            "booked_at": "2025-01-01",
            "type": "income",
            "category_id": None,
            "expense_goal_id": None,
        },
    ]
    frame = frame_from_records(rows, TRANSACTION_WIRE)
    same = {"count": 2, "income": 900, "expense": -500, "transfer": 0, "net": 400}
    moved = {**same, "expense": -510, "net": 390}
    ok = TransactionsSummary.parse(same, orjson.dumps(same).decode())
    changed = TransactionsSummary.parse(moved, orjson.dumps(moved).decode())
    assert WindowCheck.verify(frame, ok) is None
    assert "differs" in (WindowCheck.verify(frame, changed) or "")


def test_a_pass_keeps_its_ids_as_hashes_and_still_sees_an_id_read_twice() -> None:
    """A window check holds 8 bytes an id (not its text), and an id read twice, in one part
    or across parts, is still reported, the same way in two passes."""
    import polars as pl

    from centsync.extract._paging import Tally, WindowCheck

    def part(ids: list[str]) -> pl.DataFrame:
        return pl.DataFrame(
            {"id": ids, "amount": [-100] * len(ids), "type": ["expense"] * len(ids)},
            schema={"id": pl.String, "amount": pl.Int64, "type": pl.String},
        )

    ids = [f"{i:08x}-0000-4000-8000-{i:012x}" for i in range(200_000)]
    tally = Tally.of(part(ids))
    assert tally.ids.dtype == pl.UInt64 and tally.ids.estimated_size() <= 8 * len(ids)
    assert part(ids).get_column("id").estimated_size() >= 4 * tally.ids.estimated_size()

    def checked(*parts: list[str]) -> WindowCheck:
        check = WindowCheck()
        check.total = sum(len(p) for p in parts)
        for p in parts:
            check.add(part(p))
        return check

    assert checked(ids[:100_000], ids[100_000:]).done() is None
    twice = [ids[:100_000], ids[99_999:]]  # the last id of the first part comes back
    first, second = checked(*twice), checked(*twice)
    assert first.done() == "1 id(s) read twice" == second.done()
    assert len(first.duplicated()) == 1 and first.duplicated() == second.duplicated()
    assert checked(["a", "b", "a"]).done() == "1 id(s) read twice"
