"""A sandbox that remembers: its whole state (ledger, write-backs, edits, keys, idempotency
keys, clock) kept in one file between runs, so what a demo posts is still there next time.

The file is a pickle of the `Service` (about 1 MB and 20 ms for a household; the household's
generation alone takes longer), written atomically and readable by its owner only: it holds
the sandbox's own keys. Like the warehouse beside it, it is trusted as the user's own file.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import ClassVar

from centsync.sandbox.service import SandboxConfig, Service

FORMAT = "centsync-sandbox-state/1"


class SandboxStateError(Exception):
    """The sandbox's state file cannot be used: nothing was changed."""

    # what it means: the kernel's Outcome.WAREHOUSE (exit 6), spelled as its value, for the
    # sandbox shares no code with the client
    outcome: ClassVar[str] = "warehouse"
    headline: ClassVar[str] = "the sandbox's state file cannot be used"
    what_to_do: ClassVar[str] = (
        "`centsync sandbox reset` starts the sandbox over (its write-backs are lost), or move "
        "the file away."
    )


def load(path: Path, config: SandboxConfig) -> Service | None:
    """The service saved at `path` (None when there is no file yet); it must be of `config`'s
    household (the same seed), else SandboxStateError."""
    if not path.exists():
        return None
    try:
        with path.open("rb") as f:
            saved = pickle.load(f)
    except Exception as exc:
        raise SandboxStateError(
            f"the sandbox state file {path} cannot be read ({type(exc).__name__}): "
            + SandboxStateError.what_to_do
        ) from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise SandboxStateError(
            f"{path} is not a sandbox state file of this version: " + SandboxStateError.what_to_do
        )
    service = saved["service"]
    if service.config.seed != config.seed:
        raise SandboxStateError(
            f"{path} holds the sandbox of seed {service.config.seed}, not {config.seed}: "
            + SandboxStateError.what_to_do
        )
    return service


def save(service: Service, path: Path) -> None:
    """Write the service's state to `path` atomically (a crash leaves the old file whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        pickle.dump({"format": FORMAT, "service": service}, f, protocol=pickle.HIGHEST_PROTOCOL)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
