"""The contract's error envelope, raised inside handlers and rendered by the app."""

from __future__ import annotations


class ServiceError(Exception):
    """An error answer: status, code, message, optional field details and extra headers."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: list[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, object]:
        err: dict[str, object] = {"code": self.code, "message": self.message}
        if self.details:
            err["details"] = self.details
        return {"error": err}


def invalid(message: str, field: str | None = None, issue: str | None = None) -> ServiceError:
    details = [{"field": field, "issue": issue or message}] if field else None
    return ServiceError(400, "invalid_request", message, details)


def not_found(message: str = "No such resource.") -> ServiceError:
    return ServiceError(404, "not_found", message)
