"""The Dagster definitions, one concept per file (`centsync.pipelines.definitions` assembles them).

No `from __future__ import annotations` in these modules: it breaks Dagster's definition loading.

- `resources.py`: the run's `Settings` as the one resource, and the API client built from it.
- `failures.py`: known failures leave a step as a `dg.Failure` carrying their exit code.
- `refresh.py`: the refresh multi-asset (one asset per endpoint read) and the monthly backfill asset.
- `marts.py`: the marts and the reconciliation as assets, with their checks.
- `reconcile.py`: the reconcile jobs (offline and live).
- `writeback.py`: the write-back outbox asset.
- `bank_sync.py`: asking the providers for new bank data, and the sensor that refreshes after it.
- `checks.py`: asset checks on what landed.
- `jobs.py`: the jobs the schedules, sensor and CLI start.
- `schedules.py`: when refreshes run on their own.
"""

# who answers for every asset (the UI's owners column)
OWNERS = ["team:centsync"]
