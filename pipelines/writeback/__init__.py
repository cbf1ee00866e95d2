"""The write-back use case: `run` (run_writeback), `intake` (inbox files and analysts' rows into
the outbox), `inbox_csv` (the inbox's CSV codec), `drain` (the send loop and its outcome table),
`confirm` (what a refresh does with the outbox), `summary` (options, summary, the plan)."""
