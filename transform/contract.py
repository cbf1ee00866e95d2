"""The API contract's facts that more than one layer checks (part of the shared kernel).

From the API's documentation and `docs/api-contract.md`. The sandbox keeps its own copies on
purpose: it is the independent oracle of the contract, and shares no code with the client.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal, get_args

# Section 4: an amount is an integer number of cents within +/- 10^12.
MAX_AMOUNT = 10**12
TRANSACTION_TYPES = ("expense", "income", "transfer")
ACCOUNT_TYPES = ("depository", "credit", "investment", "loan", "unclassified")
# Ids are UUIDs, written in any case by the service.
UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
UUID_RE = re.compile(UUID_PATTERN)
# A key that expires within this long is warned about (by the refresh, status and the client).
KEY_WARNING = dt.timedelta(days=30)
# What a reconciliation verdict says, in the CLI and in the report.
Verdict = Literal["agree", "explained", "differ"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
# A refresh's one vocabulary, with what was asked and what was done kept apart.
# Asked: `auto` (the plan decides, by fingerprints and cost), `full` (`--full`), `hot` (`--hot`:
# the hot window only) or `months` (`--months`: a forced range).
AskedMode = Literal["auto", "full", "hot", "months"]
# Done: `full` (every month read: asked, a first sync, or the timezone changed), `incremental`
# (the plan's), `hot` (the hot window only) or `months` (the forced range). ops.refreshes
# records it; `refresh --json` prints it as `mode`, and the asked one as `asked`.
RefreshMode = Literal["full", "incremental", "hot", "months"]


def key_expires_soon(expires_at: dt.datetime | None, now: dt.datetime) -> bool:
    """Whether a key expiring at `expires_at` (None: never) is within the warning period."""
    return expires_at is not None and expires_at - now < KEY_WARNING
