"""Follow-ups injected into the turn being answered (``followups="inject"``).

While a turn is answered, the agent's loop (``llm.Agent``) asks the conversation
before each model call for the turns waiting in its mailbox
(:func:`taking_followups`, a hook passed in a context variable, so the llm
layer's contract is unchanged for everyone else); each is taken by a
recorded ``ctx.receive`` of the agent's step, so a replay adds the same
messages at the same point, and the key of every later step is the same on
every execution (S1). A folded turn gets the reply of the turn it was
answered with (the reply message names that turn under ``"with"``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from ..core.context import Context
from ..core.mail import Mail
from ..core.message import Message
from .turn import TURN, message_text

__all__ = ["Followups", "offering_followups", "taking_followups"]

T = TypeVar("T")

#: What an agent's loop calls before each model call, with its own context,
#: to get the follow-ups to add to its conversation (``followups="inject"``).
Followups = Callable[[Context], Awaitable[list[Message]]]

_FOLLOWUPS: ContextVar[Followups | None] = ContextVar(
    "stalwart_conversation_followups", default=None
)


@contextlib.contextmanager
def taking_followups() -> Iterator[Followups | None]:
    """The follow-up hook a conversation set around this agent call (None if none),
    cleared for what runs inside it: a sub-agent or a tool never takes the
    conversation's turns, only the agent the conversation called. ``llm.Agent`` calls the
    hook before each model call; any agent loop may do the same."""
    hook = _FOLLOWUPS.get()
    token = _FOLLOWUPS.set(None)
    try:
        yield hook
    finally:
        _FOLLOWUPS.reset(token)


async def offering_followups(
    scope: Context, folded: list[Mail], answer: Callable[[], Awaitable[T]]
) -> T:
    """``answer()`` (the conversation's call of its agent, the next step of
    ``scope``) with the follow-up hook set: the turns the agent takes are
    appended to ``folded``, in the order taken, executed or replayed."""
    # The agent's step key (the one ``call`` takes next): its direct children
    # hold the follow-ups it took.
    key = scope.next_step_key()
    asked: list[bool] = []
    token = _FOLLOWUPS.set(_taker(folded, asked))
    try:
        out = await answer()
    finally:
        _FOLLOWUPS.reset(token)
    if not asked and scope.engine.durable:
        # The agent's step was replayed whole (its body did not run, nor
        # the hook): the follow-ups it took are its recorded receives.
        folded += _taken(scope.engine.replayed_values("receive"), key)
    return out


def _taker(folded: list[Mail], asked: list[bool]) -> Followups:
    """The hook of one turn: take every turn waiting now, without waiting.

    Each take is a ``ctx.receive`` of the agent's step (a recorded step under
    the agent's next keys), and so is the empty one that ends it (a recorded
    timeout): a replay takes the same messages at the same point and finds
    the same keys after them (S1)."""

    async def take(ctx: Context) -> list[Message]:
        asked.append(True)
        got: list[Message] = []
        while True:
            try:
                mail: Mail = await ctx.receive(kind=TURN, timeout=0)
            except TimeoutError:
                return got
            folded.append(mail)
            got.append(Message.user(message_text(mail.payload)))

    return take


def _taken(received: dict[str, Any], key: str) -> list[Mail]:
    """The turns the agent's step ``key`` took, in order: the replayed
    receives among its direct children (``key.N``) that hold a turn."""
    found: list[tuple[int, Mail]] = []
    for k, env in received.items():
        head, _, n = k.rpartition(".")
        if head != key or not n.isdigit() or not isinstance(env, dict):
            continue
        if env.get("kind") != TURN or not isinstance(env.get("id"), str):
            continue
        sender, sent_at = env.get("from"), env.get("sent_at")
        mail = Mail(
            payload=env.get("body"),
            sender=sender if isinstance(sender, str) else None,
            kind=TURN,
            sent_at=float(sent_at) if isinstance(sent_at, int | float) else 0.0,
            id=env["id"],
        )
        found.append((int(n), mail))
    return [m for _, m in sorted(found, key=lambda item: item[0])]
