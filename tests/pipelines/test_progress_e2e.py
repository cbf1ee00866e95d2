"""Refresh progress through the real CLI: on a terminal, or where CENTSYNC_PROGRESS asks for it;
never by default where stderr is not a terminal (a cron log)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from centsync.pipelines.cli.main import main

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def test_progress_only_on_a_terminal_unless_asked(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CENTSYNC_PROGRESS", raising=False)
    quiet = CliRunner().invoke(main, ["refresh", "--full"], catch_exceptions=False)
    assert quiet.exit_code == 0, quiet.output
    assert "transactions:" not in quiet.stderr and " rows" not in quiet.stderr, quiet.stderr
    monkeypatch.setenv("CENTSYNC_PROGRESS", "1")
    asked = CliRunner().invoke(main, ["refresh", "--full"], catch_exceptions=False)
    assert asked.exit_code == 0, asked.output
    assert "transactions:" in asked.stderr and " rows" in asked.stderr, asked.stderr
