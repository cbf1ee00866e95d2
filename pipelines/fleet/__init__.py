"""Many owners on Dagster: a dynamic partition per owner, shard runs, the fleet instance."""
