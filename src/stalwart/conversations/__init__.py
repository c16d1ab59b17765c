"""Durable conversations with agents, and per-agent turn queues (see
:mod:`.conversation`): a long-lived run per conversation, fed turns through
its mailbox, over a :class:`~stalwart.Runner`."""

from .conversation import (
    Conversation,
    ConversationHost,
    conversation_policies,
    conversation_policy,
)
from .followups import Followups, taking_followups
from .loop import ConversationLoop
from .turn import REPLY, TURN, turn

__all__ = [
    "REPLY",
    "TURN",
    "Conversation",
    "ConversationHost",
    "ConversationLoop",
    "Followups",
    "conversation_policies",
    "conversation_policy",
    "taking_followups",
    "turn",
]
