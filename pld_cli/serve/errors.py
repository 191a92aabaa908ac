"""What a request did wrong (or what stopped it), as the status and JSON body OpenAI's API sends.

Every refusal is one `ApiError`: the HTTP status, a message naming the field and the fault, and
OpenAI's `type`, `param` and `code`, so clients (the `openai` package among them) raise their own
typed errors from it. The handler turns it into `{"error": {...}}`, or into an error event when a
stream has already begun.
"""

from __future__ import annotations

from enum import Enum
from http import HTTPStatus


class ErrorType(str, Enum):
    """OpenAI's error types."""

    INVALID_REQUEST = "invalid_request_error"
    NOT_FOUND = "not_found_error"
    SERVER = "server_error"
    UNAVAILABLE = "service_unavailable"


class ApiError(Exception):
    """A refused or failed request: one line of message, with OpenAI's fields."""

    def __init__(
        self,
        message: str,
        status: HTTPStatus = HTTPStatus.BAD_REQUEST,
        kind: ErrorType = ErrorType.INVALID_REQUEST,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.kind, self.param, self.code = status, kind, param, code

    def body(self) -> dict:
        error = {"message": str(self), "type": self.kind.value, "param": self.param}
        return {"error": error | {"code": self.code}}


def invalid(param: str, message: str) -> ApiError:
    """A field with a wrong value or type (400)."""
    return ApiError(f"{param}: {message}", param=param, code="invalid_value")


def unsupported(param: str, what: str) -> ApiError:
    """A field pld serve understands and does not do (400), rather than silently ignored."""
    return ApiError(
        f"{param}: {what} is not supported by pld serve", param=param, code="unsupported_value"
    )


class ClientGone(Exception):
    """The client closed its connection: the decode stops and its slot goes to the next one."""


class ShuttingDown(ApiError):
    """The server is stopping (Ctrl-C, SIGTERM): what is in flight ends with this 503."""

    def __init__(self) -> None:
        super().__init__(
            "the server is shutting down", HTTPStatus.SERVICE_UNAVAILABLE, ErrorType.UNAVAILABLE
        )
