"""Two agents talking through asyncio queues in the shared store: a guessing game.

The hinter knows a secret word and gives one hint a turn; the guesser keeps
the words that fit every hint so far and guesses one. Each agent is its own
`AsyncFlow` of one node looping on itself; both flows run at once over the
same shared store, which holds the two queues they talk through. Both
"models" are heuristics, so this runs offline.

Queues cannot be recorded, so this one runs in memory, as in PocketFlow
(a durable run refuses a shared store it could not restore, naming the key).

    python examples/pocketflow/two_agents.py python
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Sequence
from typing import Any

from stalwart.flow import AsyncFlow, AsyncNode

# What each agent knows: the hinter, a few hints per word; the guesser, what
# each word it knows is.
HINTS = {
    "python": ["It is a kind of snake.", "It is also a programming language."],
    "java": ["It is an island.", "It is also a programming language."],
    "cobra": ["It is a kind of snake.", "Its bite is venomous."],
}
VOCABULARY = {
    "boa": {"snake"},
    "cobra": {"snake", "venomous"},
    "java": {"island", "language", "coffee"},
    "python": {"snake", "language"},
    "ruby": {"gem", "language"},
    "sumatra": {"island"},
}


TRAITS = {trait for traits in VOCABULARY.values() for trait in traits}
MAX_HINTS = 5


class Hinter(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> tuple[str | None, str, int]:
        guess = await shared["to_hinter"].get()  # None opens the game
        return guess, shared["secret"], len(shared["hints"])

    async def exec_async(self, inputs: tuple[str | None, str, int]) -> str | None:
        guess, secret, given = inputs
        if guess == secret or given >= MAX_HINTS:
            return None  # the game is over
        hints = HINTS[secret]
        return hints[given] if given < len(hints) else f"It starts with {secret[0]!r}."

    async def post_async(self, shared: dict[str, Any], prep_res: Any, hint: str | None) -> str:
        await shared["to_guesser"].put(hint)
        if hint is None:
            won = prep_res[0] == prep_res[1]
            print("hinter: Correct!" if won else f"hinter: It was {prep_res[1]}.")
            return "done"
        shared["hints"].append(hint)
        print(f"hinter: {hint}")
        return "continue"


class Guesser(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> tuple[list[str], list[str]] | None:
        hint = await shared["to_guesser"].get()
        if hint is None:
            return None  # the game is over
        return list(shared["hints"]), list(shared["guesses"])

    async def exec_async(self, inputs: tuple[list[str], list[str]] | None) -> str | None:
        if inputs is None:
            return None
        hints, tried = inputs
        said = {w.strip(".,'") for hint in hints for w in hint.lower().split()}
        clues = said & TRAITS
        starts = [m for hint in hints for m in re.findall(r"starts with '(\w)'", hint)]
        fitting = [
            word
            for word, traits in sorted(VOCABULARY.items())
            if word not in tried and clues <= traits and all(word.startswith(s) for s in starts)
        ]
        return fitting[0] if fitting else "pass"

    async def post_async(self, shared: dict[str, Any], prep_res: Any, guess: str | None) -> str:
        if guess is None:
            return "done"
        shared["guesses"].append(guess)
        print(f"guesser: Is it {guess}?")
        await shared["to_hinter"].put(guess)
        return "continue"


class Done(AsyncNode):
    pass


def agent(node: AsyncNode) -> AsyncFlow:
    node - "continue" >> node
    node - "done" >> Done()
    return AsyncFlow(start=node)


async def play(secret: str) -> dict[str, Any]:
    shared: dict[str, Any] = {
        "secret": secret,
        "to_hinter": asyncio.Queue(),
        "to_guesser": asyncio.Queue(),
        "hints": [],
        "guesses": [],
    }
    await shared["to_hinter"].put(None)  # the hinter speaks first
    await asyncio.gather(agent(Hinter()).run_async(shared), agent(Guesser()).run_async(shared))
    return {"secret": secret, "hints": shared["hints"], "guesses": shared["guesses"]}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="Two agents play a guessing game.")
    parser.add_argument("secret", nargs="?", default="python", choices=sorted(HINTS))
    args = parser.parse_args(argv)
    return asyncio.run(play(args.secret))


if __name__ == "__main__":
    main()
