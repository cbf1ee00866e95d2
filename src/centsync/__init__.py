"""centsync: keep a personal-finance service's data in a local DuckDB warehouse, to the cent."""

__version__ = "0.1.0"
