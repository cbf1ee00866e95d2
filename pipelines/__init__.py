"""centsync's pipelines: the refresh algorithm, the Dagster definitions and the `centsync` CLI.

The only layer that wires the others (sandbox, extract, warehouse, transform) together.
"""
