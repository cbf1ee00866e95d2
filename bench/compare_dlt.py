"""dlt's generic `rest_api` source against the sandbox, loaded into DuckDB by the parquet
loader: the generic peer of issue 17. Runs in the throwaway environment `bench/compare.py`
builds from `bench/requirements-dlt.txt`, never in the project's.

    BENCH_BASE_URL=... BENCH_API_KEY=... python bench/compare_dlt.py WAREHOUSE.duckdb PIPELINES_DIR

The paginator is configured, not detected (dlt's detection starts at page 0 on this response
shape and loads one page twice and the last never: ../shared/NOTES.md): `page` from 1,
`limit=200` (the contract's maximum), stop after `pages`. Prints one JSON line: seconds per
step (extract, normalize, load).
"""

import os
import sys
import time

import dlt
import orjson
from dlt.sources.rest_api import rest_api_source


def main() -> None:
    warehouse, pipelines_dir = sys.argv[1], sys.argv[2]
    t0 = time.perf_counter()
    source = rest_api_source(
        {
            "client": {
                "base_url": os.environ["BENCH_BASE_URL"].rstrip("/") + "/",
                "auth": {"type": "bearer", "token": os.environ["BENCH_API_KEY"]},
                "paginator": {
                    "type": "page_number",
                    "base_page": 1,
                    "page_param": "page",
                    "total_path": "pages",
                },
            },
            "resource_defaults": {"write_disposition": "replace"},
            "resources": [
                {
                    "name": "transactions",
                    "endpoint": {
                        "path": "v1/transactions",
                        "params": {"limit": 200},
                        "data_selector": "data",
                    },
                }
            ],
        }
    )
    pipeline = dlt.pipeline(
        pipeline_name="centsync_bench",
        destination=dlt.destinations.duckdb(warehouse),
        dataset_name="api",
        pipelines_dir=pipelines_dir,
    )
    t1 = time.perf_counter()
    pipeline.extract(source, loader_file_format="parquet")
    t2 = time.perf_counter()
    pipeline.normalize()
    t3 = time.perf_counter()
    pipeline.load()
    t4 = time.perf_counter()
    print(
        orjson.dumps(
            {
                "setup_s": round(t1 - t0, 3),
                "extract_s": round(t2 - t1, 3),
                "normalize_s": round(t3 - t2, 3),
                "load_s": round(t4 - t3, 3),
                "inside_s": round(t4 - t1, 3),
            }
        ).decode()
    )


if __name__ == "__main__":
    main()
