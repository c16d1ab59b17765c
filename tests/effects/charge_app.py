"""A worker the crash test runs in a real child process and kills with SIGKILL.

    python charge_app.py STORE_URL API_URL run|recover RUN_ID [answered]

``run`` starts ``checkout``, whose step ``charge`` pays through an
:class:`~stalwart.effects.IdempotentClient`; with ``answered``, the step
prints ``charged <id>`` once the API answered and then never returns, so the
kill lands after the charge and before the step is recorded. ``recover``
resumes the run and prints ``result <json>``.
"""

from __future__ import annotations

import asyncio
import json
import sys

import stalwart as sw
from stalwart.effects import IdempotentClient

API = ""
STALL = False  # hang after the API answered, before the step returns


@sw.policy
async def charge(ctx: sw.Context, order: str, cents: int) -> str:
    async with IdempotentClient(base_url=API, timeout=30) as client:
        reply = await client.post("/charges", json={"order": order, "cents": cents})
        reply.raise_for_status()
    charge_id = str(reply.json()["id"])
    print(f"charged {charge_id}", flush=True)
    if STALL:
        await asyncio.Event().wait()
    return charge_id


@sw.policy
async def checkout(ctx: sw.Context, order: str) -> str:
    charge_id = await charge(order, cents=1999)
    return f"{order} paid by {charge_id}"


async def main() -> None:
    global API, STALL
    url, API, action, run_id = sys.argv[1:5]
    STALL = action == "run" and sys.argv[5:] == ["answered"]
    async with sw.Runner(url, poll_interval=0.05, policies=[checkout]) as runner:
        if action == "run":
            handle = await runner.start(checkout, order="order-42", run_id=run_id)
        else:
            await runner.recover()
            handle = sw.RunHandle(runner, run_id)
        print("result " + json.dumps(await handle.result(timeout=60)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
