"""What centsync writes for people: the report, the data dictionary, the status."""

from pathlib import Path

REPORT_NAME = "centsync-report.html"


def report_path(warehouse: Path) -> Path:
    """The report's default place: next to the warehouse (here, so `status` can look at it
    without importing the report's renderer)."""
    return warehouse.absolute().with_name(REPORT_NAME)
