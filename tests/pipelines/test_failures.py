"""How a failure becomes an exit code: by its class (or a run's Failure metadata), never its name."""

from __future__ import annotations

import ast
import errno
import re
from pathlib import Path

import dagster as dg
import duckdb
import httpx
import pytest

from centsync.extract import _errors as extract_errors
from centsync.pipelines import failures as errors
from centsync.pipelines import recorded
from centsync.pipelines.defs.failures import known_failures
from centsync.pipelines.refresh.binding import SourceMismatch
from centsync.sandbox.state import SandboxStateError
from centsync.transform.contract import Outcome
from centsync.warehouse import errors as warehouse_errors
from centsync.warehouse.outbox import OutboxBusyError

ROOT = Path(__file__).resolve().parents[2]


def _api(cls: type[extract_errors.ApiError]) -> extract_errors.ApiError:
    return cls(status=500, code=cls.code, message="m", method="GET", path="/v1/me")


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (extract_errors.ConfigurationError("bad"), errors.USAGE),
        (_api(extract_errors.Unauthenticated), errors.AUTH),
        (_api(extract_errors.KeyExpired), errors.AUTH),
        (_api(extract_errors.InsufficientScope), errors.AUTH),
        (extract_errors.TransportFailure("GET", "/v1/me", OSError()), errors.UNREACHABLE),
        (
            extract_errors.ServiceUnreachable("GET", "/v1/me", OSError(), "refused"),
            errors.UNREACHABLE,
        ),
        (_api(extract_errors.InternalError), errors.SERVICE),
        (_api(extract_errors.RateLimited), errors.SERVICE),
        (extract_errors.DriftError("d"), errors.SERVICE),
        (warehouse_errors.RefreshInProgressError("busy"), errors.WAREHOUSE),
        (warehouse_errors.NoWarehouseError("none"), errors.WAREHOUSE),
        (warehouse_errors.MonthBoundsError("bounds"), errors.WAREHOUSE),
        (OutboxBusyError("busy"), errors.WAREHOUSE),
        (duckdb.IOException("cannot open"), errors.WAREHOUSE),
        (duckdb.CatalogException("no table"), errors.WAREHOUSE),
        (LookupError("no reconciliation yet"), errors.WAREHOUSE),
        (OSError(errno.ENOSPC, "No space left on device"), errors.WAREHOUSE),
        (httpx.ConnectError("boom"), errors.SERVICE),
    ],
)
def test_a_known_failure_has_its_code_on_its_class(exc: BaseException, code: int) -> None:
    kind = errors.kind_of(exc)
    assert kind is not None and kind.code == code and kind.headline
    assert errors.from_exception(exc).code == code


def test_every_documented_class_says_what_to_do() -> None:
    for cls in (extract_errors.Unauthenticated, extract_errors.ServiceUnreachable):
        assert cls.outcome and cls.headline and cls.what_to_do
    assert warehouse_errors.WarehouseError.outcome is Outcome.WAREHOUSE
    # the base class leaves it to the chain; any answer of the service is the service's (5)
    assert extract_errors.ExtractError.outcome is None
    assert extract_errors.ApiError.outcome is Outcome.SERVICE
    assert errors.kind_of(_api(extract_errors.NotFound)).code == errors.SERVICE  # type: ignore[union-attr]


def test_the_one_table_gives_every_meaning_its_documented_code() -> None:
    # docs/cli.md's "Exit codes" table: the first column's codes, every one of them
    section = (ROOT / "docs" / "cli.md").read_text().split("## Exit codes", 1)[1]
    rows = [line for line in section.split("\n## ", 1)[0].splitlines() if line.startswith("| `")]
    documented = {int(code) for row in rows for code in re.findall(r"`(\d+)`", row.split("|")[1])}
    assert set(errors.EXIT_CODES) == set(Outcome)
    assert sorted(errors.EXIT_CODES.values()) == sorted(documented)
    assert (errors.USAGE, errors.AUTH, errors.WAREHOUSE, errors.TERMINATED) == (2, 3, 6, 143)
    # the sandbox shares no code: it spells its outcome as the value, the same meaning
    kind = errors.kind_of(SandboxStateError("unreadable"))
    assert kind is not None and kind.code == errors.WAREHOUSE


def test_no_layer_but_the_edge_names_an_exit_code() -> None:
    """A failure class says what it means (`outcome`), never a number: only the table does."""
    offenders = []
    for layer in ("extract", "warehouse", "transform", "sandbox", "pipelines"):
        for source in sorted((ROOT / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(source.read_text(), str(source))):
                if not isinstance(node, ast.ClassDef):
                    continue
                names = {
                    t.id
                    for s in node.body
                    for t in (
                        s.targets if isinstance(s, ast.Assign) else [getattr(s, "target", None)]
                    )
                    if isinstance(t, ast.Name)
                }
                if "headline" in names and "exit_code" in names:
                    offenders.append(f"{source.relative_to(ROOT)}: {node.name}")
    assert offenders == []


@pytest.mark.parametrize(
    "exc",
    [
        KeyError("a bug"),
        ValueError("a bug"),
        RuntimeError("Transport is closing"),
    ],
)
def test_an_unexpected_error_is_not_known_whatever_its_message(exc: BaseException) -> None:
    assert errors.kind_of(exc) is None
    failure = errors.from_exception(exc)
    # a bug has its own code: never 1, which means a reconciliation difference
    assert failure.code == errors.INTERNAL == 70 and "bug" in failure.kind.headline


def test_the_first_known_exception_of_a_chain_names_it() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("while publishing") from inner
    except RuntimeError as outer:
        found = errors.known(outer)
    assert found is not None and found[1] is errors.DISK_FULL


def _failed_run(exc: BaseException) -> dg.ExecuteInProcessResult:
    @dg.op
    def boom() -> None:
        with known_failures():
            raise exc

    @dg.job
    def j() -> None:
        boom()

    return j.execute_in_process(raise_on_error=False)


def _classified(run: dg.ExecuteInProcessResult) -> errors.Failure:
    """The failure as the one reader of a run names it (the CLI's and the sensors')."""
    return recorded.failure(run.all_events, run.run_id)


def test_a_run_carries_the_known_failure_in_its_metadata() -> None:
    run = _failed_run(_api(extract_errors.KeyExpired))
    failure = _classified(run)
    assert failure.code == errors.AUTH and failure.cls == "KeyExpired"
    assert failure.kind.headline == "the API key has expired"
    assert failure.message.startswith("GET /v1/me -> 500 key_expired: m")
    assert "KeyExpired" in failure.detail  # the whole chain, for the log


def test_a_run_failing_unexpectedly_exits_70_with_the_error_s_own_message() -> None:
    failure = _classified(_failed_run(ZeroDivisionError("division by zero")))
    assert failure.code == errors.INTERNAL and failure.cls == "ZeroDivisionError"
    assert failure.message.endswith("division by zero")  # as before: its own text


def test_a_source_mismatch_is_a_warehouse_failure() -> None:
    kind = errors.kind_of(SourceMismatch.__new__(SourceMismatch))
    assert kind is not None and kind.code == errors.WAREHOUSE
