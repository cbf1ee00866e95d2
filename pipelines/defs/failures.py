"""Known failures leave a step as a `dg.Failure` carrying their exit code and advice."""

import contextlib
from collections.abc import Iterator

import dagster as dg

from centsync.pipelines import failures as errors


@contextlib.contextmanager
def known_failures() -> Iterator[None]:
    """Raise a known failure (`errors.known`) again as a `dg.Failure` whose metadata says what
    it is (`errors.failure_metadata`); the CLI maps a failed run by that metadata. Anything
    else (an unexpected error, an interrupt) leaves as it came."""
    try:
        yield
    except Exception as exc:
        found = errors.known(exc)
        if found is None:
            raise
        cause, kind = found
        metadata = errors.failure_metadata(cause, kind)
        raise dg.Failure(description=metadata[errors.MESSAGE], metadata=metadata) from exc
