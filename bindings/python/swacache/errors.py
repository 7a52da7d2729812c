"""Exceptions: one :class:`Error` subclass per ``swa_status_t`` code.

The binding maps codes, never messages. Each exception carries the status
(:attr:`Error.code`) and the library's message for the failed call
(:attr:`Error.message`, from ``swa_last_error()`` read on the same thread right
after the call). Argument checks made in Python raise
:class:`InvalidArgumentError` (which is also a :class:`ValueError`) with a
message that names the argument.
"""

from __future__ import annotations

import enum
from typing import Dict, Type


class Status(enum.IntEnum):
    """``swa_status_t``: values pinned to absl::StatusCode."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class Error(Exception):
    """A failed libswacache call (or a Python-side check of its arguments).

    Attributes:
        code: the :class:`Status` of the failure.
        message: the library's message (or the binding's, for its own checks).
    """

    code: Status = Status.UNKNOWN

    def __init__(self, message: str = "", code: "Status | int | None" = None) -> None:
        if code is not None:
            try:
                self.code = Status(int(code))
            except ValueError:
                self.code = Status.UNKNOWN
        self.message = message
        super().__init__(f"{self.code.name}: {message}" if message else self.code.name)


class CancelledError(Error):
    code = Status.CANCELLED


class UnknownError(Error):
    code = Status.UNKNOWN


class InvalidArgumentError(Error, ValueError):
    code = Status.INVALID_ARGUMENT


class DeadlineExceededError(Error):
    code = Status.DEADLINE_EXCEEDED


class NotFoundError(Error):
    code = Status.NOT_FOUND


class AlreadyExistsError(Error):
    code = Status.ALREADY_EXISTS


class PermissionDeniedError(Error):
    code = Status.PERMISSION_DENIED


class ResourceExhaustedError(Error):
    code = Status.RESOURCE_EXHAUSTED


class FailedPreconditionError(Error):
    code = Status.FAILED_PRECONDITION


class ClosedError(FailedPreconditionError):
    """A call on a :class:`~swacache.Cache`, :class:`~swacache.Plan` or store
    that was already closed (raised by the binding; the library is not called)."""


class AbortedError(Error):
    code = Status.ABORTED


class OutOfRangeError(Error, IndexError):
    code = Status.OUT_OF_RANGE


class UnimplementedError(Error, NotImplementedError):
    code = Status.UNIMPLEMENTED


class InternalError(Error):
    code = Status.INTERNAL


class UnavailableError(Error):
    code = Status.UNAVAILABLE


class DataLossError(Error):
    code = Status.DATA_LOSS


class UnauthenticatedError(Error):
    code = Status.UNAUTHENTICATED


ERROR_CLASSES: Dict[Status, Type[Error]] = {
    Status.CANCELLED: CancelledError,
    Status.UNKNOWN: UnknownError,
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.DEADLINE_EXCEEDED: DeadlineExceededError,
    Status.NOT_FOUND: NotFoundError,
    Status.ALREADY_EXISTS: AlreadyExistsError,
    Status.PERMISSION_DENIED: PermissionDeniedError,
    Status.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    Status.FAILED_PRECONDITION: FailedPreconditionError,
    Status.ABORTED: AbortedError,
    Status.OUT_OF_RANGE: OutOfRangeError,
    Status.UNIMPLEMENTED: UnimplementedError,
    Status.INTERNAL: InternalError,
    Status.UNAVAILABLE: UnavailableError,
    Status.DATA_LOSS: DataLossError,
    Status.UNAUTHENTICATED: UnauthenticatedError,
}


def error_for(code: int, message: str) -> Error:
    """The exception for a status code (UnknownError for codes outside the enum)."""
    try:
        status = Status(int(code))
    except ValueError:
        return UnknownError(f"status {int(code)}: {message}")
    cls = ERROR_CLASSES.get(status, UnknownError)
    return cls(message)

__all__ = ["Status", "Error", "ClosedError", "ERROR_CLASSES", "error_for"] + [
    c.__name__ for c in ERROR_CLASSES.values()]
