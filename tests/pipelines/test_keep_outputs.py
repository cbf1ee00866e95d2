"""No output overwrites what centsync keeps (issue 43): every output flag (`sql --out`,
`report --out`, `export --out` as a ledger and as a folder, `docs --out`, `doctor
--contract-report`, `sandbox serve --keys-out`/`--env-out`) pointed at every file and folder centsync keeps (the warehouse, its
lock, a working copy and a damaged copy, the outbox, the embedded sandbox's state, the Dagster
home, the inbox, the lake, the owners file, and a symlink to the warehouse) is refused with exit
2 naming it, `--force` or not, and nothing kept changes; an existing file of the person's is
replaced only with `--force`."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from centsync.pipelines.cli.main import main

from .test_sql_cli import shared_demo

pytestmark = pytest.mark.e2e

WORK = "centsync.duckdb.refresh-20261127T000000Z-0a1b2c3d"
DAMAGED = "centsync.duckdb.damaged-20261101T000000Z"


class Home:
    """A data folder with the demo warehouse and one of every kept thing, its settings set."""

    def __init__(self, root: Path, demo: Path) -> None:
        self.root = root
        data = root / "data"
        self.warehouse = data / "centsync.duckdb"
        data.mkdir()
        shutil.copyfile(demo, self.warehouse)
        self.dagster = data / "centsync.dagster"
        self.inbox = data / "inbox"
        self.lake = data / "lake"
        self.owners = root / "config" / "owners.toml"
        files = {
            data / "centsync.duckdb.lock": "",
            data / WORK: "a working copy",
            data / DAMAGED: "a damaged warehouse, kept",
            data / "centsync.outbox.duckdb": "the outbox's requests",
            data / "centsync.sandbox": "the sandbox's state",
            self.dagster / "dagster.yaml": "telemetry: {enabled: false}\n",
            self.inbox / "groceries.csv": "date,amount\n",
            self.lake / "_delta_log" / "0.json": "{}",
            self.owners: '[[owner]]\nname = "a"\n',
        }
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.link = root / "elsewhere.csv"
        self.link.symlink_to(self.warehouse)
        self.env = {
            "CENTSYNC_WAREHOUSE": str(self.warehouse),
            "DAGSTER_HOME": str(self.dagster),
            "CENTSYNC_INBOX": str(self.inbox),
            "CENTSYNC_LAKE": str(self.lake),
            "CENTSYNC_OWNERS_FILE": str(self.owners),
            "CENTSYNC_API_BASE_URL": None,
            "CENTSYNC_API_KEY": None,
            "CENTSYNC_OWNER": None,
        }

    def targets(self) -> dict[str, Path]:
        data = self.warehouse.parent
        return {
            "warehouse": self.warehouse,
            "lock": data / "centsync.duckdb.lock",
            "working copy": data / WORK,
            "damaged copy": data / DAMAGED,
            "outbox": data / "centsync.outbox.duckdb",
            "sandbox state": data / "centsync.sandbox",
            "dagster home": self.dagster,
            "dagster.yaml": self.dagster / "dagster.yaml",
            "inbox": self.inbox,
            "inbox file": self.inbox / "groceries.csv",
            "a new file in the inbox": self.inbox / "new.csv",
            "lake": self.lake,
            "owners file": self.owners,
            "symlink to the warehouse": self.link,
        }

    def snapshot(self) -> dict[str, str]:
        """Every file under the data and config folders and its digest."""
        return {
            str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(self.root.rglob("*"))
            if p.is_file() and not p.is_symlink() and "logs" not in p.parts
        }

    def cli(self, *args: str) -> tuple[int, str]:
        result = CliRunner().invoke(main, list(args), env=self.env)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.output


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "master")
    yield Home(tmp_path_factory.mktemp("keep"), shared_demo(tmp_path_factory, worker))


OUTPUTS: dict[str, list[str]] = {
    "sql --out": ["sql", "SELECT 1 AS x", "--format", "csv", "--out"],
    "report --out": ["report", "--out"],
    "export --format beancount --out": ["export", "--format", "beancount", "--out"],
    "export --format csv --out": ["export", "--format", "csv", "--tables", "marts", "--out"],
    "docs --out": ["docs", "--out"],
    "doctor --contract-report": ["doctor", "--contract-report"],
}
FORCED = {
    "sql --out",
    "report --out",
    "export --format beancount --out",
    "export --format csv --out",
}


@pytest.mark.parametrize("output", list(OUTPUTS))
def test_no_output_writes_over_a_kept_file_even_with_force(home: Home, output: str) -> None:
    before = home.snapshot()
    for name, target in home.targets().items():
        for force in ([], ["--force"]) if output in FORCED else ([],):
            code, out = home.cli(*OUTPUTS[output], str(target), *force)
            said = " ".join(out.split())
            assert code == 2, (output, name, force, out)
            assert any(w in said for w in ("centsync keeps", "is a folder", "is a directory")), (
                output,
                name,
                said,
            )
            assert str(target) in said, (output, name, said)
            assert "Traceback" not in out
    assert home.snapshot() == before
    assert not (home.inbox / "new.csv").exists()


@pytest.mark.parametrize("flag", ["--keys-out", "--env-out"])
def test_sandbox_serve_keys_never_go_over_the_warehouse(home: Home, flag: str) -> None:
    before = home.snapshot()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CENTSYNC_")}
    env |= {k: v for k, v in home.env.items() if v is not None}
    for target in (home.warehouse, home.targets()["outbox"]):
        done = subprocess.run(
            [sys.executable, "-m", "centsync.pipelines.cli", "sandbox", "serve", "--port", "0",
             flag, str(target)],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert str(target) in " ".join(done.stderr.split())
    assert home.snapshot() == before


def test_an_existing_file_is_replaced_only_with_force(home: Home, tmp_path: Path) -> None:
    mine = tmp_path / "mine.csv"
    for args in (
        ["sql", "SELECT 1 AS x", "--out"],
        ["report", "--out"],
        ["export", "--format", "beancount", "--out"],
    ):
        mine.write_text("a person's own file\n")
        code, out = home.cli(*args, str(mine))
        assert code == 2, out
        assert str(mine) in " ".join(out.split()) and "--force" in out
        assert mine.read_text() == "a person's own file\n"
        code, out = home.cli(*args, str(mine), "--force")
        assert code == 0, out
        assert mine.read_text() != "a person's own file\n"


def test_an_export_folder_is_replaced_only_when_it_is_a_previous_export(
    home: Home, tmp_path: Path
) -> None:
    folder = tmp_path / "someone's"
    folder.mkdir()
    theirs = folder / "marts.spending_by_month.csv"
    theirs.write_text("not an export\n")
    args = ["export", "--format", "csv", "--tables", "marts", "--out", str(folder)]
    code, out = home.cli(*args)
    assert code == 2 and "--force" in out, out
    assert theirs.read_text() == "not an export\n"
    # a folder a previous export wrote (its manifest.json) is the export's to replace
    fresh = tmp_path / "export"
    assert home.cli(*args[:-1], str(fresh))[0] == 0
    assert home.cli(*args[:-1], str(fresh))[0] == 0
    assert home.cli(*args, "--force")[0] == 0
    assert theirs.read_text() != "not an export\n"
