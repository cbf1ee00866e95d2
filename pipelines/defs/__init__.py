"""The Dagster definitions, one concept per file (`centsync.pipelines.definitions` assembles them).

No `from __future__ import annotations` in these modules: it breaks Dagster's definition loading.

- `resources.py`: the API and the warehouse as configurable resources.
- `refresh.py`: the refresh multi-asset (one asset per endpoint read) and the monthly backfill asset.
- `bank_sync.py`: asking the providers for new bank data, and the sensor that refreshes after it.
- `checks.py`: asset checks on what landed.
- `jobs.py`: the jobs the schedules, sensor and CLI start.
- `schedules.py`: when refreshes run on their own.
"""
