"""Typed events a run streams to whoever listens, and the hooks that observe calls.

Events exist only while someone listens: a run with no listener and no hook
builds none of them, so observation costs nothing when unused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "CallFailed",
    "CallFinished",
    "CallInfo",
    "CallStarted",
    "Emitted",
    "Event",
    "Hook",
    "RunFinished",
    "RunInfo",
    "TextDelta",
]


@dataclass(frozen=True, slots=True)
class CallStarted:
    run_id: str
    key: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CallFinished:
    run_id: str
    key: str
    name: str
    result: Any
    duration: float
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class CallFailed:
    run_id: str
    key: str
    name: str
    error_type: str
    error_message: str
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class Emitted:
    """A value a policy sent with ``ctx.emit()``."""

    run_id: str
    key: str
    value: Any


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of text a model is streaming while its call runs."""

    run_id: str
    key: str
    text: str


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The last event of a stream: the run's final status and outcome."""

    run_id: str
    status: str
    result: Any = None
    error: str | None = None


Event = CallStarted | CallFinished | CallFailed | Emitted | TextDelta | RunFinished


@dataclass(frozen=True, slots=True)
class CallInfo:
    """What a hook is told about a call."""

    run_id: str
    key: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What a hook is told about one execution of a run.

    ``execution`` is the claim's fencing token: 1 the first time the run
    executes, more when it resumes (after a suspension, a crash, a lost
    lease). ``trace`` is what :meth:`Hook.start_trace` returned when the run
    was created, read back from the store, so an execution in another
    process joins the same trace.
    """

    run_id: str
    policy: str
    execution: int
    parent_id: str | None = None
    queue: str = "default"
    trace: str | None = None


class Hook:
    """Observe or veto calls. Override what you need; every method is optional.

    ``before_call`` may raise :class:`~stalwart.core.errors.Veto` to refuse the call;
    the call then fails with that error (in options dispatch, the model reads
    it as an error result). ``before_call``, ``after_call``, ``on_error`` and
    ``on_retry`` run on live calls only; a call answered from the ledger is
    told to ``on_replayed`` instead, so an observer can tell the two apart.
    A live call that stops without an outcome (its run suspended, was
    cancelled or lost its store) gets neither ``after_call`` nor
    ``on_error``; ``on_run_end`` follows.

    The run methods exist for tracing (``stalwart.otel``): a hook sees each
    execution of a run begin and end in the run's own task, around every
    call of that execution, and may give a run a trace context to keep.
    """

    async def before_call(self, call: CallInfo) -> None:
        """Called before each attempt sequence of a live call."""

    async def after_call(self, call: CallInfo, result: Any) -> None:
        """Called after a live call succeeded."""

    async def on_error(self, call: CallInfo, error: BaseException) -> None:
        """Called after a live call failed for good (retries exhausted)."""

    async def on_retry(self, call: CallInfo, attempt: int, error: BaseException) -> None:
        """Called when a live call is about to try again: ``attempt`` (2, 3,
        ...) is the try to come, ``error`` what the previous one raised."""

    async def on_replayed(self, call: CallInfo, error: BaseException | None) -> None:
        """Called when a call is answered from the ledger without executing:
        ``error`` is the recorded error it raises again, None for a result."""

    def start_trace(self, run_id: str, policy: str) -> str | None:
        """Called, in the creating code's context, when a run is created: a
        string to keep with the run (``RunRecord.trace``) or None. The first
        hook that returns one wins."""
        return None

    async def on_run_start(self, run: RunInfo) -> None:
        """Called when an execution of a run begins, before its first call."""

    async def on_run_end(self, run: RunInfo, status: str, error: BaseException | None) -> None:
        """Called when an execution ends: ``status`` is the run's outcome
        (succeeded, failed, cancelled) or why this execution stopped
        (suspended, released, lost)."""
