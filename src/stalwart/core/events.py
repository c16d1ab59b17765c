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


class Hook:
    """Observe or veto calls. Override what you need; every method is optional.

    ``before_call`` may raise :class:`~stalwart.core.errors.Veto` to refuse the call;
    the call then fails with that error (in options dispatch, the model reads
    it as an error result). Hooks run on live calls only, not on replayed ones.
    """

    async def before_call(self, call: CallInfo) -> None:
        """Called before each attempt sequence of a live call."""

    async def after_call(self, call: CallInfo, result: Any) -> None:
        """Called after a live call succeeded."""

    async def on_error(self, call: CallInfo, error: BaseException) -> None:
        """Called after a live call failed for good (retries exhausted)."""
