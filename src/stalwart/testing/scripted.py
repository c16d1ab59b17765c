"""Offline stand-ins for models, so agent loops are tested without an API key.

:class:`ScriptedLLM` plays a script of replies. Its position in the script is
the number of replies it has already given in the conversation it is shown, not
a counter in memory: a durable run that replays its first model calls and
resumes live gets the next reply, exactly as it would from a real model.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self, overload

from ..core.context import Context
from ..core.errors import ScriptExhausted
from ..core.message import Message

__all__ = ["Reply", "ScriptedLLM", "call"]

Reply = (
    str
    | Message
    | Sequence[Message]
    | Callable[[list[Message], Sequence[Any]], "str | Message | Sequence[Message]"]
    | Callable[[list[Message], Sequence[Any]], "Awaitable[str | Message | Sequence[Message]]"]
)


def call(name: str, /, _id: str | None = None, **arguments: Any) -> Message:
    """An action call for a script: ``call("web_search", query="python")``."""
    return Message.call(name, arguments, id=_id)


class _BoundScript(Protocol):
    """A scripted model bound on an application context: ``await ctx.llm(observations=...)``."""

    def __call__(
        self, observations: list[Message], options: Sequence[Any] = ()
    ) -> Awaitable[list[Message]]: ...


class ScriptedLLM:
    """A policy that answers from a script of replies, one per model call.

    Each reply is text, a message (an action call), a list of messages
    (parallel calls, or text with calls), or a function of the observations
    and options returning one of those (or an awaitable of one): a heuristic
    model.
    """

    def __init__(self, script: Sequence[Reply], *, name: str = "scripted_llm") -> None:
        self.script = list(script)
        self.name = name
        self.calls = 0  # how many times it really ran (replayed calls don't count)

    # Bound on an application context class (``llm = ScriptedLLM([...])``),
    # ``ctx.llm(observations=...)`` is a step of this model, as a provider's is.
    # The context class binds it when the class is made
    # (``Context.__init_subclass__``); this ``__get__`` only tells type
    # checkers so. A real one would make every instance a method descriptor,
    # which ``inspect.isroutine`` takes for a function.
    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: Context, owner: type | None = None) -> _BoundScript: ...
        @overload
        def __get__(self, obj: object, owner: type | None = None) -> Self: ...
        def __get__(self, obj: object, owner: type | None = None) -> Any: ...

    async def __call__(
        self, ctx: Context, observations: list[Message], options: Sequence[Any] = ()
    ) -> list[Message]:
        """Reply to the conversation with the script's next reply."""
        given = self._replies_given(observations)
        if given >= len(self.script):
            raise ScriptExhausted(
                f"{self.name}: the script has {len(self.script)} replies, "
                f"reply {given + 1} was asked"
            )
        self.calls += 1
        reply: Any = self.script[given]
        if callable(reply) and not isinstance(reply, Message):
            reply = reply(observations, options)
            if inspect.isawaitable(reply):
                reply = await reply
        return [self._own(m) for m in _as_messages(reply)]

    def _replies_given(self, observations: Sequence[Message]) -> int:
        given, inside = 0, False
        for m in observations:
            mine = m.role == "assistant" and m.actor == self.name
            if mine and not inside:
                given += 1
            inside = mine
        return given

    def _own(self, m: Message) -> Message:
        if m.role == "assistant" and m.actor != self.name:
            return Message(m.role, self.name, m.parts, m.action_call, m.action_result, m.id, m.meta)
        return m


def _as_messages(reply: Any) -> list[Message]:
    if isinstance(reply, str):
        return [Message.assistant(reply)]
    if isinstance(reply, Message):
        return [reply]
    if isinstance(reply, Sequence) and all(isinstance(m, Message) for m in reply):
        return list(reply)
    raise TypeError(f"a script reply must be text, a Message or a list of them, not {reply!r}")
