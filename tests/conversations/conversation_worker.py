"""A worker process serving two conversations' agents, for the crash tests to kill.

The test process is the client: it opens the threads with ``queue=`` (it
only enqueues) and awaits the replies; this process executes the threads'
runs and the turns. Files in ``$CHAT_WORKDIR`` steer it:

* ``chat`` (followups queued) appends ``<pid> <question>`` to ``served.txt``
  and, while ``hold-<question>`` exists, stops there (mid-turn) for SIGKILL.
* ``helper`` (an ``llm.Agent`` on a scripted model, followups injected)
  calls ``lookup``, which waits for ``release`` (so a follow-up arrives while
  the turn is answered), then ``hold``, which prints ``holding`` and waits
  while ``hold`` exists; then it answers with every user message it saw.
  Each time the model really runs, it appends ``<pid> <the user messages it
  is shown>`` to ``seen.txt``.

    python conversation_worker.py STORE_URL
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import stalwart as sw
from stalwart.conversations import conversation_policies
from stalwart.llm import Agent
from stalwart.testing import ScriptedLLM
from stalwart.testing.scripted import call


def _workdir() -> Path:
    return Path(os.environ["CHAT_WORKDIR"])


async def _while_exists(path: Path) -> None:
    while await asyncio.to_thread(path.exists):
        await asyncio.sleep(0.02)


@sw.policy
async def chat(question: str, history: list[sw.Message] | None = None) -> str:
    with (_workdir() / "served.txt").open("a") as f:
        f.write(f"{os.getpid()} {question}\n")
    print(f"serving {question}", flush=True)
    await _while_exists(_workdir() / f"hold-{question}")
    heard = [m.text for m in history or [] if m.role == "user"]
    return f"{question} after {','.join(heard) or 'nothing'}"


@sw.policy
async def lookup(what: str) -> str:
    """Look something up (waits for the test's ``release`` file)."""
    print(f"looking up {what}", flush=True)
    while not await asyncio.to_thread((_workdir() / "release").exists):
        await asyncio.sleep(0.02)
    return f"found {what}"


@sw.policy
async def hold() -> str:
    """Think it over (waits while the test's ``hold`` file exists)."""
    print("holding", flush=True)
    await _while_exists(_workdir() / "hold")
    return "thought"


def _saw(observations: list[sw.Message]) -> list[str]:
    """The user's messages the model is shown, noted in ``seen.txt`` with the pid."""
    said = [m.text for m in observations if m.role == "user"]
    with (_workdir() / "seen.txt").open("a") as f:
        f.write(f"{os.getpid()} {' + '.join(said)}\n")
    return said


def _lookup(observations: list[sw.Message], options: object) -> sw.Message:
    _saw(observations)
    return call("lookup", what="flights")


def _hold(observations: list[sw.Message], options: object) -> sw.Message:
    _saw(observations)
    return call("hold")


def _answer(observations: list[sw.Message], options: object) -> str:
    return "answer to " + " + ".join(_saw(observations))


helper = Agent(
    ScriptedLLM([_lookup, _hold, _answer]),
    tools=[lookup, hold],
    name="helper",
)

#: What the worker serves (and all it may execute: S13).
policies = [*conversation_policies(chat), *conversation_policies(helper, followups="inject")]


async def main(url: str) -> None:
    async with sw.Runner(url, policies=policies, poll_interval=0.02, lease=1.0) as runner:
        print("worker ready", flush=True)
        await runner.serve()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
