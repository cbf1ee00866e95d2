"""centsync's pipelines: the refresh algorithm, the Dagster definitions and the `centsync` CLI.

The only layer that wires the others (sandbox, extract, warehouse, transform) together.
"""

import os

# Polars allocates through its own jemalloc, which by default keeps freed pages for 10 s: a
# refresh frees a batch every fraction of a second, so RSS would hold ten seconds of garbage.
# Returning them after 1 s cut a 1,000,000-row first refresh's peak RSS by about 45 MB at the
# same speed (docs/benchmarks.md). It only takes effect when this package is imported before
# Polars (the CLI and the Dagster definitions are), and a value set by the user wins.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:1000,muzzy_decay_ms:0")
