"""Every setting of centsync, read once from the environment at the edge and passed down.

This is the only module that reads the process environment (`tests/test_settings.py` holds the
rest of the source to that). The CLI builds one `Settings` with `Settings.from_env()` (flags
then override fields with `dataclasses.replace`); a run that Dagster starts (a schedule, the
UI) builds its own the same way when the run starts. Nothing below writes the environment.

`docs/configuration.md` is generated from the fields' metadata (`centsync docs` writes it,
`centsync docs --check` and the tests fail when it is stale).
"""

from __future__ import annotations

import dataclasses
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from centsync.extract import ConfigurationError
from centsync.pipelines import setting_checks as check

WAREHOUSE_NAME = "centsync.duckdb"


def _setting(
    env: str, doc: str, default: Any = None, *, shown: str = "", secret: bool = False
) -> Any:
    """A field documented for `docs/configuration.md`: its variable, meaning and default."""
    meta = {"env": env, "doc": doc, "shown": shown or repr(default), "secret": secret}
    return field(default=default, metadata=meta, repr=not secret)


def _number(env: str, raw: str, kind: type, what: str) -> Any:
    try:
        value = kind(raw)
    except ValueError:
        value = -1
    if not value >= 0:  # also refuses nan
        raise ConfigurationError(
            f"{env}={raw!r} is not {what} >= 0: set it to a number, or unset it for the default"
        )
    return value


# DuckDB's size units (its parser's own list), and the least memory a refresh can work in
_UNITS = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]i?b)$", re.IGNORECASE)
_PERCENT = re.compile(r"^(\d+(?:\.\d+)?)\s*%$")
MIN_DUCKDB_MEMORY = 16 * 10**6


def memory_bytes(size: str) -> int | None:
    """A DuckDB memory size (e.g. `160MB`) in bytes; None when it is not one (a share of
    memory, e.g. `50%`)."""
    found = _SIZE.match(size)
    return int(float(found[1]) * _UNITS[found[2].lower()]) if found else None


def _duckdb_memory(raw: str) -> str:
    """CENTSYNC_DUCKDB_MEMORY checked before any run: DuckDB's own error names no setting."""
    size, percent = memory_bytes(raw), _PERCENT.match(raw)
    if size is not None and size >= MIN_DUCKDB_MEMORY:
        return raw
    if percent and 0 < float(percent[1]) <= 100:
        return raw
    raise ConfigurationError(
        f"CENTSYNC_DUCKDB_MEMORY={raw!r} is not a DuckDB memory size of at least 16MB: set it "
        "to a number and a unit (e.g. 160MB, 1GB, 2GiB) or a share of memory (e.g. 50%), "
        "or unset it for the default 160MB"
    )


def _base_url(raw: str) -> str:
    """CENTSYNC_API_BASE_URL checked before any request: each mistake named with its fix."""
    env = "CENTSYNC_API_BASE_URL"
    try:
        url = urllib.parse.urlsplit(raw)
        port = url.port
    except ValueError as exc:
        raise ConfigurationError(
            f"{env} is not a URL ({exc}): set it to e.g. https://host"
        ) from None
    del port
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ConfigurationError(
            f"{env}={raw!r} is not an http(s) URL with a host: set it to e.g. https://api.example.com"
        )
    if url.username is not None or url.password is not None:
        # never echo the URL: it holds credentials
        raise ConfigurationError(
            f"{env} holds credentials (user:password@host): remove them; the key goes in "
            "CENTSYNC_API_KEY"
        )
    if url.query or url.fragment:
        raise ConfigurationError(f"{env}={raw!r} has a query or fragment: remove it")
    if url.path.rstrip("/").lower().endswith("/v1"):
        fixed = urllib.parse.urlunsplit(url._replace(path=url.path.rstrip("/")[:-3]))
        raise ConfigurationError(
            f"{env}={raw!r} ends in /v1, and centsync adds /v1 itself (it would request "
            f"/v1/v1/me): set it to {fixed!r}"
        )
    return raw


def _refuse_a_key(env: str, raw: str, secret: bool) -> None:
    """A key pasted into a setting that is not the key (or the alert URL) is refused and never
    echoed: the setting's own error messages show its value."""
    from centsync.pipelines.owners import key_shaped

    if not secret and key_shaped(raw):
        raise ConfigurationError(
            f"{env} holds what looks like an API key (not shown): the key goes in "
            f"CENTSYNC_API_KEY (or the variable an owner's key_env names); set {env} to what "
            "docs/configuration.md says it takes"
        )


