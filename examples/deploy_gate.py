"""The deploy gate: check new code against the runs it would resume, before deploying it.

Version 1 of a refund desk starts three refunds; two wait for a person's
approval. Then two candidate versions are checked against the store:

- version 2 asks `lookup` for dollars. The waiting refunds recorded a
  `lookup` without a currency, so resuming them would fail: the gate blocks.
- version 3 makes the same change behind `ctx.patched("usd")`: the waiting
  refunds keep their old path and new refunds take the new one, so the gate
  lets it through.

    python examples/deploy_gate.py

The command line does the same: `stalwart deploy check --app shop_v2.py
--store URL` exits 1 when something blocks.
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

import stalwart as sw
from stalwart.deploy import DeployReport, check_deploy


# -- version 1: what the running refunds were started on ------------------------
@sw.policy(name="lookup")
async def lookup_v1(ctx: sw.Context, order: str) -> dict[str, Any]:
    return {"order": order, "amount": 120}


@sw.policy(name="refund")
async def refund_v1(ctx: sw.Context, order: str) -> str:
    info = await lookup_v1(order=order)
    approved = await ctx.wait_for("approve", prompt=f"refund {info['amount']}?")
    return "refunded" if approved else "kept"


# -- the candidates: lookup takes a currency ---------------------------------------
@sw.policy(name="lookup")
async def lookup_v2(ctx: sw.Context, order: str, currency: str = "EUR") -> dict[str, Any]:
    return {"order": order, "amount": 120, "currency": currency}


@sw.policy(name="refund")
async def refund_v2(ctx: sw.Context, order: str) -> str:
    info = await lookup_v2(order=order, currency="USD")
    approved = await ctx.wait_for("approve", prompt=f"refund {info['amount']}?")
    return "refunded" if approved else "kept"


@sw.policy(name="refund")
async def refund_v3(ctx: sw.Context, order: str) -> str:
    if await ctx.patched("usd"):
        info = await lookup_v2(order=order, currency="USD")
    else:
        info = await lookup_v2(order=order)
    approved = await ctx.wait_for("approve", prompt=f"refund {info['amount']}?")
    return "refunded" if approved else "kept"


async def start_on_v1(url: str) -> None:
    async with sw.Runner(url, policies=[refund_v1, lookup_v1]) as runner:
        for i in range(3):
            await runner.start(refund_v1, order=f"A-{i}", run_id=f"refund-{i}")
        async with asyncio.timeout(30):  # until all three wait for their approval
            while {r.status for r in await runner.list_runs()} != {"suspended"}:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        await runner.signal("refund-0", "approve", True)
        await runner.outcome("refund-0")


async def main(url: str) -> dict[str, DeployReport]:
    await start_on_v1(url)
    reports = {
        "v2": await check_deploy(url, [refund_v2, lookup_v2]),
        "v3": await check_deploy(url, [refund_v3, lookup_v2]),
    }
    for version, report in reports.items():
        print(f"{version}: {report}\n")
    return reports


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(main(f"sqlite:///{folder}/shop.db"))
