"""Counterfactual forks: 20 recorded support runs, each forked at its second
model step with new instructions, and scored old against new.

The model is scripted (``stalwart.testing.ScriptedLLM``): the first agent
looks an order up twice and answers without a date; the new one, told to
give the delivery date, answers with it after its second step. Everything
before the second model step is replayed from the ledger: the new model is
called once per fork (its count is printed), never for the prefix.

    python examples/counterfactual.py [STORE_URL]

With ``STALWART_MODEL_LOG=FILE`` every live call of the new model is
appended to FILE, and with ``STALWART_PAUSE_AFTER=N`` the program holds
still after the N-th: the crash test kills it there and runs it again.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import replace

import stalwart as sw
from stalwart import llm
from stalwart.evals import Outcome, Score, Selection, called_tool, counterfactual, tokens_used
from stalwart.testing import ScriptedLLM, call

CASES = 20


@sw.policy
async def lookup(order: str) -> str:
    """The shipping status of an order.

    Args:
        order: The order number.
    """
    return f"order {order}: shipped, arrives Monday"


@sw.policy
async def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order number.
    """
    return f"order {order}: refunded"


def _order(observations: list[sw.Message]) -> str:
    question = next(m.text for m in observations if m.role == "user")
    return question.rsplit(" ", 1)[-1].rstrip("?")


def _priced(reply: sw.Message | str, observations: list[sw.Message]) -> sw.Message:
    """A reply with usage, as a provider reports it: a token a word."""
    msg = sw.Message.assistant(reply) if isinstance(reply, str) else reply
    shown = sum(len(m.text.split()) + 10 for m in observations)
    usage = {"input_tokens": shown, "output_tokens": len(msg.text.split()) + 5}
    return replace(msg, meta={"usage": usage})


old_model = ScriptedLLM(
    [
        lambda obs, _: _priced(call("lookup", order=_order(obs)), obs),
        lambda obs, _: _priced(call("lookup", order=_order(obs)), obs),
        lambda obs, _: _priced("It has shipped.", obs),
    ],
    name="model",
)
support = llm.Agent(
    old_model, instructions="Answer shipping questions.", tools=[lookup, refund], name="support"
)


def _logged(reply: str) -> str:
    """The new model's second reply, noted outside the process when asked."""
    log, pause = os.environ.get("STALWART_MODEL_LOG"), os.environ.get("STALWART_PAUSE_AFTER")
    if log:
        with open(log, "a") as f:
            f.write("call\n")
            f.flush()
            os.fsync(f.fileno())
        with open(log) as f:
            made = len(f.readlines())
        if pause and made == int(pause):
            print("paused", flush=True)
            time.sleep(3600)
    return reply


new_model = ScriptedLLM(
    [
        lambda obs, _: _priced(call("lookup", order=_order(obs)), obs),
        lambda obs, _: _priced(_logged(f"Order {_order(obs)} has shipped, arrives Monday."), obs),
    ],
    name="model",
)
support_v2 = llm.Agent(
    new_model,
    instructions="Answer shipping questions. Always give the delivery date.",
    tools=[lookup, refund],
    name="support_v2",
)


def gives_date(old: Outcome, new: Outcome) -> Score:
    """A scorer of our own: an answer that names the day is better."""
    was, now = "Monday" in old.text, "Monday" in new.text
    if was == now:
        return Score("same", "both name the day" if now else "neither names the day")
    return Score("better" if now else "worse", "names the day" if now else "lost the day")


async def record(runner: sw.Runner) -> None:
    """The history: 20 runs of the first agent (kept if already there)."""
    for i in range(CASES):
        await runner.run(support, f"Where is order A{i}?", run_id=f"ticket-{i}")


async def main(store: str) -> None:
    async with sw.Runner(store, policies=[support]) as runner:
        await record(runner)
    async with sw.Runner(store, policies=[support_v2]) as runner:
        report = await counterfactual(
            runner,
            Selection(policy="support"),
            at="2nd model step",
            policy=support_v2,
            scorers=[gives_date, called_tool("refund"), tokens_used],
            experiment="dates",
            concurrency=4,
        )
    print(report.table())
    print(f"new model calls in this process: {new_model.calls}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///counterfactual.db"))
