"""A key pasted where a variable's name (or any setting) goes is refused, never printed (issue
43): in the owners file (`key_env`, a keyring user, an owner's name), in a setting, in
`--owner`; through the real CLI, text and `--json` (`refresh --all --json` included): exit 2,
and the key is nowhere in what was printed or in any file written (the failure's log)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from click.testing import CliRunner

from centsync.pipelines.cli.main import main
from centsync.pipelines.owners import key_shaped
from centsync.sandbox import Sandbox

KEYS = {
    "live": "pfd_live_Ab3dEf7hIj9kLmN0pQr5tUv1wXy2zA4bC6dE8fG0",
    "test": "pfd_test_Zz9aB8cD7eF6gH5iJ4kL3mN2oP1qR0sTu",
    "bare": "Ab3dEf7hIj9kLmN0pQr5tUv1wXy2zA4bC6dE8fG0",  # no prefix: mixed case and digits
    "header": "Bearer pfd_live_Ab3dEf7hIj9kLmN0pQr5tUv1wXy2zA4bC6dE8fG0",
}


def owners_file(folder: Path, *, key_env: str = "ALICE_KEY", user: str = "alice") -> Path:
    path = folder / "owners.toml"
    path.write_text(
        f'[[owner]]\nname = "alice"\nbase_url = "http://127.0.0.1:9"\nkey_env = "{key_env}"\n\n'
        f'[[owner]]\nname = "bob"\nbase_url = "http://127.0.0.1:9"\n'
        f'keyring = {{ service = "centsync", user = "{user}" }}\n'
    )
    return path


def run(tmp: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    base = {"XDG_DATA_HOME": str(tmp / "share"), "XDG_CONFIG_HOME": str(tmp / "cfg")}
    base |= {"CENTSYNC_API_BASE_URL": None, "CENTSYNC_API_KEY": None, "DAGSTER_HOME": None}  # type: ignore[dict-item]
    result = CliRunner().invoke(main, list(args), env=base | env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def written(tmp: Path) -> str:
    """Everything centsync wrote under the data folder (the failures' logs)."""
    return "".join(
        p.read_text("utf-8", "replace") for p in (tmp / "share").rglob("*") if p.is_file()
    )


@pytest.mark.parametrize("key", list(KEYS))
@pytest.mark.parametrize(
    "where",
    ["key_env", "keyring user", "CENTSYNC_OWNER", "--owner", "CENTSYNC_PLAN", "CENTSYNC_SOURCE",
     "CENTSYNC_HOT_WINDOW_CRON", "CENTSYNC_WAREHOUSE"],
)  # fmt: skip
def test_a_key_in_the_wrong_place_is_refused_without_echo(
    tmp_path: Path, where: str, key: str
) -> None:
    secret = KEYS[key]
    env: dict[str, str] = {}
    prefix: list[str] = []
    if where == "key_env":
        env["CENTSYNC_OWNERS_FILE"] = str(owners_file(tmp_path, key_env=secret))
    elif where == "keyring user":
        env["CENTSYNC_OWNERS_FILE"] = str(owners_file(tmp_path, user=secret))
    elif where == "--owner":
        env["CENTSYNC_OWNERS_FILE"] = str(owners_file(tmp_path))
        prefix = ["--owner", secret]
    else:
        env["CENTSYNC_OWNERS_FILE"] = str(owners_file(tmp_path))
        env[where] = secret
    commands = [["refresh", "--all", "--json"], ["refresh", "--all"], ["status", "--json"]]
    if where in ("--owner", "CENTSYNC_OWNER"):
        commands = [["refresh", "--json"], ["status"]]
    for command in commands:
        code, out = run(tmp_path, env, *prefix, *command)
        assert code == 2, (command, out)
        assert "looks like an API key" in out, out
        assert secret not in out and secret.split()[-1] not in out, (command, out)
        assert secret.split()[-1][-20:] not in written(tmp_path)


@pytest.mark.parametrize(
    "name",
    ["ALICE_KEY", "CENTSYNC_KEY_OWNER_001", "ALICE_PFD_KEY_FOR_THE_HOUSEHOLD_2026", "alice"],
)
def test_a_variable_or_owner_name_is_not_taken_for_a_key(name: str) -> None:
    assert not key_shaped(name)


def test_every_key_shape_is_a_key(sandbox: Sandbox) -> None:
    assert all(key_shaped(k) for k in KEYS.values())
    assert all(key_shaped(k) for k in sandbox.keys.values())  # as the sandbox issues them
    # a random token without a digit (the sandbox's admin token, token_urlsafe(32), is one
    # about once in 1,500: CI met one)
    assert key_shaped("XoqbWhnZ_kPzrTqLmvYcFdsaJeuHgkwBnVtRyUiOpAs")
    assert all(key_shaped(secrets.token_urlsafe(32)) for _ in range(20_000))
