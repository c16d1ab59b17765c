"""PocketJoe 0.2's API on Stalwart: bring a PocketJoe 0.2 program over by
changing its imports (``from stalwart.pocketjoe.v02 import ...``).

A separate module, not a switch on :mod:`stalwart.pocketjoe` (PocketJoe
0.1's names): the two versions give one name different meanings
(``Message(actor, type, payload)`` against ``Message(policy, parts,
payload)``; class policies against ``@policy.tool`` functions), so each
program says in its import which one it speaks, both can live in one
process, and a type checker sees the right one.

Policies, contexts and messages keep PocketJoe 0.2's names and shapes; what
runs them is Stalwart's engine (see
:mod:`stalwart.pocketjoe.v02.policy_wrappers`). Choose
:class:`DurableRunner` instead of :class:`InMemoryRunner` and the program is
durable.
"""

from .core import BaseContext, OptionSchema
from .memory_runtime import DurableRunner, InMemoryRunner
from .message import (
    MediaPart,
    Message,
    MessageBuilder,
    OptionCallPayload,
    OptionResultBuilder,
    OptionResultPayload,
    Part,
    Payload,
    TextPart,
    iter_parts,
)
from .policy_decorators import policy
from .policy_wrappers import BoundPolicy, invoke_options_wrapper_for_func

__all__ = [
    "BaseContext",
    "BoundPolicy",
    "DurableRunner",
    "InMemoryRunner",
    "MediaPart",
    "Message",
    "MessageBuilder",
    "OptionCallPayload",
    "OptionResultBuilder",
    "OptionResultPayload",
    "OptionSchema",
    "Part",
    "Payload",
    "TextPart",
    "invoke_options_wrapper_for_func",
    "iter_parts",
    "policy",
]
