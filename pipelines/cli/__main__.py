"""`python -m centsync.pipelines.cli`: the same program as the `centsync` console script."""

from centsync.pipelines.cli.console import entry

entry()
