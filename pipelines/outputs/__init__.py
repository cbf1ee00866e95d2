"""What centsync writes for people: the report, the data dictionary, the status."""
