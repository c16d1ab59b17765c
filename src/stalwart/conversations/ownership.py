"""Which agent owns a conversation's next turn, after handoffs.

An ``llm.Agent`` with handoffs may hand the conversation to another agent
(a recorded step named ``stalwart.handoff:<from>><to>``); that agent then
owns the following turns. The owner is carried by the history alone: the
conversation writes each reply as an assistant message whose ``actor`` is the
agent that owns the conversation after that turn, and the agent called for
the next turn starts with the agent its history's last reply names
(:func:`owner_of`). So a replayed or resumed conversation, and one continued
as new with a carried history, hand the next turn to the same agent.

The conversation learns the owner after each turn from the agent itself, live
(the hook :func:`reporting_owner` hands the agent), or, when the agent's
step was replayed whole and its body did not run, from the handoff steps
recorded beneath it (:func:`tracking_owner`). An agent without handoffs
never reports, and its replies keep the actor ``"assistant"``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

from ..core.context import Context
from ..core.message import Message

__all__ = [
    "HANDOFF",
    "Report",
    "handoff_step_name",
    "handoff_target",
    "owner_of",
    "reporting_owner",
    "tracking_owner",
]

T = TypeVar("T")

#: The name every handoff step starts with: ``stalwart.handoff:triage>billing``.
HANDOFF = "stalwart.handoff:"

#: What an agent with handoffs calls once it has answered: the agent it last
#: handed the conversation to during this answer, or None if it handed it to none.
Report = Callable[[str | None], None]

_REPORT: ContextVar[Report | None] = ContextVar("stalwart_conversation_owner", default=None)


def handoff_step_name(source: str, target: str) -> str:
    """The recorded name of the step in which ``source`` hands to ``target``."""
    return f"{HANDOFF}{source}>{target}"


def handoff_target(step_name: str) -> str | None:
    """The agent a handoff step's name hands to (None: not a handoff step)."""
    if not step_name.startswith(HANDOFF):
        return None
    _, sep, target = step_name.rpartition(">")
    return target if sep and target else None


def owner_of(history: Sequence[Message] | None) -> str:
    """The actor of the history's last assistant message (``"assistant"`` if none):
    the agent that owned the conversation after the last turn."""
    for m in reversed(history or ()):
        if m.role == "assistant" and m.action_call is None:
            return m.actor
    return "assistant"


@contextlib.contextmanager
def reporting_owner() -> Iterator[Report | None]:
    """The hook a conversation set around this agent call (None if none),
    cleared for what runs inside it: only the agent the conversation called
    reports, never a sub-agent or a tool."""
    hook = _REPORT.get()
    token = _REPORT.set(None)
    try:
        yield hook
    finally:
        _REPORT.reset(token)


async def tracking_owner(
    scope: Context, answer: Callable[[], Awaitable[T]]
) -> tuple[T, str | None]:
    """``answer()`` (the conversation's call of its agent, the next step of
    ``scope``) and the agent its answer last handed the conversation to
    (None: no handoff), from the agent's report, or from the handoff steps
    recorded under its step when that step was replayed whole."""
    key = scope.next_step_key()
    reported: list[str | None] = []
    token = _REPORT.set(reported.append)
    try:
        out = await answer()
    finally:
        _REPORT.reset(token)
    if reported:
        return out, reported[-1]
    if scope.engine.durable:
        return out, _last_handoff(scope.engine.replay, key)
    return out, None


def _last_handoff(replay: Mapping[str, Any], key: str) -> str | None:
    """The target of the last handoff step among the direct children of ``key``."""
    last: tuple[int, str] | None = None
    prefix = f"{key}." if key else ""
    for k, rec in replay.items():
        target = handoff_target(rec.name)
        if target is None or not k.startswith(prefix):
            continue
        n = k[len(prefix) :]
        if n.isdigit() and (last is None or int(n) > last[0]):
            last = (int(n), target)
    return last[1] if last is not None else None
