"""PocketJoe's API on Stalwart: bring a PocketJoe program over by changing
its imports (``from stalwart.pocketjoe import ...``).

Policies, contexts and messages keep PocketJoe's names and shapes; what runs
them is Stalwart's engine: schemas and argument validation from type hints,
action calls checked against the offered options and each run as a recorded
step, errors given back to the model as results. Choose
:class:`DurableRunner` instead of :class:`InMemoryRunner` and the program is
durable: killed, it resumes where it stopped.
"""

from .core import BaseContext, Message, Policy
from .policy_spec_mcp import (
    PolicyMetadata,
    get_policy_spec,
    policy_spec,
    policy_spec_mcp_resource,
    policy_spec_mcp_tool,
)
from .runtime import BoundPolicy, DurableRunner, InMemoryRunner, invoke_options_wrapper

__all__ = [
    "BaseContext",
    "BoundPolicy",
    "DurableRunner",
    "InMemoryRunner",
    "Message",
    "Policy",
    "PolicyMetadata",
    "get_policy_spec",
    "invoke_options_wrapper",
    "policy_spec",
    "policy_spec_mcp_resource",
    "policy_spec_mcp_tool",
]
