"""Two agents on one store, each in its own process, for the crash tests to kill.

``alice`` sends the numbers 1..N to ``bob`` and collects his replies; ``bob``
answers each with ten times it. Each process starts (or resumes) its own run
and prints its result as JSON. With ``--die-after-deliver K`` the process's
store kills the process (SIGKILL) right after its K-th delivery into a
mailbox, before the send is recorded: the resumed sender must deliver under
the same id, which the store keeps once.

    python agents_app.py STORE_URL alice|bob N [--die-after-deliver K]
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart.stores import open_store


@sw.policy
async def bob(ctx: sw.Context, n: int) -> list[int]:
    got: list[int] = []
    for _ in range(n):
        mail = await ctx.receive(kind="offer")
        got.append(mail.payload)
        print(f"bob got {mail.payload}", flush=True)
        await ctx.send(mail.sender, mail.payload * 10, kind="answer")
    return got


@sw.policy
async def alice(ctx: sw.Context, n: int) -> list[int]:
    answers: list[int] = []
    for i in range(1, n + 1):
        await ctx.send("bob", i, kind="offer")
        mail = await ctx.receive(sender="bob", kind="answer")
        answers.append(mail.payload)
        print(f"alice got {mail.payload}", flush=True)
    return answers


async def main(url: str, who: str, n: int, die_after: int | None) -> None:
    store = open_store(url)
    if die_after is not None:
        deliver = store.deliver_mail
        count = 0

        async def deliver_then_die(
            run_id: str, envelope: str, uid: str, wakes: Sequence[str]
        ) -> Any:
            nonlocal count
            status = await deliver(run_id, envelope, uid, wakes)
            count += 1
            if count >= die_after:
                await store.close()  # the delivery is committed: now die unrecorded
                os.kill(os.getpid(), signal.SIGKILL)
            return status

        store.deliver_mail = deliver_then_die  # type: ignore[method-assign]
    async with sw.Runner(store, policies=[alice, bob], poll_interval=0.02) as runner:
        target = alice if who == "alice" else bob
        handle = await runner.start(target, n=n, run_id=who)
        print("result " + json.dumps(await handle.result(timeout=60)), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    flag = "--die-after-deliver"
    die = int(args[args.index(flag) + 1]) if flag in args else None
    asyncio.run(main(args[0], args[1], int(args[2]), die))
