"""docs/writeback.md's examples run: its rules file is the shipped example, and its console
blocks (rules, bank files) run in order against the sandbox over loopback with a read and write
key, with the exit codes they state and the lines they show (`...` elides what varies)."""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from centsync.pipelines.cli.main import main

from .conftest import HttpEnv
from .statements import ofx_statement

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "writeback.md").read_text("utf-8")


def blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```", PAGE, re.MULTILINE | re.DOTALL)


def examples() -> list[tuple[str, int, list[str]]]:
    """(command line, exit code, the output lines shown) of every console block, in order."""
    found: list[tuple[str, int, list[str]]] = []
    for block in blocks("console"):
        for line in block.splitlines():
            if line.startswith("$ "):
                command, _, comment = line[2:].partition("#")
                code = re.match(r"\s*exit (\d+)", comment)
                found.append((command.strip(), int(code.group(1)) if code else 0, []))
            elif line.strip():
                found[-1][2].append(line)
    return found


def shown(line: str, output: str) -> bool:
    """Whether some output line holds the documented line's parts, in order."""
    parts = [p for p in line.split("...") if p.strip()]
    for out in output.splitlines():
        at = 0
        for p in parts:
            at = out.find(p, at)
            if at < 0:
                break
            at += len(p)
        else:
            return True
    return False


def test_the_rules_file_shown_is_the_shipped_example() -> None:
    (toml,) = blocks("toml")
    assert toml == (ROOT / "pipelines" / "examples" / "rules.toml").read_text("utf-8")


@pytest.mark.slow  # CI runs it (make test-slow); about 15-25 s on 2 cores
def test_the_rules_and_bank_file_examples_run_as_shown(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CENTSYNC_API_KEY", http_env.sb.keys["read_write"])
    http_env.refresh()
    monkeypatch.chdir(http_env.tmp)
    (http_env.tmp / "rules.toml").write_text(blocks("toml")[0], "utf-8")
    ((day, amount),) = http_env.sql(
        "SELECT t.booked_at, t.amount FROM core.transactions t JOIN core.accounts a ON a.id = "
        "t.account_id WHERE a.name = 'Everyday Checking' ORDER BY t.booked_at DESC LIMIT 1"
    )
    recent = dt.date.today() - dt.timedelta(days=3)
    rows = [
        ("NOV-1", recent, "-13.37", "Ferreteria Sol"),
        ("NOV-2", recent, "-21.09", "Libreria Paris"),
        ("NOV-3", day, f"{amount / 100:.2f}", "CARD PAYMENT"),
    ]
    (http_env.tmp / "november.ofx").write_bytes(ofx_statement("000123456789", rows))
    ran = examples()
    assert {c.split()[1] for c, _, _ in ran} == {"rules", "import", "writeback"}
    for command, code, lines in ran:
        result = CliRunner().invoke(main, shlex.split(command)[1:], catch_exceptions=False)
        assert result.exit_code == code, (command, result.output)
        for line in lines:
            assert shown(line, result.stdout), (command, line, result.stdout)
    posted = [t["concept"] for t in http_env.sb.state()["transactions"]]
    assert posted.count("Ferreteria Sol") == 1 and posted.count("Libreria Paris") == 1
    assert "CARD PAYMENT" not in posted
