"""A conversation held by a real process, for the crash tests to kill.

The agent answers with the turn's question and the questions it has heard
before (its history, read back from the ledger). Each time it really runs it
appends ``<pid> <question>`` to ``served.txt`` in WORKDIR and prints
``serving <question>``; if WORKDIR holds a file ``hold-<question>``, it then
stops there (mid-turn) for the parent's SIGKILL. After each reply the process
prints ``reply <message id> <reply>``; with ``--hold-after K`` it stops after
the K-th reply (between turns).

    python chat_app.py STORE_URL WORKDIR QUESTION... [--hold-after K]
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import stalwart as sw

WORKDIR = Path(".")


@sw.policy
async def chat(question: str, history: list[sw.Message] | None = None) -> str:
    with (WORKDIR / "served.txt").open("a") as f:
        f.write(f"{os.getpid()} {question}\n")
    print(f"serving {question}", flush=True)
    if (WORKDIR / f"hold-{question}").exists():
        await asyncio.sleep(3600)
    heard = [m.text for m in history or [] if m.role == "user"]
    return f"{question} after {','.join(heard) or 'nothing'}"


async def main(url: str, questions: list[str], hold_after: int | None) -> None:
    async with sw.Runner(url, policies=[chat], poll_interval=0.02) as runner:
        thread = sw.Conversation(runner, chat, "chat")
        for i, question in enumerate(questions, 1):
            reply = await thread.send(question, message_id=f"m{i}")
            print(f"reply m{i} {reply}", flush=True)
            if hold_after == i:
                await asyncio.sleep(3600)


if __name__ == "__main__":
    args = sys.argv[1:]
    hold = None
    if "--hold-after" in args:
        at = args.index("--hold-after")
        hold = int(args[at + 1])
        del args[at : at + 2]
    WORKDIR = Path(args[1])
    asyncio.run(main(args[0], args[2:], hold))
