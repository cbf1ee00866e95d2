"""The warehouse's exceptions: one tree, caught by meaning.

WarehouseError
├── FrameShapeError        a frame lacks a required column or has an unusable type
├── MonthBoundsError       replace_months got rows outside the months it was told to replace
├── RefreshInProgressError another refresh holds the warehouse's lock
└── NoWarehouseError       nothing has been published at that path yet
"""

from __future__ import annotations


class WarehouseError(Exception):
    """Base of every error the warehouse raises on purpose."""


class FrameShapeError(WarehouseError, ValueError):
    """A landed frame cannot be read at all (a programming error upstream, not a bad row)."""


class MonthBoundsError(WarehouseError, ValueError):
    """Rows handed to replace_months fall outside the months being replaced."""


class RefreshInProgressError(WarehouseError):
    """Another process is refreshing this warehouse."""


class NoWarehouseError(WarehouseError, FileNotFoundError):
    """No published warehouse exists at the path."""
