"""Owners in configuration: the owners file (TOML) naming each owner, their service and where
their key is kept (an environment variable or the system keyring, never the file itself).

    [[owner]]
    name = "alice"
    base_url = "https://api.example.com"
    key_env = "ALICE_PFD_KEY"                 # or: keyring = { service = "centsync", user = "alice" }

    [household]                               # optional: whose spending is "ours"
    name = "home"
    owners = ["alice", "bob"]                 # default: every owner in the file
    accounts = ["acc_1", "acc_2"]             # optional: only these accounts' transfers net out

Reading the environment is `settings.py`'s alone: this module parses and checks the file, and
looks a key up in the keyring; `Settings.for_owner` puts the two together.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from centsync.extract import ConfigurationError

# an owner's name is a file name and a lake partition value: nothing that needs quoting
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
# What an API key looks like: the sandbox's and the service's `pfd_live_...`/`pfd_test_...`
# (and other services' `sk_...`), a pasted `Bearer ...` header, or a long run of mixed-case
# letters and digits (the API document fixes no shape: a key it issues may look like that)
_KEY_PREFIX = re.compile(r"^\s*(pfd_|sk_|bearer\s)", re.IGNORECASE)
_KEY_BODY = re.compile(r"^[A-Za-z0-9_\-]{24,}$")


def key_shaped(text: str) -> bool:
    """True when `text` looks like an API key, wherever it was written (a variable's name, a
    setting, an owner's name): it is then refused without being echoed."""
    text = text.strip()
    if _KEY_PREFIX.match(text):
        return True
    # a variable's name is letters, digits and `_` in one case; a key mixes both cases, and
    # digits unless it is long: a random 43-character token (the sandbox's admin token) has no
    # digit about once in 1,500
    return bool(
        _KEY_BODY.match(text)
        and re.search(r"[a-z]", text)
        and re.search(r"[A-Z]", text)
        and (re.search(r"[0-9]", text) or len(text) >= 32)
    )


_OWNER_FIELDS = {"name", "base_url", "key_env", "keyring"}
_SECRET_FIELDS = {"key", "api_key", "token", "secret", "password"}


@dataclass(frozen=True)
class Owner:
    """One owner: a name, the service, and where the key is (a variable, or the keyring)."""

    name: str
    base_url: str
    key_env: str = ""
    keyring_service: str = ""
    keyring_user: str = ""

    def key_source(self) -> str:
        """Where the key is read from, for messages (never the key)."""
        if self.key_env:
            return f"the environment variable {self.key_env}"
        return f"the system keyring (service {self.keyring_service!r}, user {self.keyring_user!r})"


@dataclass(frozen=True)
class Household:
    """Whose spending is "ours": the owners, and (optionally) the accounts transfers net on."""

    name: str
    owners: tuple[str, ...]
    accounts: tuple[str, ...] = ()


@dataclass(frozen=True)
class OwnersFile:
    """A parsed owners file."""

    path: Path
    owners: dict[str, Owner]
    household: Household = field(default_factory=lambda: Household("household", ()))

    def owner(self, name: str) -> Owner:
        """The owner named `name`, or a ConfigurationError listing the known ones."""
        if key_shaped(name):
            raise ConfigurationError(
                "the owner's name given (--owner or CENTSYNC_OWNER) looks like an API key (not "
                "shown): give the owner's name from the owners file; the key goes in the "
                "variable its key_env names"
            )
        found = self.owners.get(name)
        if found is None:
            known = ", ".join(sorted(self.owners)) or "none"
            from centsync.transform.writeback import did_you_mean  # the error path only

            same = did_you_mean(name, self.owners)
            hint = f"{same}Names are exact; " if same else ""
            raise ConfigurationError(
                f"no owner {name!r} in the owners file {self.path} (owners: {known}): {hint}add "
                "an [[owner]] with that name, or choose one of those"
            )
        return found


def load(path: Path) -> OwnersFile:
    """Parse and check the owners file; a ConfigurationError (exit 2) says what to fix."""
    if not path.exists():
        raise ConfigurationError(
            f"no owners file at {path}: write one (see docs/scale.md) or set "
            "CENTSYNC_OWNERS_FILE to where it is"
        )
    try:
        doc = tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigurationError(
            f"the owners file {path} is not valid TOML ({e}): fix it"
        ) from None
    _refuse_secrets(path, doc)
    rows = doc.get("owner", [])
    if isinstance(rows, dict):
        raise ConfigurationError(
            f"the owners file {path} has [owner], which is not a table array: write each owner "
            "as [[owner]]"
        )
    if not isinstance(rows, list) or not rows:
        raise ConfigurationError(
            f"the owners file {path} names no owner: add [[owner]] tables with name, base_url "
            "and key_env (or keyring)"
        )
    owners: dict[str, Owner] = {}
    for i, row in enumerate(rows, 1):
        owner = _owner(path, i, row)
        if owner.name in owners:
            raise ConfigurationError(
                f"the owners file {path} names {owner.name!r} twice: give each owner its own name"
            )
        owners[owner.name] = owner
    return OwnersFile(path, owners, _household(path, doc.get("household"), owners))


def _owner(path: Path, i: int, row: Any) -> Owner:
    where = f"owner {i} of {path}"
    if not isinstance(row, dict):
        raise ConfigurationError(f"{where} is not a table: write it as [[owner]]")
    unknown = set(row) - _OWNER_FIELDS
    if unknown:
        raise ConfigurationError(
            f"{where} has unknown fields {sorted(unknown)}: use name, base_url, key_env, keyring"
        )
    name, base_url = row.get("name"), row.get("base_url")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            f"{where}: name {name!r} must be lower-case letters, digits, '-' or '_' (a file name)"
        )
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ConfigurationError(f"{where} ({name}): base_url must be an http(s) URL")
    key_env, ring = row.get("key_env", ""), row.get("keyring")
    if bool(key_env) == bool(ring):
        raise ConfigurationError(
            f'{where} ({name}): say where its key is with exactly one of key_env = "VARIABLE" '
            'or keyring = { service = "centsync", user = "..." }'
        )
    if key_env:
        if not isinstance(key_env, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env):
            raise ConfigurationError(f"{where} ({name}): key_env must be a variable's name")
        return Owner(name, base_url.rstrip("/"), key_env=key_env)
    if not isinstance(ring, dict) or not {"service", "user"} <= set(ring):
        raise ConfigurationError(
            f'{where} ({name}): keyring must be {{ service = "...", user = "..." }}'
        )
    return Owner(
        name,
        base_url.rstrip("/"),
        keyring_service=str(ring["service"]),
        keyring_user=str(ring["user"]),
    )


