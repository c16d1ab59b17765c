"""A library desk assistant written against PocketJoe 0.2's API, run by Stalwart.

The program is what a PocketJoe 0.2 user writes (``@policy.tool`` functions,
an application context that binds them, messages made with
``MessageBuilder``, options offered as ``OptionSchema``), imported from
``stalwart.pocketjoe.v02``. The model is the offline one of
``pocketjoe_offline.py``, so it runs anywhere, without a key.

Run ``python examples/pocketjoe_v02_agent.py`` (in memory) or
``python examples/pocketjoe_v02_agent.py sqlite:///desk.db`` (durable: kill
it during the catalogue lookup, start it again, and it resumes; the model's
first answer comes from the ledger instead of being asked for again).
Set ``DESK_SLOW_LOOKUP`` (seconds) to make the lookup slow enough to kill.
"""

from __future__ import annotations

import asyncio
import sys

from pocketjoe_offline import CompletionsAdapter, note, pause

from stalwart.pocketjoe.v02 import (
    BaseContext,
    DurableRunner,
    InMemoryRunner,
    Message,
    MessageBuilder,
    OptionCallPayload,
    OptionSchema,
    policy,
)

SHELVES = {
    "left hand of darkness": "The Left Hand of Darkness (Le Guin): 2 copies, shelf B3",
    "dispossessed": "The Dispossessed (Le Guin): on loan until the 14th",
    "solaris": "Solaris (Lem): 1 copy, shelf C1",
}

HOUSE_RULES = "You answer readers at a library desk. Check the catalogue before you answer."


@policy.tool(description="Looks a title up in the library catalogue")
async def find_book(title: str) -> str:
    """Where the books matching ``title`` are, one a line.

    Args:
        title: The title, or words of it, that the reader asked about.
    """
    note("find_book")
    await pause("DESK_SLOW_LOOKUP")
    asked = title.lower()
    found = [entry for key, entry in SHELVES.items() if key in asked]
    return "\n".join(found) or "Nothing in the catalogue matches."


@policy.tool(description="The desk's language model (offline here)")
async def desk_model(
    observations: list[Message], options: list[OptionSchema] | None = None
) -> list[Message]:
    """The model's next move: a text answer, or calls of the options offered.

    Args:
        observations: The conversation so far.
        options: What the model may call this turn.
    """
    chat = CompletionsAdapter(observations, options)
    model = CompletionsAdapter.client()
    reply = await model.chat.completions.create(
        model="offline-desk", messages=chat.messages, tools=chat.tools
    )
    return chat.decode(reply, policy="desk_model")


@policy.tool(description="Answers a reader's question about the collection")
async def answer_reader(question: str, max_rounds: int = 3) -> str:
    """Let the model consult the catalogue until it answers in words.

    Args:
        question: What the reader asked.
        max_rounds: The most model turns before giving up.
    """
    desk = LibraryDesk.get_ctx()
    rules = MessageBuilder(policy="desk", role_hint_for_llm="system").add_text(HOUSE_RULES)
    asked = MessageBuilder(policy="reader", role_hint_for_llm="user").add_text(question)
    conversation = [rules.to_message(), asked.to_message()]
    for _ in range(max_rounds):
        # The model is offered the catalogue, and nothing else, each turn;
        # the calls it makes are run (as recorded steps) before this returns.
        move = await desk.model(
            observations=conversation, options=OptionSchema.from_func([desk.find_book])
        )
        conversation += move
        if not any(isinstance(m.payload, OptionCallPayload) for m in move):
            break
    said = [str(m) for m in conversation if m.parts and m.policy == "desk_model"]
    return said[-1] if said else "The desk has no answer."


class LibraryDesk(BaseContext):
    """Binds the desk's policies: ``desk.model(...)`` and the others are typed
    as the functions they bind, and each call is a step of the run."""

    def __init__(self, runner: InMemoryRunner) -> None:
        super().__init__(runner)
        self.model = self._bind(desk_model)
        self.find_book = self._bind(find_book)
        self.answer_reader = self._bind(answer_reader)


async def main(store: str | None) -> None:
    runner = DurableRunner(store) if store else InMemoryRunner()
    try:
        desk = LibraryDesk(runner)
        answer = await desk.answer_reader(question="Is The Left Hand of Darkness in?")
        print(f"Desk: {answer}")
    finally:
        await runner.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