def _dialect(raw: str) -> str:
    """CENTSYNC_SANDBOX_DIALECT checked before any run: a known dialect's name."""
    from centsync.sandbox.dialects import DIALECTS

    if raw.lower() not in DIALECTS:
        raise ConfigurationError(
            f"CENTSYNC_SANDBOX_DIALECT={raw!r} is not a sandbox dialect; use one of "
            f"{', '.join(DIALECTS)} (or unset it for 'contract')"
        )
    return raw.lower()


@dataclass(frozen=True)
class Settings:
    """What a command or a run needs to know of its surroundings; built once, never mutated."""

    api_base_url: str = _setting(
        "CENTSYNC_API_BASE_URL",
        "The service's base URL. Unset: commands start the embedded sandbox.",
        "",
        shown="the embedded sandbox",
    )
    api_key: str = _setting(
        "CENTSYNC_API_KEY",
        "The API key (required with CENTSYNC_API_BASE_URL). Never logged, stored or shown.",
        "",
        shown="none",
        secret=True,
    )
    data_home: Path = _setting(
        "XDG_DATA_HOME",
        "Where centsync keeps its files by default: `$XDG_DATA_HOME/centsync`.",
        None,
        shown="`~/.local/share/centsync`",
    )
    warehouse: Path = _setting(
        "CENTSYNC_WAREHOUSE",
        "The published DuckDB warehouse file.",
        None,
        shown="`<data home>/centsync.duckdb`",
    )
    dagster_home: Path = _setting(
        "DAGSTER_HOME",
        "The Dagster instance (run history, schedules); `dagster.yaml` is written there once. "
        "Each warehouse has its own by default, so one warehouse's failed run marks nothing of "
        "another's.",
        None,
        shown="`<warehouse name>.dagster/` beside the warehouse",
    )
    inbox: Path = _setting(
        "CENTSYNC_INBOX",
        "The write-back inbox folder of CSV files.",
        None,
        shown="`inbox/` beside the warehouse",
    )
    max_wait: float = _setting(
        "CENTSYNC_MAX_WAIT",
        "Seconds one request may wait for a rate limit to clear before it gives up.",
        600.0,
    )
    http_timeout: float = _setting(
        "CENTSYNC_HTTP_TIMEOUT",
        "Seconds one request waits for the service's answer; a service that accepts the "
        "connection and never answers is tried 3 times, each named on stderr, then exit 4.",
        30.0,
    )
    http_transport: str = _setting(
        "CENTSYNC_HTTP_TRANSPORT",
        "The HTTP layer under httpx: `aiohttp` (faster) or `httpcore` (httpx's own).",
        "aiohttp",
    )
    duckdb_memory: str = _setting(
        "CENTSYNC_DUCKDB_MEMORY",
        "DuckDB's memory limit during a refresh (a DuckDB size, e.g. `160MB`, `1GB`); a first "
        "sync's windows land under 96MB when this is higher.",
        "160MB",
    )
    verify_days: float = _setting(
        "CENTSYNC_VERIFY_DAYS",
        "Every synced month is re-read at least this often (days; 0 turns it off).",
        7.0,
    )
    verify_pages: int = _setting(
        "CENTSYNC_VERIFY_PAGES",
        "The least pages a refresh spends on re-reading the months verified longest ago.",
        4,
    )
    partitions_start: str = _setting(
        "CENTSYNC_PARTITIONS_START",
        "The first month of the Dagster monthly partitions (a date, `YYYY-MM-DD`).",
        "",
        shown="the ledger's first month (this month before the first refresh)",
    )
    progress: bool = _setting(
        "CENTSYNC_PROGRESS",
        "Show refresh progress even when stderr is not a terminal (any non-empty value).",
        False,
    )
    source: str = _setting(
        "CENTSYNC_SOURCE",
        "The name a warehouse is bound to when it is not the base URL (the embedded sandbox's "
        "listens on a new port each time). Set by `centsync` for the runs it starts.",
        "",
        shown="the base URL",
    )
    alert_url: str = _setting(
        "CENTSYNC_ALERT_URL",
        "Where alerts go (a failed run, a DIFFER verdict, rejected rows, a key expiring within "
        "30 days): one Apprise URL (`ntfys://topic`, `mailtos://...`, `json://host/path`; "
        "several separated by spaces). Unset: no alerts. Never shown.",
        "",
        shown="none",
        secret=True,
    )
    hot_window_cron: str = _setting(
        "CENTSYNC_HOT_WINDOW_CRON",
        "When the `hourly_hot_window` schedule runs (a cron line, in the service's time zone).",
        "5 * * * *",
    )
    nightly_cron: str = _setting(
        "CENTSYNC_NIGHTLY_CRON",
        "When the `nightly_fingerprints` schedule runs (a cron line, in the service's time zone).",
        "30 2 * * *",
    )
    weekly_cron: str = _setting(
        "CENTSYNC_WEEKLY_CRON",
        "When the `weekly_full` schedule runs (a cron line, in the service's time zone).",
        "0 4 * * 0",
    )
    sandbox_state: str = _setting(
        "CENTSYNC_SANDBOX_STATE",
        "The embedded sandbox's state file (its write-backs, edits and clock, kept between "
        "commands); `centsync sandbox reset` deletes it.",
        "",
        shown="`<warehouse name>.sandbox` beside the warehouse",
    )
    sandbox_dialect: str = _setting(
        "CENTSYNC_SANDBOX_DIALECT",
        'How the embedded sandbox answers what the API document leaves "not shown": '
        '`contract` (today\'s guesses) or another dialect (docs/api-contract.md, "Dialects"; '
        "`centsync sandbox serve --dialect`).",
        "contract",
    )
    plan: str = _setting(
        "CENTSYNC_PLAN",
        "How an incremental refresh makes sure of the history: `cost` (re-read each part "
        "whose pages cost no more than proving it) or `fingerprints` (prove every part).",
        "cost",
    )
    allow_future: bool = _setting(
        "CENTSYNC_ALLOW_FUTURE",
        "Post write-back rows dated after the service's today (any non-empty value); unset, "
        "such rows are rejected with their reason (`centsync writeback --allow-future`).",
        False,
    )
    config_home: Path = _setting(
        "XDG_CONFIG_HOME",
        "Where centsync looks for its configuration files: `$XDG_CONFIG_HOME/centsync`.",
        None,
        shown="`~/.config/centsync`",
    )
    owners_file: Path = _setting(
        "CENTSYNC_OWNERS_FILE",
        "The owners file (TOML): each owner's name, base URL, and where its key is (`key_env`, "
        "an environment variable, or `keyring`); never the key itself. See docs/scale.md.",
        None,
        shown="`<config home>/owners.toml`",
    )
    owner: str = _setting(
        "CENTSYNC_OWNER",
        "Run as this owner of the owners file (as `centsync --owner NAME`): its service, its key, "
        "its own warehouse and Dagster home under `<data home>/owners/NAME/`.",
        "",
        shown="none (the single-owner settings above)",
    )
    contract_file: Path = _setting(
        "CENTSYNC_CONTRACT_FILE",
        'The contract file (TOML): how an answer the API document leaves "not shown" is read '
        'where the data cannot decide, e.g. `[surfaces."GET /v1/settings"] timezone = '
        '"prefs.tz"` (docs/api-contract.md). Read when present.',
        None,
        shown="`<config home>/contract.toml`",
    )
    category_names: Path = _setting(
        "CENTSYNC_CATEGORY_NAMES",
        "The category names file (TOML): a name for each category the service lists none for "
        '(income and transfer categories), `[categories] "1e2feb89" = "Salary"` (an id or its '
        "first 8 characters); the Beancount ledger and the CSV of transactions use it. Read when present (docs/analysts.md).",
        None,
        shown="`<config home>/categories.toml`",
    )
    lake: Path = _setting(
        "CENTSYNC_LAKE",
        "The shared lake: each owner's core tables and marts published as Delta tables "
        "with an owner column, in shards, for `centsync sql --all` and the household view.",
        None,
        shown="`<data home>/lake`",
    )

    def __post_init__(self) -> None:
        # The paths that default to a place under another one, resolved once.
        home = Path(self.data_home or Path.home() / ".local" / "share" / "centsync").absolute()
        warehouse = Path(self.warehouse or home / WAREHOUSE_NAME).absolute()
        set_ = object.__setattr__
        set_(self, "data_home", home)
        set_(self, "warehouse", warehouse)
        dagster = self.dagster_home or warehouse.with_name(warehouse.stem + ".dagster")
        set_(self, "dagster_home", Path(dagster).absolute())
        set_(self, "inbox", Path(self.inbox or warehouse.parent / "inbox").absolute())
        config = Path(self.config_home or Path.home() / ".config" / "centsync").absolute()
        set_(self, "config_home", config)
        set_(self, "owners_file", Path(self.owners_file or config / "owners.toml").absolute())
        set_(self, "lake", Path(self.lake or home / "lake").absolute())
        set_(self, "contract_file", Path(self.contract_file or config / "contract.toml").absolute())
        names = Path(self.category_names or config / "categories.toml").absolute()
        set_(self, "category_names", names)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings the environment gives (ConfigurationError names a bad one)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = env.get(f.metadata["env"], "").strip()
            if not raw:
                continue
            _refuse_a_key(f.metadata["env"], raw, f.metadata.get("secret", False))
            if f.name in ("data_home", "config_home"):
                values[f.name] = Path(raw) / "centsync"
            elif f.name in (
                "warehouse",
                "dagster_home",
                "inbox",
                "owners_file",
                "lake",
                "contract_file",
                "category_names",
            ):
                values[f.name] = Path(raw)
            elif f.name == "http_timeout":
                values[f.name] = _number(f.metadata["env"], raw, float, "a number of seconds")
                if not values[f.name]:
                    raise ConfigurationError(
                        f"CENTSYNC_HTTP_TIMEOUT={raw!r}: a request needs more than 0 s to be "
                        "answered; set a number of seconds (the default is 30), or unset it"
                    )
            elif f.name == "max_wait":
                values[f.name] = _number(f.metadata["env"], raw, float, "a number of seconds")
            elif f.name == "verify_days":
                values[f.name] = _number(f.metadata["env"], raw, float, "a number of days")
            elif f.name == "verify_pages":
                values[f.name] = _number(f.metadata["env"], raw, int, "a whole number of pages")
            elif f.name == "plan":
                if raw.lower() not in ("cost", "fingerprints"):
                    raise ConfigurationError(
                        f"CENTSYNC_PLAN={raw!r} is not known; use 'cost' or 'fingerprints'"
                    )
                values[f.name] = raw.lower()
            elif f.name in ("progress", "allow_future"):
                values[f.name] = check.flag(f.metadata["env"], raw)
            elif f.name == "sandbox_dialect":
                values[f.name] = _dialect(raw)
            elif f.name == "api_base_url":
                values[f.name] = _base_url(raw)
            elif f.name == "api_key":
                values[f.name] = check.key("CENTSYNC_API_KEY", raw)
            elif f.name.endswith("_cron"):
                values[f.name] = check.cron(f.metadata["env"], raw)
            elif f.name == "partitions_start":
                values[f.name] = check.date(f.metadata["env"], raw)
            elif f.name == "alert_url":
                values[f.name] = check.alert_url(raw)
            elif f.name == "duckdb_memory":
                values[f.name] = _duckdb_memory(raw)
            elif f.name == "http_transport":
                if raw.lower() not in ("aiohttp", "httpcore"):
                    raise ConfigurationError(
                        f"CENTSYNC_HTTP_TRANSPORT={raw!r} is not known; use 'aiohttp' or 'httpcore'"
                    )
                values[f.name] = raw.lower()
            else:
                values[f.name] = raw
        if values.get("api_base_url") and not values.get("api_key"):
            raise ConfigurationError(
                "CENTSYNC_API_BASE_URL is set but CENTSYNC_API_KEY is not: export the key too."
            )
        if values.get("api_key") and not values.get("api_base_url"):
            # else the key is ignored and the embedded sandbox synced, with exit 0
            raise ConfigurationError(
                "CENTSYNC_API_KEY is set but CENTSYNC_API_BASE_URL is not, so the embedded "
                "sandbox would be used instead of your service: export CENTSYNC_API_BASE_URL "
                "too (or unset CENTSYNC_API_KEY to use the sandbox)."
            )
        built = cls(**values)
        check.paths(built)  # a folder where a file goes, a file where a folder goes
        return built.for_owner(built.owner, env) if built.owner else built

    def for_owner(self, name: str, environ: Mapping[str, str] | None = None) -> Settings:
        """These settings as the owner `name` of the owners file: its service and key, and its
        own warehouse, Dagster home and inbox under `<data home>/owners/<name>/`.

        The key comes from the variable the file names (read here, the one module that reads the
        environment) or the system keyring; a missing one is a ConfigurationError (exit 2).
        """
        from centsync.pipelines import owners

        env = os.environ if environ is None else environ
        owner = owners.load(self.owners_file).owner(name)
        if owner.key_env:
            key = env.get(owner.key_env, "").strip()
            if not key:
                raise ConfigurationError(
                    f"owner {name}'s key is read from {owner.key_env}, which is not set: "
                    f"export {owner.key_env}=<the API key>"
                )
        else:
            key = owners.keyring_key(owner)
        check.key(f"owner {name}'s key ({owner.key_source()})", key)
        home = owners.owner_home(self.data_home, name)
        return dataclasses.replace(
            self,
            api_base_url=_base_url(owner.base_url),
            api_key=key,
            warehouse=home / WAREHOUSE_NAME,
            dagster_home=home / "centsync.dagster",
            inbox=home / "inbox",
            sandbox_state="",
            source="",
            owner=name,
        )

    @property
    def sandbox_state_file(self) -> Path:
        """The embedded sandbox's state file, absolute."""
        if self.sandbox_state:
            return Path(self.sandbox_state).absolute()
        return self.warehouse.with_name(self.warehouse.stem + ".sandbox")

    @property
    def embedded(self) -> bool:
        """True when no service is configured: commands start the embedded sandbox."""
        return not self.api_base_url

    def child_environ(self) -> dict[str, str]:
        """The environment of a child process (`dagster dev`, marimo) that must see these
        settings: this process's own, with every setting written as its variable."""
        env = dict(os.environ)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            name = f.metadata["env"]
            if f.name in ("data_home", "config_home"):
                continue  # every path under them is written resolved
            if isinstance(value, bool):
                if value:
                    env[name] = "1"
                else:
                    env.pop(name, None)
            elif value == "" or value is None:
                env.pop(name, None)
            else:
                env[name] = str(value)
        return env


