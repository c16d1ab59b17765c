"""A rolling deploy: runs stay with the code they started on; the gate moves
the ones the new code can continue; nothing is stranded in silence.

Version 1 of an order desk serves; three orders wait for an approval.
Version 2 reviews large orders instead of pricing them, so it cannot
continue a large order version 1 started, and it can continue a small one.

1. The gate (in CI) replays the waiting orders against version 2 and clears
   the one it can continue (`check_deploy(..., clear=True, version="v2")`).
2. Version 2's worker comes up beside version 1's and becomes the latest:
   a new order goes to it; a large order approved now finishes on version 1.
3. Version 1 stops and is retired: the small order, cleared, finishes on
   version 2; the other large one, which only version 1 could continue, is
   stranded, and says why.

    python examples/rolling_deploy.py

The command line does the same with `stalwart worker --version`, `stalwart
deploy check --clear`, `stalwart versions set-latest | retire` and
`stalwart runs list` (docs/deploy.md).
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

import stalwart as sw
from stalwart.deploy import check_deploy
from stalwart.runner.routing import fleet_of


@sw.policy
async def price(amount: int) -> int:
    return amount


@sw.policy
async def review(amount: int) -> int:
    return amount * 2


# -- version 1 ------------------------------------------------------------------
@sw.policy(name="order")
async def order_v1(ctx: sw.Context, amount: int) -> str:
    total = await price(amount)
    approved = await ctx.wait_for("approve")
    return f"v1 {total} {approved}"


# -- version 2: large orders are reviewed ---------------------------------------
@sw.policy(name="order")
async def order_v2(ctx: sw.Context, amount: int) -> str:
    total = await (price(amount) if amount < 100 else review(amount))
    approved = await ctx.wait_for("approve")
    return f"v2 {total} {approved}"


def worker(url: str, order: Any, version: str) -> sw.Runner:
    """A serving runner of one version, as `stalwart worker --version` runs one."""
    return sw.Runner(url, policies=[order], code_version=version, serving=True, poll_interval=0.05)


async def until(client: sw.Runner, run_id: str, status: str) -> sw.RunRecord:
    """The run once it has ``status`` (read from the store, as any client would)."""
    while True:
        rec = await client.get_run(run_id)
        if rec.status == status:
            return rec
        await asyncio.sleep(0.02)


async def main(url: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with sw.Runner(url, serving=False) as client:
        v1 = worker(url, order_v1, "v1")
        await v1.open()
        for run_id, amount in (("small", 10), ("large", 500), ("larger", 900)):
            await client.enqueue(order_v1, amount, run_id=run_id)
            await until(client, run_id, "suspended")

        report = await check_deploy(url, [order_v2], finished=0, clear=True, version="v2")
        seen["gate"] = {r.run_id: (r.verdict, r.cleared_for) for r in report.runs}
        print("gate:", seen["gate"])

        async with worker(url, order_v2, "v2"):
            await client.store.set_latest("v2")
            # A worker learns the latest version at its next heartbeat (a
            # third of its lease); restarting version 1's worker here
            # skips that wait.
            await v1.close()
            v1 = worker(url, order_v1, "v1")
            await v1.open()
            await client.enqueue(order_v1, 7, run_id="new")
            seen["new version"] = (await until(client, "new", "suspended")).code_version
            await client.signal("new", "approve", "yes")
            await client.signal("large", "approve", "yes")
            seen["new"] = await sw.RunHandle(client, "new").result(timeout=30)
            seen["large"] = await sw.RunHandle(client, "large").result(timeout=30)
            print("new order:", seen["new"], "| large order:", seen["large"])

            await v1.close()  # drained: version 1 goes
            await client.store.retire_version("v1")
            await client.signal("small", "approve", "yes")
            seen["small"] = await sw.RunHandle(client, "small").result(timeout=30)
            print("small order:", seen["small"])
            fleet = await fleet_of(client.store)
            assert fleet is not None
            seen["stranded"] = fleet.stranded(await client.get_run("larger"))
            print("larger order stranded:", seen["stranded"])
            await client.cancel("larger")
    return seen


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(f"sqlite:///{tmp}/orders.db"))
