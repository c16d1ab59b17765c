"""A program the claim tests run in a real child process and kill with SIGKILL:
it starts a run that never finishes there, says so, and waits to be killed.

    python claim_app.py STORE_URL RUN_ID
"""

from __future__ import annotations

import asyncio
import os
import sys

import stalwart as sw

BLOCK = "CLAIM_APP_BLOCK"


@sw.policy
async def left_behind() -> str:
    if os.environ.get(BLOCK):
        print("started", flush=True)
        await asyncio.Event().wait()  # until the kill
    return "finished"


async def main(url: str, run_id: str) -> None:
    os.environ[BLOCK] = "1"
    async with sw.Runner(url, policies=[left_behind]) as runner:
        await runner.start(left_behind, run_id=run_id)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
