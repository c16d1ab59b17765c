"""A rail enquiry desk written against PocketJoe 0.1's API, run by Stalwart.

The program is what a PocketJoe 0.1 user writes (class policies with an
async ``__call__`` and ``@policy_spec_mcp_tool``, an application context
that binds them with ``self._bind``, ``Message(actor, type, payload)``,
options offered by name), imported from ``stalwart.pocketjoe``. The model is
the offline one of ``pocketjoe_offline.py``, so it runs anywhere, without a
key: it asks for the timetable on its first turn and answers from it on the
second.

Run ``python examples/pocketjoe_agent.py`` (in memory) or
``python examples/pocketjoe_agent.py sqlite:///rail.db`` (durable: kill it
during the timetable lookup, start it again, and it resumes; the model's
first answer comes from the ledger instead of being asked for again).
Set ``RAIL_SLOW_LOOKUP`` (seconds) to make the lookup slow enough to kill.
"""

from __future__ import annotations

import asyncio
import sys

from pocketjoe_offline import (
    completions_messages,
    completions_tools,
    note,
    offline_openai,
    pause,
    reply_messages,
)

from stalwart.pocketjoe import (
    BaseContext,
    DurableRunner,
    InMemoryRunner,
    Message,
    Policy,
    policy_spec_mcp_tool,
)

DEPARTURES = {
    "leeds": "Leeds to York: 09:12, 09:42 and 10:12 (about 25 minutes)",
    "york": "York to Leeds: 09:05, 09:35 and 10:05 (about 25 minutes)",
    "whitby": "Middlesbrough to Whitby: 10:40 only on Sundays",
}

DESK_BRIEF = "You staff a rail enquiry desk. Read the timetable before you reply."


@policy_spec_mcp_tool(description="Departures for a journey, from the printed timetable")
class TrainTimes(Policy):
    async def __call__(self, journey: str) -> list[Message]:
        """Departures for the first station named in ``journey``, one line.

        :param journey: The traveller's words naming where they start.
        """
        note("timetable")
        await pause("RAIL_SLOW_LOOKUP")
        words = journey.lower().split()
        line = next((v for k, v in DEPARTURES.items() if k in words), "No such service.")
        return [Message(actor="timetable", type="action_result", payload={"content": line})]


@policy_spec_mcp_tool(description="The desk's language model (offline here)")
class DeskModel(Policy):
    async def __call__(self, observations: list[Message], options: list[str]) -> list[Message]:
        """The model's next move: a reply in words, or calls of the options.

        :param observations: The enquiry so far.
        :param options: Names of the bound policies the model may call.
        """
        reply = await offline_openai.chat.completions.create(
            model="offline-rail",
            messages=completions_messages(observations),
            tools=completions_tools(self.ctx, options),
        )
        return reply_messages(reply, actor="desk")


@policy_spec_mcp_tool(description="Answers a traveller's enquiry")
class AnswerEnquiry(Policy):
    ctx: RailDesk

    async def __call__(self, enquiry: str, max_rounds: int = 3) -> list[Message]:
        """The enquiry's conversation, ending once the model replies in words.

        :param enquiry: What the traveller asked.
        :param max_rounds: The most model turns before giving up.
        """
        said = [
            Message(actor="system", type="text", payload={"content": DESK_BRIEF}),
            Message(actor="user", type="text", payload={"content": enquiry}),
        ]
        for _ in range(max_rounds):
            # Each turn is a recorded step; the calls it makes run (as
            # recorded steps too) before it returns, results appended.
            move = await self.ctx.model(observations=said, options=["train_times"])
            said += move
            if all(m.type != "action_call" for m in move):
                return said
        gave_up = "The desk could not answer in time."
        return [*said, Message(actor="desk", type="text", payload={"content": gave_up})]


class RailDesk(BaseContext):
    """Binds the desk's policies; each attribute's name is its option name."""

    def __init__(self, runner: InMemoryRunner) -> None:
        super().__init__(runner)
        self.model = self._bind(DeskModel)
        self.train_times = self._bind(TrainTimes)
        self.answer = self._bind(AnswerEnquiry)


async def main(store: str | None) -> None:
    runner = DurableRunner(store) if store else InMemoryRunner()
    try:
        desk = RailDesk(runner)
        said = await desk.answer(enquiry="When can I get from Leeds to York this morning?")
        print(f"Desk: {said[-1].payload['content']}")
    finally:
        await runner.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