def reference() -> list[dict[str, str]]:
    """One entry per setting (variable, field, default, meaning): `docs/configuration.md`."""
    return [
        {
            "env": f.metadata["env"],
            "field": f.name,
            "default": f.metadata["shown"],
            "doc": f.metadata["doc"],
        }
        for f in dataclasses.fields(Settings)
    ]


def configuration_markdown() -> str:
    """`docs/configuration.md`: every setting, generated from `Settings`."""
    lines = [
        "# Configuration",
        "",
        "<!-- Generated from centsync.pipelines.settings.Settings by `centsync docs`; do not edit. -->",
        "",
        "Every setting centsync reads, all from the environment, read once when a command (or a "
        "run Dagster starts) begins. Flags of a command override them for that command.",
        "A value that cannot be used stops the command with exit code 2, naming the variable, its "
        "value (never a secret's) and the fix, before any request or file is touched.",
        "An on/off setting is on when set; a value that reads as off (`0`, `false`, `no`, `off`) "
        "is refused rather than taken as on.",
        "",
        "| variable | setting | default | meaning |",
        "| - | - | - | - |",
    ]
    for s in reference():
        lines.append(f"| `{s['env']}` | `{s['field']}` | {s['default']} | {s['doc']} |")
    return "\n".join(lines) + "\n"


def persons_path(program_dir: str) -> str:
    """The PATH of the shell the person runs centsync from, as far as this process can tell:
    its own PATH, less the first `program_dir` entry when `uv run` put it there for this
    process only (uv says so in UV_RUN_RECURSION_DEPTH). Not a setting: how printed commands
    are spelled (`cli/invocation.py`)."""
    entries = os.environ.get("PATH", "").split(os.pathsep)
    if os.environ.get("UV_RUN_RECURSION_DEPTH") and program_dir in entries:
        entries.remove(program_dir)
    return os.pathsep.join(entries)
