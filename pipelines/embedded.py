"""The embedded sandbox: the service every command uses when none is configured.

A use case, not a command: `embedded_api(settings)` gives the settings a run works with, as
given when they name a service, else with an in-process sandbox's URL, key and source name in
them, the sandbox running until the block ends. Its state (ledger, write-backs, clock) is kept in
one file between commands (`settings.sandbox_state_file`), under a lock: a second command that
finds the lock held starts from the file but does not overwrite it. `reset` deletes the file;
`advance` moves its clock on (the scheduled bank syncs bring new transactions).

What it says (started, stopped, starts afresh) goes to `say`, stderr by default. The commands
that open it are in `cli/` (`centsync tour`, `refresh`, `reconcile`, ...).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from centsync.transform.contract import Outcome

if TYPE_CHECKING:
    from centsync.pipelines.settings import Settings
    from centsync.sandbox import Sandbox, SandboxConfig

SANDBOX_SEED = 1


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class StateInUse(Exception):
    """Another centsync command holds the embedded sandbox's state file."""

    outcome: ClassVar[Outcome] = Outcome.WAREHOUSE  # exit 6, as a warehouse in use
    headline: ClassVar[str] = "the embedded sandbox's state file is in use"
    what_to_do: ClassVar[str] = "stop the other centsync command (a daemon?), then reset."


def embedded_source(seed: int = SANDBOX_SEED) -> str:
    """The stable name a warehouse fed by the embedded sandbox is bound to."""
    return f"embedded-sandbox:seed={seed}"


@contextmanager
def embedded_api(
    settings: Settings,
    *,
    rebind: bool = False,
    seed: int = SANDBOX_SEED,
    say: Callable[[str], None] = _stderr,
) -> Iterator[Settings]:
    """The settings to run with: as given when they name a service, else with an embedded
    sandbox's URL, key and source name in them (the sandbox runs until the block ends).

    The embedded sandbox is never started for a warehouse bound to another source (unless
    `rebind`: the refresh then keeps that warehouse as a backup): `binding.SourceMismatch`,
    its message saying which service to set instead.
    """
    if not settings.embedded:
        yield dataclasses.replace(settings, source="")
        return
    from centsync.pipelines.refresh import binding
    from centsync.sandbox import SandboxConfig
    from centsync.sandbox.server import run_in_thread
    from centsync.sandbox.state import save

    source = embedded_source(seed)
    try:
        binding.check(settings.warehouse, source, None)
    except binding.SourceMismatch as e:
        if not rebind:
            e.args = (
                f"CENTSYNC_API_BASE_URL is not set, so the embedded sandbox would be used, but {e} "
                f"To refresh it from its service, set CENTSYNC_API_BASE_URL={e.bound.base_url} "
                "and its CENTSYNC_API_KEY.",
            )
            raise
    path = settings.sandbox_state_file
    with _state_lock(path) as owned:
        sb = _remembered(path, SandboxConfig(seed=seed), owned, say, settings.sandbox_dialect)
        # not waited for at the end: the run is over, its thread closes its sockets on its own
        with run_in_thread(sb, wait=False) as base_url:
            say(
                f"No CENTSYNC_API_BASE_URL set: started the embedded sandbox at {base_url} "
                f"(seed {seed})."
            )
            # handed to the run as its settings resource: never through the environment
            yield dataclasses.replace(
                settings, api_base_url=base_url, api_key=sb.keys["read_write"], source=source
            )
        if owned:
            save(sb.service, path)
    say("Embedded sandbox stopped.")


def reset(path: Path) -> bool:
    """Delete the embedded sandbox's state file; False when there was none. Raises
    `StateInUse` when another command holds it (nothing deleted)."""
    if not path.exists():
        return False
    with _state_lock(path) as owned:
        if not owned:
            raise StateInUse(path)
        path.unlink()
    return True


@dataclasses.dataclass(frozen=True)
class Advanced:
    """What advancing the embedded sandbox's clock did: its new day (the household's date), the
    bank syncs that fell due, and the transactions they brought."""

    day: date
    syncs: int
    new_transactions: int


def advance(
    path: Path, days: int, seed: int = SANDBOX_SEED, say: Callable[[str], None] = _stderr
) -> Advanced:
    """Move the embedded sandbox's simulated clock `days` forward, as its admin surface does
    (`POST /_sandbox/clock/advance`: the scheduled bank syncs run), and keep it in its state file
    (made afresh when there is none). Raises `StateInUse` when another command holds it."""
    from zoneinfo import ZoneInfo

    from centsync.sandbox import SandboxConfig
    from centsync.sandbox.service import Service
    from centsync.sandbox.state import load, save

    with _state_lock(path) as owned:
        if not owned:
            raise StateInUse(path)
        config = SandboxConfig(seed=seed)
        service = load(path, config)
        if service is None:
            say(f"The embedded sandbox starts afresh; its state is kept in {path}.")
            service = Service(config)
        before = {t.id for t in service.ledger.rows}
        syncs = service.advance(days * 86_400_000)
        new = sum(t.id not in before for t in service.ledger.rows)
        save(service, path)
    now = datetime.fromtimestamp(service.now_ms / 1000, ZoneInfo(service.timezone))
    return Advanced(now.date(), syncs, new)


def _remembered(
    path: Path,
    config: SandboxConfig,
    owned: bool,
    say: Callable[[str], None],
    dialect: str = "contract",
) -> Sandbox:
    """The sandbox as its state file left it, else a new one (said once)."""
    from centsync.sandbox import Sandbox
    from centsync.sandbox.state import load

    service = load(path, config)
    if service is None:
        say(f"The embedded sandbox starts afresh; its state is kept in {path}.")
    elif not owned:
        say(
            f"Another centsync command (a daemon?) holds the embedded sandbox's state {path}: "
            "this one starts from it, and what it posts is not kept."
        )
    return Sandbox(config, service, dialect=dialect)


@contextmanager
def _state_lock(path: Path) -> Iterator[bool]:
    """Hold the state file's lock while the sandbox runs; yields whether we got it (else
    another command is using the state, and this one must not overwrite it)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
