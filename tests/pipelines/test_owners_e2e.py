"""Two owners in an owners file, one many-owner sandbox on loopback: `refresh --all` refreshes
both into their own warehouses, publishes them into the lake, and the household view nets out
the money moved between them (the demo-style proof of the many-owners issue)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import httpx
import jsonschema
import pytest
from click.testing import CliRunner, Result

from centsync.pipelines.cli.main import main
from centsync.sandbox import SandboxConfig
from centsync.sandbox.fleet import Fleet, key_variable, owners_toml
from centsync.sandbox.server import run_in_thread
from helpers import START

pytestmark = pytest.mark.e2e

_OURS = ("CENTSYNC_", "DAGSTER_", "XDG_")
TRANSFER = 42_000  # cents owner-001 pays owner-002, yesterday


@dataclass
class Household:
    fleet: Fleet
    base_url: str
    tmp: Path
    env: dict[str, str]
    all: dict[str, Any]
    code: int

    def cli(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """A centsync command in process, with this household's environment (and no other)."""
        wanted: dict[str, str | None] = {k: None for k in os.environ if k.startswith(_OURS)}
        wanted |= env or self.env
        return CliRunner().invoke(main, list(args), env=wanted, catch_exceptions=False)

    def sql_all(self, query: str) -> list[dict[str, Any]]:
        done = self.cli("sql", "--all", "--format", "json", query)
        assert done.exit_code == 0, done.output
        text = done.stdout.strip()
        if text.startswith("["):
            return list(json.loads(text))
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def _post_leg(fleet: Fleet, base_url: str, owner: str, amount: int, kind: str) -> None:
    sb = fleet.owners[owner]
    account = next(a for a in sb.service.accounts.values() if not a.hidden)
    day = (START - timedelta(days=1)).date().isoformat()
    r = httpx.post(
        f"{base_url}/_sandbox/transactions",
        json={
            "account_id": account.id,
            "amount": amount,
            "booked_at": day,
            "concept": "Household share",
            "type": kind,
        },
        headers={"Authorization": f"Bearer {sb.keys['admin_token']}"},
        timeout=10,
    )
    assert r.status_code == 201, r.text


@pytest.fixture(scope="module")
def household(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Household]:
    tmp = tmp_path_factory.mktemp("owners")
    fleet = Fleet.build(2, SandboxConfig(seed=31, years=1, start=START))
    with run_in_thread(fleet) as base_url:
        # the money owner-001 moves to owner-002: an expense for one, income for the other
        _post_leg(fleet, base_url, "owner-001", -TRANSFER, "expense")
        _post_leg(fleet, base_url, "owner-002", TRANSFER, "income")
        owners_file = tmp / "owners.toml"
        owners_file.write_text(owners_toml(fleet.owners, base_url), "utf-8")
        env = {
            "XDG_DATA_HOME": str(tmp / "data"),
            "XDG_CONFIG_HOME": str(tmp / "config"),
            "CENTSYNC_OWNERS_FILE": str(owners_file),
            **{key_variable(n): keys["read_only"] for n, keys in fleet.keys.items()},
        }
        h = Household(fleet, base_url, tmp, env, {}, 0)
        # a real process, as a scheduler runs it (the fleet's engine: owners in its threads)
        clean = {k: v for k, v in os.environ.items() if not k.startswith(_OURS)}
        done = subprocess.run(
            [sys.executable, "-m", "centsync.pipelines.cli", "refresh", "--all", "--json"],
            capture_output=True,
            text=True,
            env=clean | env,
            timeout=600,
            check=False,
        )
        h.code = done.returncode
        h.all = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
        assert h.all, done.stderr
        yield h


def test_refresh_all_refreshes_every_owner_into_its_own_warehouse(household: Household) -> None:
    assert household.code == 0, household.all
    owners = household.all["owners"]
    assert set(owners) == {"owner-001", "owner-002"}
    assert household.all["agree"] == 2 and household.all["failed"] == 0
    for name, result in owners.items():
        assert result["verdict"] == "agree" and result["exit_code"] == 0
        path = Path(result["warehouse"])
        assert path == household.tmp / "data" / "centsync" / "owners" / name / "centsync.duckdb"
        expected = len(household.fleet.owners[name].service.ledger.rows)
        con = duckdb.connect(str(path), read_only=True)
        try:
            assert con.execute("SELECT count(*) FROM core.transactions").fetchone() == (expected,)
            block = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()
        finally:
            con.close()
        # a household's warehouse sized to its data: 16 KiB blocks, not DuckDB's 256 KiB
        assert block == (16_384,) and path.stat().st_size <= 2_000_000
        assert result["rows"] == expected and result["lake"]["rows"] > expected
        # published together after both refreshes: one commit per table, one lake shard
        assert (result["lake"]["batch"], result["lake"]["shard"]) == (2, "owner-001")


def test_the_refresh_all_object_is_its_type_with_the_envelope(household: Household) -> None:
    from centsync.pipelines.results import FleetResult, command_json

    schema = command_json(FleetResult).json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(household.all, schema)
    assert household.all["exit_code"] == 0 and household.all["run_id"] is None


