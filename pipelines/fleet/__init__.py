"""Many owners: the owners file, the one engine that refreshes them (`refresh --all` and the
Dagster shard runs alike) and publishes them into the shared lake, and the fleet's Dagster
definitions (a dynamic partition per owner, shard runs, the fleet instance)."""
