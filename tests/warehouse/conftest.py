"""Fixtures for warehouse tests: a fresh warehouse file per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from centsync.warehouse import Warehouse


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A warehouse path in a fresh temporary folder."""
    return tmp_path / "centsync.duckdb"


@pytest.fixture
def wh(db_path: Path) -> Iterator[Warehouse]:
    """A directly opened warehouse with a refresh started (no publishing)."""
    handle = Warehouse.open(db_path)
    handle.start_refresh(mode="full", refresh_id="r1")
    yield handle
    handle.close()
