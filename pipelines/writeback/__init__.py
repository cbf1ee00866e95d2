"""The write-back use case: intake of the inbox and analyst rows, the drain, the confirmation."""
