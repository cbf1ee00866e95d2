"""The refresh use case: plan what to read, read it, prove the rest, summarise the run.

plan.py          pure: the mode, the windows, the verification budget, where to drill
read.py          the streaming read-and-commit loop (and what Ctrl-C keeps)
steps.py         the Refresher: asks the service and the warehouse, lets the plan decide
run.py           run_refresh: binding, working copy, DuckDB sizing, outbox, reconcile hook
fingerprints.py  a range's fingerprint as the service gives it (the local side is the
                 warehouse's)
binding.py       which service and owner a warehouse holds
summary.py       RefreshOptions in, RefreshSummary out
"""
