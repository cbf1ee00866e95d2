"""What each reconciliation verdict means, in words: the one wording the report and the CLI show."""

from __future__ import annotations

# keyed by transform.contract.VERDICTS (tests/test_docs.py holds them to it)
VERDICT_WORDS: dict[str, str] = {
    "agree": "every number agrees with the service's own, to the cent",
    "explained": "every difference from the service's own numbers is explained",
    "differ": "some differences from the service's own numbers are not explained",
}