def _household(path: Path, raw: Any, owners: dict[str, Owner]) -> Household:
    if raw is None:
        return Household("household", tuple(owners))
    if not isinstance(raw, dict):
        raise ConfigurationError(f"[household] in {path} must be a table")
    members = tuple(raw.get("owners", list(owners)))
    missing = [m for m in members if m not in owners]
    if missing:
        raise ConfigurationError(
            f"[household] in {path} names owners not in the file: {missing}; add them or remove them"
        )
    return Household(str(raw.get("name", "household")), members, tuple(raw.get("accounts", ())))


def _refuse_secrets(path: Path, doc: Any, trail: str = "") -> None:
    """A key written into the file is refused: the file is not a place for secrets."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            here = f"{trail}.{k}" if trail else k
            if k.lower() in _SECRET_FIELDS:
                raise ConfigurationError(_secret_message(path, here))
            _refuse_secrets(path, v, here)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            _refuse_secrets(path, v, f"{trail}[{i}]")
    elif isinstance(doc, str) and key_shaped(doc):
        raise ConfigurationError(_secret_message(path, trail))


def _secret_message(path: Path, where: str) -> str:
    # never echo the value: it may be a key
    named = (
        " where the name of the variable that holds the key goes (key_env names a variable, "
        'e.g. key_env = "ALICE_KEY", and the key goes in that variable)'
        if where.endswith("key_env")
        else ""
    )
    return (
        f"the owners file {path} holds what looks like an API key ({where}, not shown){named}: "
        "keys never go in "
        'this file. Remove it, put the key in an environment variable (key_env = "ALICE_KEY") '
        'or the system keyring (keyring = { service = "centsync", user = "alice" }; '
        "`keyring set centsync alice` stores it)"
    )


def keyring_key(owner: Owner) -> str:
    """The owner's key from the system keyring; a ConfigurationError says how to store it."""
    import keyring
    from keyring.errors import KeyringError

    try:
        value = keyring.get_password(owner.keyring_service, owner.keyring_user)
    except KeyringError as e:
        raise ConfigurationError(
            f"the system keyring could not be read for owner {owner.name} ({type(e).__name__}): "
            "set key_env in the owners file instead, or configure a keyring backend"
        ) from None
    if not value:
        raise ConfigurationError(
            f"no key for owner {owner.name} in {owner.key_source()}: store it with "
            f"`keyring set {owner.keyring_service} {owner.keyring_user}`"
        )
    return value


def owner_home(data_home: Path, name: str) -> Path:
    """The owner's own folder: its warehouse, Dagster home, inbox."""
    return data_home / "owners" / name
