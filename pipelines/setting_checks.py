"""The checks of the settings that `Settings.from_env` runs once, before any command works: each
value a person can get wrong is refused here with one message naming the variable, its value
(never a secret's) and the fix, as a ConfigurationError (exit 2).

`settings.py` reads the environment and calls these; they read nothing of it themselves. The
paths are checked for what would stop every command that uses them (a folder where a file
goes, a file where a folder goes); whether a folder can be written is the command's to find
(a read-only warehouse can still be queried), and `failures.py` names it (exit 6).
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from pathlib import Path
from typing import Any

from centsync.extract import ConfigurationError


def key(where: str, raw: str) -> str:
    """An API key: one line of printable characters. A control character or a space inside is
    a bad paste (a newline, a tab, a terminal's escape); the message says where, never what."""
    for i, char in enumerate(raw, 1):
        if unicodedata.category(char)[0] in "CZ":  # control, format, separators, spaces
            name = unicodedata.name(char, f"U+{ord(char):04X}")
            raise ConfigurationError(
                f"{where} holds a control character or space ({name}, character {i} of "
                f"{len(raw)}; the key itself is not shown): it was pasted with something else; "
                "copy the key again and set it as one line of printable characters"
            )
    return raw


def flag(env: str, raw: str) -> bool:
    """An on/off setting: on when set to anything. A value that reads as "off" (0, false, no,
    off) would turn it on: refused, saying so, rather than done against what was meant."""
    if raw.strip().lower() in ("0", "false", "no", "off", "n", "f"):
        raise ConfigurationError(
            f"{env}={raw!r} would turn it on (any value does): unset it to leave it off, or set "
            f"{env}=1 to turn it on"
        )
    return True


def cron(env: str, raw: str) -> str:
    """A schedule's cron line, checked before any schedule is built (else the run fails inside
    Dagster with a message that names neither): five fields cron understands (cronsim, which
    also gives each schedule its next runs)."""
    from cronsim import CronSim, CronSimError

    try:
        CronSim(raw, dt.datetime(2000, 1, 1))
    except CronSimError as exc:
        reason = str(exc)
    else:
        if len(raw.split()) == 5:
            return " ".join(raw.split())
        reason = "not five fields"
    raise ConfigurationError(
        f"{env}={raw!r} is not a cron line ({reason}): set it to five fields, minute hour "
        "day-of-month month day-of-week (e.g. '5 * * * *', every hour at minute 5), or unset "
        "it for the default"
    )


def date(env: str, raw: str) -> str:
    """A date setting: `YYYY-MM-DD`."""
    try:
        dt.date.fromisoformat(raw)
    except ValueError:
        raise ConfigurationError(
            f"{env}={raw!r} is not a date: set it as YYYY-MM-DD (e.g. 2024-01-01), or unset it"
        ) from None
    if len(raw) != 10:  # fromisoformat also takes 20240101 and week dates
        raise ConfigurationError(f"{env}={raw!r}: write the date as YYYY-MM-DD")
    return raw


def alert_url(raw: str) -> str:
    """CENTSYNC_ALERT_URL: every URL in it one that Apprise knows (never echoed: a URL of a
    notification service holds its token)."""
    import apprise

    for n, one in enumerate(raw.split(), 1):
        if not apprise.Apprise().add(one):
            scheme = one.split("://", 1)[0] if "://" in one else ""
            said = f"its scheme is {scheme!r}" if scheme.isalnum() else "it has no scheme://"
            raise ConfigurationError(
                f"CENTSYNC_ALERT_URL: URL {n} is not one Apprise knows ({said}; the URL is not "
                "shown, it may hold a token): write it as Apprise does (ntfys://topic, "
                "mailtos://user:password@host, json://host/path), or unset it"
            )
    return raw


# a path setting -> (what it must be, the variables that decide it when it is not set)
_FILES = {
    "warehouse": "CENTSYNC_WAREHOUSE",
    "owners_file": "CENTSYNC_OWNERS_FILE",
    "contract_file": "CENTSYNC_CONTRACT_FILE",
}
_FOLDERS = {
    "dagster_home": "DAGSTER_HOME",
    "inbox": "CENTSYNC_INBOX",
    "lake": "CENTSYNC_LAKE",
    "data_home": "XDG_DATA_HOME",
    "config_home": "XDG_CONFIG_HOME",
}


def paths(settings: Any) -> None:
    """Each path setting is of its kind: a file where a file goes (not a folder, and its
    folder not a file), a folder where a folder goes. `settings`: a `Settings` (this module is
    below it: `settings.py` imports it)."""
    for name, env in _FILES.items():
        path: Path = getattr(settings, name)
        if path.is_dir():
            raise ConfigurationError(
                f"{env}={str(path)!r} is a folder, and it names a file: set it to a file's path "
                f"(e.g. {str(path / _example(name))!r})"
            )
        _parent_is_folder(env, path)
    state = settings.sandbox_state_file
    if state.is_dir():
        raise ConfigurationError(
            f"CENTSYNC_SANDBOX_STATE={str(state)!r} is a folder, and it names a file: set it to "
            f"a file's path (e.g. {str(state / 'centsync.sandbox')!r}), or unset it"
        )
    for name, env in _FOLDERS.items():
        path = getattr(settings, name)
        if path.exists() and not path.is_dir():
            said = f"{env}={str(path)!r}"
            if name in ("data_home", "config_home"):  # `$XDG_..._HOME/centsync`
                said = f"{env}={str(path.parent)!r}: its centsync folder {str(path)!r}"
            raise ConfigurationError(
                f"{said} is a file, and it names a folder: set it to a folder (a new one is "
                "made), or move the file away"
            )
        _parent_is_folder(env, path)
    if settings.contract_file.is_file():  # read by every refresh: its mistakes before any run
        from centsync.pipelines.contract_book import load_pins

        load_pins(settings.contract_file)


def _parent_is_folder(env: str, path: Path) -> None:
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigurationError(
                    f"{env}={str(path)!r} is under {str(parent)!r}, which is a file, not a "
                    "folder: set it to a path in a folder"
                )
            return


def _example(name: str) -> str:
    return {"warehouse": "centsync.duckdb", "owners_file": "owners.toml"}.get(name, "contract.toml")