def test_lake_maintenance_prints_its_type_with_the_envelope(household: Household) -> None:
    from centsync.pipelines.results import json_schemas

    clean = {k: v for k, v in os.environ.items() if not k.startswith(_OURS)}
    done = subprocess.run(
        [sys.executable, "-m", "centsync.pipelines.cli", "lake", "--json"],
        capture_output=True,
        text=True,
        env=clean | household.env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    jsonschema.validate(printed, json_schemas()["lake"])
    assert printed["tables"] and all(
        t["files_after"] <= t["files_before"] for t in printed["tables"]
    )


def test_the_lake_holds_each_owner_exactly_as_its_warehouse(household: Household) -> None:
    lake = household.sql_all(
        "SELECT owner, count(*) AS n, sum(amount) AS cents, count(DISTINCT id) AS ids "
        "FROM core.transactions GROUP BY owner ORDER BY owner"
    )
    for row in lake:
        con = duckdb.connect(household.all["owners"][row["owner"]]["warehouse"], read_only=True)
        try:
            own = con.execute(
                "SELECT count(*), sum(amount), count(DISTINCT id) FROM core.transactions"
            ).fetchone()
        finally:
            con.close()
        assert (row["n"], row["cents"], row["ids"]) == own
    assert [r["owner"] for r in lake] == ["owner-001", "owner-002"]


def test_the_household_view_nets_out_money_moved_between_its_owners(household: Household) -> None:
    between = household.sql_all(
        "SELECT owner, amount, type FROM household.transactions WHERE between_owners ORDER BY owner"
    )
    assert between == [
        {"owner": "owner-001", "amount": -TRANSFER, "type": "expense"},
        {"owner": "owner-002", "amount": TRANSFER, "type": "income"},
    ]
    month = (START - timedelta(days=1)).date().replace(day=1).isoformat()
    ours = household.sql_all(
        f"SELECT * FROM household.cash_flow_by_month WHERE month = DATE '{month}'"
    )[0]
    each = household.sql_all(
        "SELECT sum(income_cents) AS income, sum(spending_cents) AS spending "
        f"FROM marts.cash_flow_by_month WHERE month = DATE '{month}'"
    )[0]
    # "our spending" is both owners' spending without the share one paid the other
    assert ours["spending_cents"] == each["spending"] + TRANSFER
    assert ours["income_cents"] == each["income"] - TRANSFER
    assert ours["between_owners_cents"] == -TRANSFER


def test_one_owner_by_name_and_a_bad_owners_file(household: Household) -> None:
    status = household.cli("--owner", "owner-002", "status", "--json")
    assert status.exit_code == 0, status.output
    assert (
        json.loads(status.stdout)["warehouse"] == household.all["owners"]["owner-002"]["warehouse"]
    )
    unknown = household.cli("--owner", "nobody", "status")
    assert unknown.exit_code == 2 and "no owner 'nobody'" in unknown.stderr
    env = {k: v for k, v in household.env.items() if k != key_variable("owner-001")}
    unset = household.cli("--owner", "owner-001", "status", env=env)
    assert unset.exit_code == 2 and "export CENTSYNC_KEY_OWNER_001=" in unset.stderr
    key = household.fleet.keys["owner-001"]["read_only"]
    bad = household.tmp / "bad.toml"
    bad.write_text(
        f'[[owner]]\nname = "a"\nbase_url = "{household.base_url}"\nkey = "{key}"\n', "utf-8"
    )
    refused = household.cli(
        "--owner", "a", "status", env={**household.env, "CENTSYNC_OWNERS_FILE": str(bad)}
    )
    assert refused.exit_code == 2 and "keys never go in this file" in refused.stderr
    assert key not in refused.stderr + refused.stdout


def test_status_without_an_owner_names_the_owners_and_how_to_see_each(
    household: Household,
) -> None:
    done = household.cli("status")
    assert done.exit_code == 6, done.output
    assert "many-owner setup" in done.stderr and "there is no warehouse yet" not in done.stderr
    assert "names owner-001, owner-002" in done.stderr
    assert "centsync --owner owner-001 status" in done.stderr


def test_refresh_all_prints_a_table_of_the_owners_for_a_person(household: Household) -> None:
    """Last in this module: owner-001 is refreshed (and published) again, owner-002 fails."""
    env = {k: v for k, v in household.env.items() if k != key_variable("owner-002")}
    done = household.cli("refresh", "--all", env=env)
    assert done.exit_code == 2, done.output
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["owner", "verdict", "rows", "requests", "seconds", "error"]
    [one] = [line for line in lines if line.startswith("owner-001")]
    rows = len(household.fleet.owners["owner-001"].service.ledger.rows)
    assert one.split()[:3] == ["owner-001", "agree", f"{rows:,}"]
    [two] = [line for line in lines if line.startswith("owner-002")]
    assert "failed (exit 2)" in two and "export CENTSYNC_KEY_OWNER_002=" in two
    assert lines[-1].startswith("2 owners: 1 agree, 1 failed")
    assert not done.stdout.lstrip().startswith("{")
