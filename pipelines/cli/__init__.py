"""The `centsync` command line: one module per command group, the rendering, the failures.

The console script is `centsync.pipelines.cli.console:entry` (the garbage collector off, then
`main.entry`); `python -m centsync.pipelines.cli` runs the same program.
"""
