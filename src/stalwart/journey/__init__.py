"""Journeys: agents that follow a process, step by step, durably.

    from enum import Enum
    from pydantic import BaseModel
    from stalwart.journey import Journey, Step, Turn

    class Stage(Enum):
        IDENTIFY = "identify"
        HELP = "help"

    class Ticket(BaseModel):
        customer: str = ""

    async def identify(turn: Turn, email: str) -> str:
        '''Record who the customer is.

        Args:
            email: The customer's email address.
        '''
        turn.state.customer = email
        turn.goto(Stage.HELP)
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
tool that takes a :class:`Turn` changes the state and moves the journey, and
the next model call of the same turn sees the new step. A
:class:`Router` lets a model pick which journey (or agent) a conversation
goes to. See ``docs/journeys.md``.
"""

from __future__ import annotations

from ..core.errors import NoRoute
from .journey import OUT_OF_TURNS, Journey, JourneyReply, Step
from .router import Route, Router
from .turn import Turn

__all__ = ["OUT_OF_TURNS", "Journey", "JourneyReply", "NoRoute", "Route", "Router", "Step", "Turn"]
