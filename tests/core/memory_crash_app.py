"""A run that keeps a note with the ``remember`` tool on a real store (a
SQLite file, a PostgreSQL schema), for the memory crash test to kill.

The store is the one the URL names, with one addition: after each memory write
commits it appends ``<pid> <key>`` to ``puts.txt`` (outside the process) and
prints ``written <key>``. With ``hold=written`` the program then holds still,
so the parent's SIGKILL lands after the write and before the tool's step is
recorded; with ``hold=recorded`` it holds just after the tool step returned
(recorded). ``recover`` resumes the run and prints its answer.

    python memory_crash_app.py STORE_URL WORKDIR run|recover written|recorded
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import stalwart as sw
from stalwart import llm
from stalwart.core.memory import MemoryRecord
from stalwart.stores import open_store
from stalwart.stores.base import Store

USER = ("users", "u-42")
NOTE = "allergic to peanuts"
WORKDIR = Path(".")
HOLD = ""


def watched(url: str) -> Store:
    """The store at ``url``, telling the world after each memory write."""
    base: Any = type(open_store(url))

    class Watched(base):  # type: ignore[misc, valid-type]
        async def memory_put(self, record: MemoryRecord) -> None:
            await super().memory_put(record)
            with open(WORKDIR / "puts.txt", "a") as f:
                f.write(f"{os.getpid()} {record.key}\n")
                f.flush()
                os.fsync(f.fileno())
            print(f"written {record.key}", flush=True)
            if HOLD == "written":
                await asyncio.sleep(3600)  # the parent kills us here

    store: Store = Watched.from_url(url)
    return store


@sw.policy
async def keep_note(note: str) -> list[str]:
    with llm.memory_scope(USER):
        await llm.remember(note=note)
        print("recorded", flush=True)
        if HOLD == "recorded":
            await asyncio.sleep(3600)  # the parent kills us here
        found: list[str] = await llm.recall(query=note)
    return found


async def main() -> None:
    global WORKDIR, HOLD
    url, workdir, action, hold = sys.argv[1:5]
    WORKDIR = Path(workdir)
    HOLD = hold if action == "run" else ""
    store = watched(url)
    policies = [keep_note, llm.remember, llm.recall]
    async with sw.Runner(store, policies=policies, poll_interval=0.05) as runner:
        if action == "run":
            handle = await runner.start(keep_note, note=NOTE, run_id="m")
        else:
            await runner.recover()
            handle = sw.RunHandle(runner, "m")
        answer = await handle.result(timeout=60)
    print("answer " + json.dumps(answer), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
