"""The base of every result (`Result`), the nested objects that keep keys they do not declare
(`Open`), and what the CLI adds to every `--json` object (`Envelope`)."""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field

# the one metadata entry a result travels in
RESULT_KEY = "centsync/result"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
Count = Annotated[int, Field(ge=0)]  # a count (or an exit code), never negative
Seconds = Annotated[float, Field(ge=0)]


class Result(BaseModel):
    """The base of every result: `to_json`, `from_json`, `json_schema`.

    Not frozen: a write-back, a rules run or an owner's refresh fills its result as it goes.
    A recorded object may carry keys it does not declare (the envelope's): they are ignored.
    """

    model_config = ConfigDict(
        extra="ignore",
        populate_by_name=True,
        # each model is built on its first use, not on import: a command pays for its own
        defer_build=True,
        # a field with a default is always written, so the schema requires it too
        json_schema_serialization_defaults_required=True,
    )

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON values (what `--json` prints, what a run records)."""
        return self.model_dump(mode="json", by_alias=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """The result back from what `to_json` made (keys it does not declare are ignored)."""
        return cls.model_validate(data)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema (draft 2020-12) of `to_json`'s object, generated from the fields."""
        return {"$schema": DIALECT, **cls.model_json_schema(mode="serialization", by_alias=True)}


class Open(Result):
    """A nested object whose declared fields are checked, and whose other keys are kept."""

    model_config = ConfigDict(extra="allow")


class Envelope(Result):
    """What the CLI adds to every command's `--json` object, in one place (`group.finish`)."""

    run_id: str | None = None  # the Dagster run, when the command ran one
    warehouse: str | None = None  # None: settings that could not be read (`doctor`)
    exit_code: Count = 0
    seconds: Seconds = 0.0  # since the command started
