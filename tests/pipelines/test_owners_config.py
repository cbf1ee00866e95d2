"""The owners file: what it names, what it refuses (exit 2 with the fix), and the settings an
owner gets (its own warehouse and Dagster home; its key from a variable or the keyring)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from centsync.extract import ConfigurationError
from centsync.pipelines import owners
from centsync.pipelines.settings import Settings

GOOD = """
[[owner]]
name = "alice"
base_url = "https://api.example/"
key_env = "ALICE_KEY"

[[owner]]
name = "bob"
base_url = "http://127.0.0.1:9"
keyring = { service = "centsync", user = "bob" }

[household]
name = "home"
accounts = ["6f1c2c4e-0000-4000-8000-000000000001"]
"""


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "owners.toml"
    path.write_text(text, "utf-8")
    return path


def test_a_good_file_names_owners_and_the_household(tmp_path: Path) -> None:
    parsed = owners.load(_file(tmp_path, GOOD))
    assert list(parsed.owners) == ["alice", "bob"]
    assert parsed.owners["alice"].base_url == "https://api.example"
    assert parsed.owners["bob"].keyring_user == "bob"
    assert parsed.household.owners == ("alice", "bob") and parsed.household.name == "home"
    assert parsed.household.accounts == ("6f1c2c4e-0000-4000-8000-000000000001",)


def test_an_owner_gets_its_own_warehouse_home_and_key(tmp_path: Path) -> None:
    env = {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "CENTSYNC_OWNERS_FILE": str(_file(tmp_path, GOOD)),
        "ALICE_KEY": "pfd_live_alice",
        "CENTSYNC_OWNER": "alice",
    }
    s = Settings.from_env(env)
    home = tmp_path / "data" / "centsync" / "owners" / "alice"
    assert (s.owner, s.api_base_url, s.api_key) == (
        "alice",
        "https://api.example",
        "pfd_live_alice",
    )
    assert (s.warehouse, s.dagster_home, s.inbox) == (
        home / "centsync.duckdb",
        home / "centsync.dagster",
        home / "inbox",
    )
    assert "pfd_live_alice" not in repr(s)
    # without an owner, the single-owner settings are exactly as before
    plain = Settings.from_env({k: v for k, v in env.items() if k != "CENTSYNC_OWNER"})
    assert plain.owner == "" and plain.embedded
    assert plain.warehouse == tmp_path / "data" / "centsync" / "centsync.duckdb"
    assert plain.lake == tmp_path / "data" / "centsync" / "lake"


def test_the_keyring_is_asked_for_a_keyring_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import keyring
    from keyring.backend import KeyringBackend

    class Memory(KeyringBackend):
        priority = 1  # type: ignore[assignment]
        store: ClassVar[dict[tuple[str, str], str]] = {("centsync", "bob"): "pfd_live_bob"}

        def get_password(self, service: str, username: str) -> str | None:
            return self.store.get((service, username))

        def set_password(self, service: str, username: str, password: str) -> None:
            self.store[(service, username)] = password

        def delete_password(self, service: str, username: str) -> None:
            self.store.pop((service, username), None)

    previous = keyring.get_keyring()
    keyring.set_keyring(Memory())
    try:
        base = Settings(owners_file=_file(tmp_path, GOOD), data_home=tmp_path)
        assert base.for_owner("bob", {}).api_key == "pfd_live_bob"
        Memory.store.clear()
        with pytest.raises(ConfigurationError, match="keyring set centsync bob"):
            base.for_owner("bob", {})
    finally:
        keyring.set_keyring(previous)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[[owner]]\nname = "a"\nbase_url = "http://h"\napi_key = "x"\n', "keys never go in"),
        (
            '[[owner]]\nname = "a"\nbase_url = "http://h"\nkey_env = "K"\nnote = "hi"\n',
            "unknown fields",
        ),
        ('[owner]\nname = "a"\n', "not a table array"),
        ('[[owner]]\nname = "A b"\nbase_url = "http://h"\nkey_env = "K"\n', "lower-case"),
        ('[[owner]]\nname = "a"\nbase_url = "h"\nkey_env = "K"\n', "http(s) URL"),
        ('[[owner]]\nname = "a"\nbase_url = "http://h"\n', "exactly one of key_env"),
        ('[[owner]]\nname = "a"\nbase_url = "http://h"\nkey_env = "K"\n' * 2, "twice"),
        ('[household]\nowners = ["z"]\n[[owner]]\nname = "a"\nbase_url = "http://h"\nkey_env = "K"\n', "not in the file"),
        ("name = ", "not valid TOML"),
        ("", "names no owner"),
    ],
)  # fmt: skip
def test_a_bad_file_says_what_to_fix(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says.replace("(", r"\(").replace(")", r"\)")):
        owners.load(_file(tmp_path, text))


def test_a_key_value_is_refused_wherever_it_is_and_never_echoed(tmp_path: Path) -> None:
    secret = "pfd_live_" + "Q" * 40
    text = f'[[owner]]\nname = "a"\nbase_url = "http://h"\nkey_env = "K"\n[extra]\nx = "{secret}"\n'
    with pytest.raises(ConfigurationError) as caught:
        owners.load(_file(tmp_path, text))
    assert "keys never go in this file" in str(caught.value) and secret not in str(caught.value)


def test_missing_file_owner_and_variable_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no owners file at"):
        Settings(owners_file=tmp_path / "none.toml").for_owner("a", {})
    base = Settings(owners_file=_file(tmp_path, GOOD))
    with pytest.raises(ConfigurationError, match=r"no owner 'carol' .*owners: alice, bob"):
        base.for_owner("carol", {})
    with pytest.raises(ConfigurationError, match="export ALICE_KEY="):
        base.for_owner("alice", {})
