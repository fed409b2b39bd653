"""ApiError: a Kafka error code with a message, raised by the broker's core and turned into the
response's error fields by the API handlers."""

from __future__ import annotations

from kctl.protocol.errors import ErrorCode


class ApiError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.description)
        self.code = code
        self.message = message or code.description
