"""A turn of a conversation: the small run a caller's message travels in.

A turn (:func:`turn`, id ``<conversation>~turn-<id>``) sends the user's message to
its conversation's mailbox as a :data:`TURN` and receives the :data:`REPLY`; both
are recorded steps, so a turn killed at any point resumes where it was and a
caller's ``await`` is ``await`` of a run's outcome, across processes and
crashes (S10). See :mod:`.conversation` for the whole picture.
"""

from __future__ import annotations

from typing import Any

from ..core import codec
from ..core.context import Context
from ..core.errors import TurnFailed
from ..core.message import Message
from ..core.policy import policy

__all__ = ["REPLY", "TURN", "message_text", "turn"]

#: The kinds of the messages a turn and its conversation exchange.
TURN = "stalwart.turn"
REPLY = "stalwart.reply"


@policy(name="stalwart.turn")
async def turn(ctx: Context, thread: str, message: Any) -> Any:
    """One turn of a conversation: send ``message`` to the conversation, await its reply.

    ``thread`` is the conversation's id (the parameter's name is in every
    turn's stored inputs, so it stays). Each is a recorded step, so a turn
    killed at any point resumes where it was: it never sends twice and never
    misses the reply.
    """
    await ctx.send(thread, message, kind=TURN)
    got = await ctx.receive(sender=thread, kind=REPLY)
    out = got.payload
    if isinstance(out, dict) and isinstance(out.get("error"), str):
        raise TurnFailed(f"conversation {thread!r}: {out['error']}")
    return out.get("reply") if isinstance(out, dict) else out


def message_text(value: Any) -> str:
    """A turn's message or a reply as the text an agent reads (JSON for data)."""
    if isinstance(value, Message):
        return value.text
    if isinstance(value, str):
        return value
    return codec.dumps(value, "a reply")
