"""The resources the assets use: the API client and where the warehouse lives."""

import dagster as dg

from centsync.extract import ApiClient
from centsync.warehouse import default_path


class ApiResource(dg.ConfigurableResource):
    """The Personal Finance Data API: base URL and key (from the environment, never logged)."""

    base_url: str
    api_key: str
    concurrency: int = 2

    def client(self) -> ApiClient:
        # Windows are month-aligned by the refresh: the reader must not split them by date.
        return ApiClient(
            self.base_url, self.api_key, concurrency=self.concurrency, max_window_rows=10**12
        )


class WarehouseResource(dg.ConfigurableResource):
    """Where the DuckDB warehouse lives (CENTSYNC_WAREHOUSE, else ~/.local/share/centsync/)."""

    path: str = ""

    def resolved(self) -> str:
        return self.path or str(default_path())


def resources() -> dict[str, dg.ConfigurableResource]:
    """The resources bound to every asset: EnvVar is resolved when a run starts, never logged."""
    return {
        "api": ApiResource(
            base_url=dg.EnvVar("CENTSYNC_API_BASE_URL"), api_key=dg.EnvVar("CENTSYNC_API_KEY")
        ),
        "warehouse": WarehouseResource(),  # CENTSYNC_WAREHOUSE is read when the run starts
    }
