"""The guessing game of two_agents.py, durable: two runs that talk through mailboxes.

`two_agents.py` keeps two `asyncio.Queue`s in the shared store, which a
durable run cannot record: a queue is a live object, not data, and a run
resumed in another process could not have it back. Here each agent is a
durable run of its own, and they talk the durable way, through their
mailboxes: a node sends with `ctx.send(run_id, payload)` and receives with
`await ctx.receive()`. A send is delivered exactly once and a receive is
recorded, so either run can be killed and resumed without a message lost or
read twice; a run waiting for mail is suspended and holds no memory.

The agents' heuristics are two_agents.py's, unchanged: only how they talk differs.

    python examples/pocketflow/two_agents_mailboxes.py python
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import stalwart as sw
from stalwart.core.policy import current_context
from stalwart.flow import AsyncFlow, AsyncNode

# two_agents.py beside this file, loaded by path (an example runs from
# anywhere): its agents' heuristics, Hinter.exec_async and Guesser.exec_async.
_spec = importlib.util.spec_from_file_location(
    "two_agents_in_memory", Path(__file__).with_name("two_agents.py")
)
assert _spec is not None and _spec.loader is not None
queued = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(queued)


def context() -> sw.Context:
    ctx = current_context()
    if ctx is None:
        raise RuntimeError("this game runs as durable runs (it talks through mailboxes)")
    return ctx


class Hinter(queued.Hinter):  # type: ignore[misc,name-defined]
    async def prep_async(self, shared: dict[str, Any]) -> tuple[str | None, str, int]:
        # The hinter speaks first; after that it answers each guess.
        guess = (await context().receive()).payload if shared["hints"] else None
        return guess, shared["secret"], len(shared["hints"])

    async def post_async(self, shared: dict[str, Any], prep_res: Any, hint: str | None) -> str:
        await context().send(shared["peer"], hint)  # None ends the game
        if hint is None:
            won = prep_res[0] == prep_res[1]
            print("hinter: Correct!" if won else f"hinter: It was {prep_res[1]}.")
            return "done"
        shared["hints"].append(hint)
        print(f"hinter: {hint}")
        return "continue"


class Guesser(queued.Guesser):  # type: ignore[misc,name-defined]
    async def prep_async(self, shared: dict[str, Any]) -> tuple[list[str], list[str]] | None:
        hint = (await context().receive()).payload
        if hint is None:
            return None  # the game is over
        shared["hints"].append(hint)
        return list(shared["hints"]), list(shared["guesses"])

    async def post_async(self, shared: dict[str, Any], prep_res: Any, guess: str | None) -> str:
        if guess is None:
            return "done"
        shared["guesses"].append(guess)
        print(f"guesser: Is it {guess}?")
        await context().send(shared["peer"], guess)
        return "continue"


def agent(node: AsyncNode, name: str) -> AsyncFlow:
    node - "continue" >> node
    node - "done" >> queued.Done()
    flow = AsyncFlow(start=node)
    flow.name = name  # type: ignore[attr-defined]
    return flow


async def play(secret: str, url: str, game: str = "game") -> dict[str, Any]:
    hinter, guesser = f"{game}-hinter", f"{game}-guesser"
    async with sw.Runner(url) as runner:
        # Both runs exist before either sends: the guesser first, so the
        # hinter's first hint has a mailbox to go to.
        g = await runner.start(
            agent(Guesser(), "guesser"),
            shared={"peer": hinter, "hints": [], "guesses": []},
            run_id=guesser,
        )
        h = await runner.start(
            agent(Hinter(), "hinter"),
            shared={"peer": guesser, "secret": secret, "hints": []},
            run_id=hinter,
        )
        hinted, guessed = await asyncio.gather(h.result(), g.result())
    return {"secret": secret, "hints": hinted["hints"], "guesses": guessed["guesses"]}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="Two durable agents play a guessing game.")
    parser.add_argument("secret", nargs="?", default="python", choices=sorted(queued.HINTS))
    parser.add_argument("--db", help="the SQLite file (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.db:
        return asyncio.run(play(args.secret, f"sqlite:///{args.db}"))
    with tempfile.TemporaryDirectory() as folder:
        return asyncio.run(play(args.secret, f"sqlite:///{folder}/game.db"))


if __name__ == "__main__":
    main()
