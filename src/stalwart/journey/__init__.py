"""Journeys: agents that follow a process, step by step, durably.

    from enum import Enum
    from pydantic import BaseModel
    from stalwart.journey import Journey, Step, ToolContext

    class Stage(Enum):
        IDENTIFY = "identify"
        HELP = "help"

    class Ticket(BaseModel):
        customer: str = ""

    async def identify(ctx: ToolContext, email: str) -> str:
        '''Record who the customer is.

        Args:
            email: The customer's email address.
        '''
        ctx.state.customer = email
        ctx.goto(Stage.HELP)
        return "identified"

    support = Journey(
        model,
        steps={
            Stage.IDENTIFY: Step("Ask for the customer's email.", tools=[identify]),
            Stage.HELP: Step("Help {customer}.", tools=[...]),
        },
        state=Ticket,
        start=Stage.IDENTIFY,
        name="support",
    )

Each step has its own instructions (rendered from the state) and tools; a
tool that takes a :class:`ToolContext` changes the state and moves the journey, and
the next model call of the same turn sees the new step. A
:class:`Router` lets a model pick which journey (or agent) a conversation
goes to. See ``docs/journeys.md``.
"""

from __future__ import annotations

from ..core.errors import NoRoute
from .journey import OUT_OF_ROUNDS, Journey, JourneyReply, Step
from .router import Route, Router
from .tool_context import ToolContext

__all__ = [
    "OUT_OF_ROUNDS",
    "Journey",
    "JourneyReply",
    "NoRoute",
    "Route",
    "Router",
    "Step",
    "ToolContext",
]
