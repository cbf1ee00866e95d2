"""The bank-sync asset and sensor read `GET /v1/sync/status` (its shape "not shown") through the
contract the refreshes learned, in every dialect: a real Dagster run of the asset against the
sandbox over loopback, then the sensor, which starts a refresh only after a sync it had not seen."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from centsync.pipelines.defs.bank_sync import bank_sync, bank_sync_finished
from centsync.pipelines.settings import Settings
from centsync.sandbox.dialects import DIALECTS
from centsync.sandbox.server import run_in_thread
from helpers import make_sandbox

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_bank_sync_is_asked_and_noticed_in_every_dialect(dialect: str, tmp_path: Path) -> None:
    sb = make_sandbox(dialect=dialect, rate_limit=False)
    providers = sorted({c["provider"] for c in sb.state()["connections"]})
    with run_in_thread(sb) as base_url:
        settings = Settings.from_env(
            {
                "CENTSYNC_API_BASE_URL": base_url,
                "CENTSYNC_API_KEY": sb.keys["read_write"],
                "CENTSYNC_WAREHOUSE": str(tmp_path / "w.duckdb"),  # no refresh yet: learned now
            }
        )
        sensor = bank_sync_finished
        with dg.build_sensor_context(cursor=None, resources={"settings": settings}) as ctx:
            assert list(sensor(ctx)) == [] and ctx.cursor  # the first look records where it is
            seen = ctx.cursor
        done = dg.materialize(
            [bank_sync],
            resources={"settings": settings},
            run_config={"ops": {"bank_sync": {"config": {"max_age_hours": 0.0}}}},
        )
        assert done.success
        meta = done.asset_materializations_for_node("bank_sync")[0].metadata
        assert meta["requested"].value == ", ".join(providers)  # every provider, once
        with dg.build_sensor_context(cursor=seen, resources={"settings": settings}) as ctx:
            runs = list(sensor(ctx))
        assert len(runs) == 1 and isinstance(runs[0], dg.RunRequest), runs  # the new sync
        assert ctx.cursor and ctx.cursor > seen
