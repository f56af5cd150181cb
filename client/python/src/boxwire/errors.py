"""Exceptions named after the protocol's error codes (docs/protocol.md#errors).

Every error the bridge reports — an ``error`` reply or event on the
WebSocket, or ``{"error": {"code", "message"}}`` over HTTP — is raised as the
subclass of :class:`BoxwireError` for its code; :func:`error_for` picks it.
A code this SDK does not know becomes a plain :class:`BoxwireError` with
that code.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "BoxwireError",
    "BadMessage",
    "UnknownType",
    "TooLarge",
    "VersionMismatch",
    "Busy",
    "NotFound",
    "SeqAhead",
    "NotAllowed",
    "Unauthorized",
    "SandboxLimit",
    "SandboxUnavailable",
    "EngineUnavailable",
    "LLMError",
    "BudgetExceeded",
    "Internal",
    "QuotaExceeded",
    "FileNotFound",
    "PermissionDenied",
    "IsDirectory",
    "InvalidPath",
    "ConnectionClosed",
    "error_for",
]


class BoxwireError(Exception):
    """An error the bridge or agent reported. ``code`` is the protocol code."""

    code: str = ""
    CODE: ClassVar[str] = ""

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.CODE
        self.status = status  # the HTTP status, for errors of the HTTP API

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.code else self.message


class BadMessage(BoxwireError):
    CODE = "bad_message"


class UnknownType(BoxwireError):
    CODE = "unknown_type"


class TooLarge(BoxwireError):
    CODE = "too_large"


class VersionMismatch(BoxwireError):
    CODE = "version_mismatch"


class Busy(BoxwireError):
    CODE = "busy"


class NotFound(BoxwireError):
    CODE = "not_found"


class SeqAhead(BoxwireError):
    CODE = "seq_ahead"


class NotAllowed(BoxwireError):
    CODE = "not_allowed"


class Unauthorized(BoxwireError):
    CODE = "unauthorized"


class SandboxLimit(BoxwireError):
    CODE = "sandbox_limit"


class SandboxUnavailable(BoxwireError):
    CODE = "sandbox_unavailable"


class EngineUnavailable(BoxwireError):
    CODE = "engine_unavailable"


class LLMError(BoxwireError):
    CODE = "llm_error"


class BudgetExceeded(BoxwireError):
    CODE = "budget_exceeded"


class Internal(BoxwireError):
    CODE = "internal"


class QuotaExceeded(BoxwireError):
    CODE = "quota_exceeded"


class PortClosed(BoxwireError):
    CODE = "port_closed"


class StreamLimit(BoxwireError):
    CODE = "stream_limit"


class Idle(BoxwireError):
    CODE = "idle"


class FileNotFound(BoxwireError):
    CODE = "file_not_found"


class PermissionDenied(BoxwireError):
    CODE = "permission_denied"


class IsDirectory(BoxwireError):
    CODE = "is_directory"


class InvalidPath(BoxwireError):
    CODE = "invalid_path"


class ConnectionClosed(BoxwireError):
    """The WebSocket closed and could not be resumed (not a protocol code)."""


_BY_CODE: dict[str, type[BoxwireError]] = {
    cls.CODE: cls
    for cls in (
        BadMessage,
        UnknownType,
        TooLarge,
        VersionMismatch,
        Busy,
        NotFound,
        SeqAhead,
        NotAllowed,
        Unauthorized,
        SandboxLimit,
        SandboxUnavailable,
        EngineUnavailable,
        LLMError,
        BudgetExceeded,
        Internal,
        QuotaExceeded,
        PortClosed,
        StreamLimit,
        Idle,
        FileNotFound,
        PermissionDenied,
        IsDirectory,
        InvalidPath,
    )
}

CODES: frozenset[str] = frozenset(_BY_CODE)
"""Every error code this SDK has an exception for."""


def error_for(code: str, message: str, *, status: int | None = None) -> BoxwireError:
    """The exception for a protocol error code."""
    cls = _BY_CODE.get(code, BoxwireError)
    return cls(message, code=code, status=status)
