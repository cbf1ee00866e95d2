"""The fleet on Dagster's own machinery, for real: a private PostgreSQL (the instance) and
Redis (the Celery broker) on loopback, the Dagster daemon, the queued run coordinator, and
both run launchers (Dagster's default; dagster-celery's with a Celery worker), against one
many-owner sandbox. Slow: each starts servers and processes (RUN_SLOW=1)."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import fleetside
from centsync.sandbox import SandboxConfig
from centsync.sandbox.fleet import Fleet, key_variable, owners_toml
from centsync.sandbox.server import run_in_thread
from fleetside import BIN, Fleetside
from helpers import START
from system_packages import apt_install

# Debian's postgresql 15 and redis-server are installed with apt when missing (_install)
pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _install() -> None:
    """Debian's postgresql 15 and redis-server, installed with apt when missing (CI starts
    from a clean machine: the fleet's tests run there too, they are not skipped)."""
    apt_install(["postgresql-15", "redis-server"], fleetside.available)


@pytest.fixture(scope="module")
def postgres() -> Iterator[dict[str, str]]:
    _install()
    with fleetside.postgres() as env:
        yield env


@pytest.fixture(scope="module")
def redis() -> Iterator[str]:
    _install()
    with fleetside.redis() as url:
        yield url


@pytest.fixture(scope="module")
def fleet_env(
    tmp_path_factory: pytest.TempPathFactory, postgres: dict[str, str], redis: str
) -> Iterator[tuple[Fleet, Path, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("fleet")
    fleet = Fleet.build(3, SandboxConfig(seed=51, years=1, start=START))
    with run_in_thread(fleet) as base_url:
        (tmp / "owners.toml").write_text(owners_toml(fleet.owners, base_url), "utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CENTSYNC_", "DAGSTER_"))}
        env |= (
            postgres
            | fleetside.celery_environ(tmp, redis)
            | {
                "CENTSYNC_OWNERS_FILE": str(tmp / "owners.toml"),
                "XDG_DATA_HOME": str(tmp / "data"),
                **{key_variable(n): k["read_only"] for n, k in fleet.keys.items()},
            }
        )
        yield fleet, tmp, env


def _spans(runs: list[dict[str, object]], shard: str) -> list[tuple[float, float]]:
    """(start, end) of the finished runs of one shard tag, in order of start."""
    return sorted(
        (float(r["start"]), float(r["end"]))  # type: ignore[arg-type]
        for r in runs
        if r["start"] and r["end"] and r["tags"].get("centsync/shard") == shard  # type: ignore[union-attr]
    )


def test_default_launcher_the_sensor_first_syncs_every_owner(
    fleet_env: tuple[Fleet, Path, dict[str, str]],
) -> None:
    fleet, tmp, env = fleet_env
    side = Fleetside(tmp, env, "postgres")
    try:
        side.start(str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml")
        runs = side.wait(1, timeout=400)
    finally:
        side.stop()
    assert [r["status"] for r in runs] == ["SUCCESS"], (
        side.home / "dagster-daemon.log"
    ).read_text()[-3000:]
    assert runs[0]["tags"]["centsync/shard"] == "owner-001..owner-003"
    for name in fleet.owners:
        assert (tmp / "data" / "centsync" / "owners" / name / "centsync.duckdb").exists()


def test_celery_launcher_one_run_per_owner_at_a_time(
    fleet_env: tuple[Fleet, Path, dict[str, str]],
) -> None:
    _fleet, tmp, env = fleet_env
    side = Fleetside(tmp, env, "celery")
    try:
        side.start(
            str(BIN / "celery"),
            "-A",
            "dagster_celery.app",
            "worker",
            "-Q",
            "dagster",
            "--concurrency",
            "2",
            "--prefetch-multiplier=1",
        )
        side.start(str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml")
        side.wait(1, timeout=400)  # the sensor's first sync of the three owners
        # three more runs of owner-001 and one of owner-002: queued, launched through Celery
        for owner in ("owner-001", "owner-001", "owner-002", "owner-001"):
            tags = {
                "dagster/partition": owner,
                "centsync/shard": owner,
                "centsync/service": "sandbox",
            }
            side.run(
                str(BIN / "dagster"),
                "job",
                "launch",
                "-w",
                "workspace.yaml",
                "-j",
                "owners_refresh",
                "--tags",
                json.dumps(tags),
            )
        runs = side.wait(5, timeout=600)
    finally:
        side.stop()
    statuses = sorted(str(r["status"]) for r in runs)
    logs = "".join(p.read_text()[-2000:] for p in side.home.glob("*.log"))
    assert statuses == ["SUCCESS"] * 5, logs
    spans = _spans(runs, "owner-001")
    assert len(spans) == 3
    # the tag limit: a run of owner-001 starts only once the one before has ended
    assert all(start >= end for (_, end), (start, _) in itertools.pairwise(spans))
    assert all("dagster/partition" in r["tags"] or "centsync/shard" in r["tags"] for r in runs)
