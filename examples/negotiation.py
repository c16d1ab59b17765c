"""Two agents negotiate a price by messages between their runs, offline.

A buyer and a seller are two durable runs on one SQLite file. Each is a
heuristic policy (no model, no key): the seller opens high and concedes a
little each round, the buyer opens low and raises a little, and they meet
when the offers cross. They talk only through their mailboxes:
``ctx.send(to, offer, kind=...)`` and ``ctx.receive(sender=..., kind=...)``.
Each run suspends while it waits for the other (holding no memory or
worker), and every message is a recorded step: run the program again on the
same file and the negotiation is read back from the ledger, not repeated.

    python examples/negotiation.py [--store sqlite:///negotiation.db]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import stalwart as sw


@sw.policy
async def seller(ctx: sw.Context, buyer: str, ask: float, floor: float) -> dict[str, object]:
    """Concede a quarter of the gap each round, never below ``floor``."""
    offer = ask
    await ctx.send(buyer, {"price": offer}, kind="offer")
    while True:
        mail = await ctx.receive(sender=buyer)
        if mail.kind == "accept":
            return {"sold_at": mail.payload["price"]}
        if mail.kind == "walk away":
            return {"sold_at": None}
        bid = mail.payload["price"]
        if offer - bid < 1.0 and bid >= floor:  # close enough: take the buyer's word
            await ctx.send(buyer, {"price": bid}, kind="accept")
            return {"sold_at": bid}
        offer = round(max(floor, offer - 0.25 * (offer - bid)), 2)
        await ctx.send(buyer, {"price": offer}, kind="offer")


@sw.policy
async def buyer(ctx: sw.Context, seller: str, bid: float, limit: float) -> dict[str, object]:
    """Raise by a quarter of the gap each round, never above ``limit``;
    walk away after 20 rounds (a negotiation that goes nowhere ends)."""
    for rounds in range(1, 21):
        mail = await ctx.receive(sender=seller)
        if mail.kind == "accept":
            return {"bought_at": mail.payload["price"], "rounds": rounds}
        ask = mail.payload["price"]
        if ask <= limit and ask - bid < 1.0:  # close enough: accept the ask
            await ctx.send(seller, {"price": ask}, kind="accept")
            return {"bought_at": ask, "rounds": rounds}
        bid = round(min(limit, bid + 0.25 * (ask - bid)), 2)
        await ctx.send(seller, {"price": bid}, kind="offer")
    await ctx.send(seller, {"price": bid}, kind="walk away")
    return {"bought_at": None, "rounds": 20}


async def main(store: str) -> None:
    async with sw.Runner(store, policies=[seller, buyer], poll_interval=0.02) as runner:
        b = await runner.start(buyer, "seller", 60.0, 100.0, run_id="buyer")
        s = await runner.start(seller, "buyer", 150.0, 80.0, run_id="seller")
        print("seller:", await s.result(timeout=30))
        print("buyer:", await b.result(timeout=30))
        sent = [x for x in await runner.steps("buyer") if x.name == "stalwart.send"]
        print(f"the buyer sent {len(sent)} messages, each recorded once")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="a store URL (default: a temporary SQLite file)")
    args = parser.parse_args()
    if args.store:
        asyncio.run(main(args.store))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main(f"sqlite:///{Path(tmp) / 'negotiation.db'}"))
