"""How an execution unwinds: a wait (:class:`Suspend`), a halted run
(:class:`Halt`), and which exceptions are a step's own failure (S4, S14)."""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import CorruptedRecord, NonDeterminismError, StaleLeaseError, StalwartError, StepError

__all__ = [
    "NOT_STEP_ERRORS",
    "Halt",
    "Suspend",
    "as_exception",
    "find_halt",
    "find_suspend",
    "is_step_failure",
    "leaves_of",
]

# Errors about the run itself, not the step: never recorded as a step's error,
# so that fixing the cause (code, store) lets the run resume. The engine
# raises them inside a Halt; these types are also refused as a step's error
# in case one escapes without. A StoreError a step's own code raises (it
# talks to some store) is that step's error like any other.
NOT_STEP_ERRORS = (NonDeterminismError, CorruptedRecord, StaleLeaseError)


def is_step_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the step's own failure, to be recorded (S4, S14).

    Everything a step's code raises is, ``BaseException``s included (a tool's
    ``SystemExit`` from argparse, its own ``CancelledError`` or
    ``GeneratorExit``): recorded once, they can neither kill the process nor
    make the runner retry the run for ever. Not the step's: the run being
    cancelled (the task is cancelling), a durable wait unwinding the run, a
    halted execution, Ctrl-C, and the errors about the run itself
    (:data:`NOT_STEP_ERRORS`).
    """
    if isinstance(exc, Exception):
        if isinstance(exc, BaseExceptionGroup):
            return all(is_step_failure(e) for e in leaves_of(exc))
        return not isinstance(exc, NOT_STEP_ERRORS)
    if isinstance(exc, Suspend | Halt | KeyboardInterrupt):
        return False
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is None or task.cancelling() == 0
    if isinstance(exc, BaseExceptionGroup):
        return all(is_step_failure(e) for e in leaves_of(exc))
    return True


def as_exception(exc: BaseException) -> Exception:
    """A step failure as an ``Exception``: what callers see, live and on replay."""
    if isinstance(exc, Exception):
        return exc
    name = type(exc).__name__
    return StepError(name, str(exc) or f"{name} raised by the step")


class Suspend(BaseException):
    """Unwinds a run that waits (durable sleep or signal); not an error.

    A BaseException so that a policy's ``except Exception`` cannot swallow it.
    """

    def __init__(self, wake_at: float | None, waiting_for: str | None) -> None:
        super().__init__(wake_at, waiting_for)
        self.wake_at = wake_at
        self.waiting_for = waiting_for


class Halt(BaseException):
    """Stops an execution whose ledger refused a write, or whose replay
    diverged: the run, not the step, has the problem (S6, S8, S14).

    A BaseException, raised again by every later step of the execution, so
    that a policy's ``except Exception`` cannot swallow it and go on
    executing steps whose records could leave a hole or that another worker
    now owns. The runner settles the run from :attr:`cause`.
    """

    def __init__(self, cause: StalwartError) -> None:
        super().__init__(cause)
        self.cause = cause


def find_halt(exc: BaseException) -> Halt | None:
    """The Halt that unwound a run, itself or inside a (nested) group."""
    leaves = leaves_of(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return next((e for e in leaves if isinstance(e, Halt)), None)


def find_suspend(exc: BaseException) -> Suspend | None:
    """The Suspend that unwound the run, itself or inside a TaskGroup's group."""
    leaves = leaves_of(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return next((e for e in leaves if isinstance(e, Suspend)), None)


def leaves_of(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    """Every exception inside a (nested) exception group."""
    out: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out.extend(leaves_of(exc))
        else:
            out.append(exc)
    return out
