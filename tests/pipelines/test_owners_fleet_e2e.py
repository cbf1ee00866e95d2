"""The fleet on Dagster's own machinery, for real: a private PostgreSQL (the instance) and
Redis (the Celery broker) on loopback, the Dagster daemon, the queued run coordinator, and
both run launchers (Dagster's default; dagster-celery's with a Celery worker), against one
many-owner sandbox. Slow: each starts servers and processes (RUN_SLOW=1)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from centsync.sandbox import SandboxConfig
from centsync.sandbox.fleet import Fleet, key_variable, owners_toml
from centsync.sandbox.server import free_port, run_in_thread
from helpers import START

PG_BIN = Path("/usr/lib/postgresql/15/bin")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (PG_BIN / "initdb").exists() or not shutil.which("redis-server"),
        reason="needs Debian's postgresql 15 and redis-server (apt-get install postgresql "
        "redis-server)",
    ),
]
BIN = Path(sys.executable).parent


def _as_postgres_user(*cmd: str) -> list[str]:
    # initdb refuses root: run the cluster as `nobody` when the tests run as root
    return ["runuser", "-u", "nobody", "--", *cmd] if os.geteuid() == 0 else list(cmd)


@pytest.fixture(scope="module")
def postgres() -> Iterator[dict[str, str]]:
    folder = Path(tempfile.mkdtemp(prefix="centsync-pg-"))
    data = folder / "data"
    data.mkdir()
    folder.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(data, "nobody")
    port = free_port()
    subprocess.run(
        _as_postgres_user(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"),
        check=True, capture_output=True,
    )  # fmt: skip
    options = f"-p {port} -c listen_addresses=127.0.0.1 -k {data} -c fsync=off"
    subprocess.run(
        _as_postgres_user(str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(data / "log"), "-w", "start"),
        check=True, capture_output=True,
    )  # fmt: skip
    import psycopg2

    con = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
    con.autocommit = True
    con.cursor().execute("CREATE DATABASE fleet")
    con.close()
    try:
        yield {
            "CENTSYNC_FLEET_PG_HOST": "127.0.0.1",
            "CENTSYNC_FLEET_PG_PORT": str(port),
            "CENTSYNC_FLEET_PG_USER": "postgres",
            "CENTSYNC_FLEET_PG_PASSWORD": "",
            "CENTSYNC_FLEET_PG_DB": "fleet",
        }
    finally:
        subprocess.run(
            _as_postgres_user(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"),
            check=False, capture_output=True,
        )  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def redis() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class Fleetside:
    """A Dagster home for the fleet, its environment, and the processes started in it."""

    def __init__(self, tmp: Path, env: dict[str, str], variant: str) -> None:
        self.home = tmp / f"dagster-{variant}"
        self.home.mkdir()
        yaml = resources.files("centsync.pipelines.fleet").joinpath(f"dagster-{variant}.yaml")
        (self.home / "dagster.yaml").write_text(yaml.read_text("utf-8"), "utf-8")
        (self.home / "workspace.yaml").write_text(
            "load_from:\n  - python_module:\n      module_name: centsync.pipelines.fleet.definitions\n"
        )
        self.env = {**env, "DAGSTER_HOME": str(self.home)}
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *cmd: str) -> None:
        log = open(self.home / f"{Path(cmd[0]).name}.log", "ab")  # noqa: SIM115 (kept by the child)
        self.procs.append(
            subprocess.Popen(
                cmd, env=self.env, cwd=self.home, stdout=log, stderr=log, start_new_session=True
            )
        )

    def run(self, *cmd: str) -> str:
        done = subprocess.run(
            cmd, env=self.env, cwd=self.home, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)

    def runs(self) -> list[dict[str, object]]:
        """Every run of the instance: status, tags, start and end (read by a child process,
        with the fleet's environment)."""
        script = (
            "import json; from dagster import DagsterInstance; i = DagsterInstance.get(); "
            "print(json.dumps([{'id': r.dagster_run.run_id, 'status': r.dagster_run.status.value, "
            "'tags': dict(r.dagster_run.tags), 'start': r.start_time, 'end': r.end_time} "
            "for r in i.get_run_records()]))"
        )
        return list(json.loads(self.run(sys.executable, "-c", script)))

    def wait(self, done: int, timeout: float = 600) -> list[dict[str, object]]:
        deadline = time.monotonic() + timeout
        while True:
            runs = self.runs()
            finished = [r for r in runs if r["status"] in ("SUCCESS", "FAILURE", "CANCELED")]
            if len(finished) >= done or time.monotonic() > deadline:
                return runs
            time.sleep(2)


@pytest.fixture(scope="module")
def fleet_env(
    tmp_path_factory: pytest.TempPathFactory, postgres: dict[str, str], redis: str
) -> Iterator[tuple[Fleet, Path, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("fleet")
    fleet = Fleet.build(3, SandboxConfig(seed=51, years=1, start=START))
    with run_in_thread(fleet) as base_url:
        (tmp / "owners.toml").write_text(owners_toml(fleet.owners, base_url), "utf-8")
        celery_config = tmp / "celeryconf"
        celery_config.mkdir()
        (celery_config / "dagster_celery_config.py").write_text(
            f"broker_url = {redis + '/0'!r}\nresult_backend = {redis + '/1'!r}\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CENTSYNC_", "DAGSTER_"))}
        env |= postgres | {
            "CENTSYNC_FLEET_BROKER": redis + "/0",
            "CENTSYNC_FLEET_BACKEND": redis + "/1",
            "CENTSYNC_OWNERS_FILE": str(tmp / "owners.toml"),
            "XDG_DATA_HOME": str(tmp / "data"),
            "PYTHONPATH": str(celery_config),
            **{key_variable(n): k["read_only"] for n, k in fleet.keys.items()},
        }
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
