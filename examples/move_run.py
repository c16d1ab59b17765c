"""Move a waiting run from a laptop's SQLite file to another store.

    python examples/move_run.py --store sqlite:///laptop.db --to postgresql://localhost/prod

A refund, started on a laptop, looks the order up and then waits for a
manager's approval. The run is moved, its recorded step and its wait
included, to the store the servers share (``stalwart runs move`` does the
same from a shell). The approval is sent there, a worker there finishes the
run without looking the order up again, and the laptop's copy says where the
run went.
"""

from __future__ import annotations

import argparse
import asyncio

import stalwart as sw
from stalwart.stores import open_store
from stalwart.timetravel import move_run, moved_to

RUN = "refund-A-17"


@sw.policy
async def look_up(order: str) -> float:
    print(f"looking up {order}")
    return 42.0


@sw.policy
async def refund(ctx: sw.Context, order: str) -> str:
    amount = await ctx.call(look_up, order)
    approver = await ctx.wait_for("approval")
    return f"refunded {amount} on {order}, approved by {approver}"


async def main(store: str, to: str) -> None:
    async with sw.Runner(store, policies=[refund, look_up], inline_sleep=0) as laptop:
        await laptop.start(refund, "A-17", run_id=RUN)
        for _ in range(600):  # until it waits for the approval (a few ms)
            if (await laptop.get_run(RUN)).status == "suspended":
                break
            await asyncio.sleep(0.05)
        print("on the laptop:", (await laptop.get_run(RUN)).status)

    source, target = open_store(store), open_store(to)
    await source.open()
    await target.open()
    try:
        moved = await move_run(source, target, RUN)
        print(f"moved {moved.run_id} ({len(moved.runs)} run)")
        left = await source.get_run(RUN)
        assert left is not None
        print("the laptop's copy:", left.status, "- moved to", moved_to(left))
    finally:
        await source.close()
        await target.close()

    async with sw.Runner(to, policies=[refund, look_up]) as server:
        await server.signal(RUN, "approval", "dana")
        await server.recover()
        print(await server.outcome(RUN))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="sqlite:///laptop.db", help="where the run starts")
    parser.add_argument("--to", default="sqlite:///server.db", help="where it moves")
    args = parser.parse_args()
    asyncio.run(main(args.store, args.to))
