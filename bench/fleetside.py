"""The fleet's own machinery on loopback, for its bench (bench/owners_fleet.py) and its
end-to-end tests (tests/pipelines/test_owners_fleet_e2e.py, which import it through pytest's
`pythonpath`; bench/ never imports tests/): a private PostgreSQL (the Dagster instance) and
Redis (the Celery broker), and a Dagster home whose processes (the daemon, a Celery worker) are
started in it."""

from __future__ import annotations

import contextlib
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

from centsync.pipelines.cli.console import MANY_OWNERS_POLARS_THREADS, jemalloc, with_preload
from centsync.sandbox.server import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")
BIN = Path(sys.executable).parent


def fleet_environ(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the fleet's processes are started with (docs/scale.md): Polars on one
    thread and the system's jemalloc preloaded (when it has one), as `refresh --all` runs, unless
    the environment says otherwise (an LD_PRELOAD of its own, an empty one included)."""
    out = dict(os.environ if env is None else env)
    out.setdefault("POLARS_MAX_THREADS", MANY_OWNERS_POLARS_THREADS)
    return with_preload(out, jemalloc()) or out


def available() -> bool:
    """Whether Debian's postgresql 15 and redis-server are installed."""
    return (PG_BIN / "initdb").exists() and shutil.which("redis-server") is not None


def _as_postgres_user(*cmd: str) -> list[str]:
    # initdb refuses root: run the cluster as `nobody` when the tests run as root
    return ["runuser", "-u", "nobody", "--", *cmd] if os.geteuid() == 0 else list(cmd)


@contextlib.contextmanager
def postgres() -> Iterator[dict[str, str]]:
    """A throwaway PostgreSQL cluster with a `fleet` database; the fleet's environment for it."""
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


@contextlib.contextmanager
def redis() -> Iterator[str]:
    """A throwaway Redis server on loopback; its URL."""
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


def celery_environ(folder: Path, redis_url: str) -> dict[str, str]:
    """The environment dagster-celery's launcher and worker read: the broker and the result
    backend, and a `dagster_celery_config` module on PYTHONPATH saying the same."""
    config = folder / "celeryconf"
    config.mkdir(exist_ok=True)
    (config / "dagster_celery_config.py").write_text(
        f"broker_url = {redis_url + '/0'!r}\nresult_backend = {redis_url + '/1'!r}\n"
    )
    return {
        "CENTSYNC_FLEET_BROKER": redis_url + "/0",
        "CENTSYNC_FLEET_BACKEND": redis_url + "/1",
        "PYTHONPATH": str(config),
    }


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
        self.env = fleet_environ({**env, "DAGSTER_HOME": str(self.home)})
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *cmd: str) -> None:
        if not self.procs:
            # the instance's tables made once, here, before any process: a daemon creating
            # them while another process (a poll of the runs) does too fails on PostgreSQL
            # ("type run_tags already exists")
            self.run(
                sys.executable, "-c", "from dagster import DagsterInstance; DagsterInstance.get()"
            )
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
