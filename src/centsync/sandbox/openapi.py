"""The OpenAPI 3.1 description of the v1 surface, served at /openapi.json."""

from __future__ import annotations

from typing import Any


def openapi_document() -> dict[str, Any]:
    return {"openapi": "3.1.0", "info": {"title": "Personal Finance Data API", "version": "v1"}, "paths": {}}
