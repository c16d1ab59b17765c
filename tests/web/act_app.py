"""The application the action tests fork, re-run and answer runs of.

Run as ``python -m tests.web.act_app <store-url>`` it is a worker process on
that store (it prints ``worker ready``); imported, it gives the policies.
The steps write what they did to files (``STALWART_ACT_DIR``), so a test can
tell a step executed from one replayed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import stalwart as sw

HOSTILE = "<script>alert('pwned')</script><img src=x onerror=alert('img')>"

REFUND_SCHEMA = {
    "type": "object",
    "required": ["amount"],
    "properties": {
        "amount": {"type": "integer", "minimum": 1},
        "note": {"type": "string"},
    },
    "additionalProperties": False,
}


def _dir() -> Path:
    return Path(os.environ["STALWART_ACT_DIR"])


@sw.policy
async def price(item: str) -> int:
    """The price of ``item``; counts its executions in ``price.log``."""
    with (_dir() / "price.log").open("a") as log:
        log.write(item + "\n")
    return len(item)


@sw.policy
async def stock(item: str) -> int:
    """How many ``item`` are in stock: fails while ``stock.txt`` is missing."""
    path = _dir() / "stock.txt"
    if not path.exists():
        raise FileNotFoundError(f"no stock file for {item}")
    return int(path.read_text())


@sw.policy
async def order(ctx: sw.Context, item: str, qty: int) -> str:
    """Price ``item``, check the stock, and say what the order costs."""
    each = await ctx.call(price, item=item)
    have = await ctx.call(stock, item=item)
    return f"{qty} x {item} at {each} each, {have} in stock"


@sw.policy
async def refund(ctx: sw.Context, order_id: str) -> str:
    """Ask how much to refund, the answer's shape given as a JSON schema."""
    answer = await ctx.ask(
        f"Refund order {order_id}: how much?", signal="refund", schema=REFUND_SCHEMA
    )
    return f"refunded {answer['amount']} on {order_id}"


@sw.policy
async def notes(item: str) -> str:
    """Notes on ``item``: longer than a page carries in a fork form."""
    return f"{item}: " + "lorem ipsum " * 400


@sw.policy
async def describe(ctx: sw.Context, item: str) -> str:
    """The first words of the notes on ``item``."""
    return str(await ctx.call(notes, item=item))[:24]


def branching_schema(levels: int) -> dict[str, Any]:
    """A schema whose every level offers two choices leading to the next:
    a value that fits none would be tried along 2**levels paths."""
    defs: dict[str, Any] = {
        f"L{i}": {"anyOf": [{"$ref": f"#/$defs/L{i + 1}"}, {"$ref": f"#/$defs/L{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"L{levels}"] = {"type": "string"}
    return {"$ref": "#/$defs/L0", "$defs": defs}


@sw.policy
async def costly_ask(ctx: sw.Context) -> str:
    """A wait whose recorded schema is costly to check (data, as any schema)."""
    answer = await ctx.ask("anything?", signal="answer", schema=branching_schema(40))
    return str(answer)


POLICIES = [price, stock, order, refund, notes, describe, costly_ask]


async def work(url: str) -> None:
    """Be a worker until SIGTERM."""
    print("worker ready", flush=True)
    await sw.Runner(url, policies=POLICIES, poll_interval=0.1).serve()


if __name__ == "__main__":
    asyncio.run(work(sys.argv[1]))
