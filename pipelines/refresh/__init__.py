"""The refresh use case: plan what to read, read it, prove the rest, summarise the run."""
