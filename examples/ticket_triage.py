"""Triage a support ticket, wait for a human, and survive a restart in between.

Run it (no API key): ``python examples/ticket_triage.py [--store sqlite:///triage.db]``

What it shows:
- a policy's type hints declare the types its results may be read back as
  (``Triage`` here); a type no hint names is declared with
  ``sw.register_type`` (``Priority``, inside a dict the tool returns);
- the run waits for an approval holding nothing; the first runner is closed
  (a deploy), and a new one, given the policies it may resume
  (``Runner(policies=[...])``), delivers the approval and finishes the run,
  which comes back as the same typed objects.
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import stalwart as sw


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


# Returned inside a plain dict, so no hint names it: declare it once.
sw.register_type(Priority)


@dataclass
class Triage:
    ticket: str
    priority: Priority
    team: str
    approved_by: str | None = None


@sw.policy
async def classify(text: str) -> dict[str, Any]:
    """Pick a priority and a team (a heuristic stands in for a model)."""
    urgent = any(word in text.lower() for word in ("down", "outage", "urgent"))
    return {"priority": Priority.HIGH if urgent else Priority.LOW, "team": "platform"}


@sw.policy
async def triage(ctx: sw.Context, ticket: str, text: str) -> Triage:
    found = await classify(text)
    draft = Triage(ticket, found["priority"], found["team"])
    if draft.priority is Priority.HIGH:
        ctx.emit(f"{ticket}: high priority for {draft.team}, waiting for approval")
        draft.approved_by = await ctx.ask(f"Page {draft.team} for {ticket}?", signal="approve")
    return draft


async def main(store: str) -> Triage:
    run_id = "ticket-1042"
    async with sw.Runner(store) as first:
        handle = await first.start(triage, ticket="T-1042", text="Checkout is down", run_id=run_id)
        async for event in handle.events():
            if isinstance(event, sw.Emitted) and isinstance(event.value, str):
                print("event:", event.value)
                break
    print("first runner closed; the run waits in the store:", await _status(store, run_id))

    # A worker (serving=True): it resumes runs it did not start, here the
    # triage the first runner left waiting. Signalling alone executes nothing.
    async with sw.Runner(store, policies=[triage], serving=True) as second:
        await second.signal(run_id, "approve", "dana@oncall")
        result: Triage = await sw.RunHandle(second, run_id).result(timeout=30)
    print("resumed and finished:", result)
    return result


async def _status(store: str, run_id: str) -> str:
    async with sw.Runner(store, serving=False) as client:
        return (await client.get_run(run_id)).status


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="a store URL (default: a fresh SQLite file)")
    args = parser.parse_args()
    store = args.store or f"sqlite:///{Path(tempfile.mkdtemp()) / 'triage.db'}"
    asyncio.run(main(store))
