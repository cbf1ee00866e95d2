"""The API contract's facts that more than one layer checks (part of the shared kernel).

From the API's documentation and `docs/api-contract.md`. The sandbox keeps its own copies on
purpose: it is the independent oracle of the contract, and shares no code with the client.
"""

from __future__ import annotations

import datetime as dt
import re
from enum import StrEnum
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


class Outcome(StrEnum):
    """What the end of a command means, said by the layers that raise or decide it; the exit
    code of each is chosen in one table at the edge (`pipelines/failures.py`, EXIT_CODES).

    A failure class says it on itself (`outcome`): extract's tree says USAGE, AUTH, UNREACHABLE
    or SERVICE, the warehouse's WAREHOUSE. The others are decided by pipelines.
    """

    OK = "ok"
    DIFFER = "differ"  # a reconciliation difference nobody can explain
    USAGE = "usage"  # invalid flags or configuration
    AUTH = "auth"  # the key: refused, expired, or lacking a scope
    UNREACHABLE = "unreachable"  # the service could not be reached (refused, DNS, TLS, timeouts)
    SERVICE = "service"  # the service failed past the retries, or answered nonsense
    WAREHOUSE = "warehouse"  # bound elsewhere, locked, damaged, disk full
    REJECTED = "rejected"  # the refresh landed, but validation rejected rows the service sent
    INTERNAL = "internal"  # a bug in centsync
    INTERRUPTED = "interrupted"  # SIGINT
    TERMINATED = "terminated"  # SIGTERM


def key_expires_soon(expires_at: dt.datetime | None, now: dt.datetime) -> bool:
    """Whether a key expiring at `expires_at` (None: never) is within the warning period."""
    return expires_at is not None and expires_at - now < KEY_WARNING
