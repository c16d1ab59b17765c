"""Exceptions raised by Stalwart.

Every failure a user can meet has its own type, so callers can catch exactly
what they mean and a message names the step, the policy or the value at fault.
"""

from __future__ import annotations

__all__ = [
    "CancelledRun",
    "CorruptedRecord",
    "DuplicatePolicy",
    "InputMismatchError",
    "NonDeterminismError",
    "RunFailed",
    "RunNotFound",
    "SerializationError",
    "StaleLeaseError",
    "StalwartError",
    "StepError",
    "StoreError",
    "StoreUnavailable",
    "UnknownOption",
    "Veto",
]


class StalwartError(Exception):
    """Base class of every error Stalwart raises itself."""


class SerializationError(StalwartError, TypeError):
    """A value cannot cross the JSON boundary (S11).

    Raised when a value is recorded, so that a run never stores something it
    could not read back after a crash.
    """


class NonDeterminismError(StalwartError):
    """On replay, the call made at a step differs from the one recorded (S5)."""


class StepError(StalwartError):
    """A recorded failure whose original exception type cannot be rebuilt.

    Replay raises the original exception type when it can be imported; this
    stands in for it otherwise, keeping the type name and the message.
    """

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.error_message = message


class Veto(StalwartError):
    """Raised by a hook's ``before_call`` to refuse a call.

    Inside options dispatch the veto becomes an error result the model reads.
    """


class UnknownOption(StalwartError, LookupError):
    """A program offered an option by a name no policy has
    (``options=["web_search"]`` with nothing named so).

    Raised at the call, naming the run, the step and the names that exist.
    A *model* calling a tool that is not offered is not this: that call gets
    an error result the model reads.
    """


class RunNotFound(StalwartError, LookupError):
    """No run has this id in the store."""


class RunFailed(StalwartError):
    """Awaiting a run whose policy raised; the original error is ``__cause__``."""


class CancelledRun(StalwartError):
    """The run was cancelled before it finished."""


class InputMismatchError(StalwartError):
    """A run id was started again with other inputs, or another policy, than
    the first time: one run id is one run."""


class DuplicatePolicy(StalwartError, ValueError):
    """Two different policies would be recorded under one name.

    Refused when the second is registered: a run resumed by name must find
    the policy it started with, never a namesake (S13).
    """


class StoreError(StalwartError):
    """The store refused an operation for good: a usage error or a bad row.

    Permanent: retrying the same operation gives the same answer, so a run
    that meets one fails with its message (S14). A store that is merely
    unreachable raises :class:`StoreUnavailable` instead.
    """


class StoreUnavailable(StoreError):
    """The store cannot be reached or is busy right now; the same call may
    succeed later (a dropped connection, a server restart, a locked file).

    The only store error a runner retries: the run stays where it is and is
    resumed by replay once the store answers again.
    """


class CorruptedRecord(StoreError):
    """A recorded value cannot be read back; the run fails, its steps stay."""


class StaleLeaseError(StoreError):
    """A write carried a fencing token that another worker has superseded (S8)."""
