"""A chat loop: one node that loops on itself until the user says bye.

`ChatTurn` takes the next user message, asks the model with the whole
history, stores the reply and returns "continue" (its own edge) or "end".
The user is scripted (pass messages on the command line, or `-i` to type
them) and the model is a `ScriptedLLM` with a heuristic reply, so this runs
offline. Under a durable store each turn is journaled: a crashed chat
resumes at the turn that was running, with the history as it was.

    python examples/pocketflow/chat.py "Hi, I'm Ada." "What is PocketFlow?" "What's my name?" bye
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart.flow import AsyncFlow, AsyncNode
from stalwart.testing import ScriptedLLM

FACTS = {
    "pocketflow": "PocketFlow builds LLM apps from nodes (prep, exec, post) joined by actions.",
    "stalwart": "Stalwart makes agents durable: a crashed run resumes where it stopped.",
    "flow": "A flow walks from node to node, following the action each node returns.",
}
GOODBYES = {"bye", "exit", "quit"}


def reply(observations: list[sw.Message], options: Sequence[Any]) -> str:
    """The model's heuristic: greet, remember the user's name, explain what it knows."""
    said = observations[-1].text
    names = [m.group(1) for o in observations if (m := re.search(r"I'm (\w+)", o.text))]
    if "my name" in said.lower():
        return f"You are {names[-1]}." if names else "You haven't told me your name."
    if names and said.startswith(("Hi", "Hello")):
        return f"Nice to meet you, {names[-1]}! Ask me about PocketFlow, flows or Stalwart."
    for topic, fact in FACTS.items():
        if topic in said.lower():
            return fact
    return "I only know about PocketFlow, flows and Stalwart, I'm afraid."


assistant = sw.policy(ScriptedLLM([reply] * 100, name="assistant"))


class ChatTurn(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> list[sw.Message] | None:
        turn = shared["turn"]
        if shared.get("interactive"):
            text = await asyncio.to_thread(input, "you: ")
        elif turn < len(shared["inputs"]):
            text = shared["inputs"][turn]
        else:
            return None
        if text.strip().lower() in GOODBYES:
            return None
        return [*shared["history"], sw.Message.user(text)]

    async def exec_async(self, messages: list[sw.Message] | None) -> list[sw.Message] | None:
        if messages is None:
            return None
        return await assistant(observations=messages)

    async def post_async(
        self, shared: dict[str, Any], messages: Any, answer: list[sw.Message] | None
    ) -> str:
        if messages is None or answer is None:
            return "end"
        shared["history"] = [*messages, *answer]
        shared["turn"] += 1
        if not shared.get("interactive"):
            print(f"you: {messages[-1].text}")
        print(f"assistant: {answer[-1].text}")
        return "continue"


class Goodbye(AsyncNode):
    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: Any) -> None:
        print("assistant: Goodbye!")


def chat_flow() -> AsyncFlow:
    turn = ChatTurn()
    turn - "continue" >> turn
    turn - "end" >> Goodbye()
    flow = AsyncFlow(start=turn)
    flow.name = "chat"  # type: ignore[attr-defined]
    return flow


DEFAULT_INPUTS = ["Hi, I'm Ada.", "What is PocketFlow?", "And what is a flow?", "What's my name?"]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="A chat loop with an offline model.")
    parser.add_argument("inputs", nargs="*", help="what the user says, turn by turn")
    parser.add_argument("-i", "--interactive", action="store_true", help="type the messages")
    parser.add_argument("--store", default=None, help="e.g. sqlite:///chat.db")
    args = parser.parse_args(argv)
    shared = {
        "inputs": args.inputs or DEFAULT_INPUTS,
        "interactive": args.interactive,
        "history": [],
        "turn": 0,
    }
    result: dict[str, Any] = sw.Runner(args.store).run_sync(chat_flow(), shared=shared)
    return result


if __name__ == "__main__":
    main()
