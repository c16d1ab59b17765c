"""Tag runs by customer, then find, count and prune one customer's runs.

    python examples/tagged_runs.py --store sqlite:///tagged.db

Each support ticket runs as its own run, tagged with the customer it is for
(and the customer's tier); a triage run spawns one child run a ticket, and
the children inherit the triage's tags. An operator then finds runs by tag
exactly as ``stalwart runs list --tag customer=c-42`` would.
"""

from __future__ import annotations

import argparse
import asyncio

import stalwart as sw
from stalwart.core.tags import decode_tags


@sw.policy
async def answer(ticket: str) -> str:
    return f"answered {ticket}"


@sw.policy
async def triage(ctx: sw.Context, tickets: list[str]) -> list[str]:
    return list(await ctx.map(answer, tickets))


async def main(store: str) -> None:
    async with sw.Runner(store, policies=[answer, triage]) as runner:
        acme = {"customer": "c-42", "tier": "gold"}
        await runner.run(triage, ["T-1", "T-2"], run_id="triage-acme", tags=acme)
        await runner.run(answer, "T-3", run_id="ticket-3", tags={"customer": "c-7"})

        for run in reversed(await runner.list_runs(tags={"customer": "c-42"})):
            shown = " ".join(f"{k}={v}" for k, v in decode_tags(run.tags).items())
            print(f"{run.id}: {run.status} [{shown}]")
        counts = await runner.store.count_runs(tags={"tier": "gold"})
        print("gold runs:", sum(n for by_queue in counts.values() for n in by_queue.values()))
        print("pruned c-7:", await runner.prune(keep=0, tags={"customer": "c-7"}))
        print("left:", sorted(r.id for r in await runner.list_runs()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="sqlite:///tagged.db")
    asyncio.run(main(parser.parse_args().store))
