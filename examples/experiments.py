"""Datasets and experiments: 50 cases drawn from recorded support runs, run
against two new prompts, and the two compared.

The model is scripted (``stalwart.testing.ScriptedLLM``). The recorded agent
looks an order up and answers "It has shipped."; 60 runs are recorded, of
which the dataset keeps the 50 e-mail tickets that are not about refunds
(a tag and a predicate). Prompt A is told to give the delivery date, prompt
B to be brief; each experiment runs every case as a durable child run and
scores it against the recorded answer.

    python examples/experiments.py [STORE_URL]

With ``STALWART_MODEL_LOG=FILE`` every answer the new models give live is
appended to FILE (``a`` or ``b``, a line), and with
``STALWART_PAUSE_AFTER=N`` the program holds still inside prompt A's N-th
answer: the crash test kills it there and runs it again.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import stalwart as sw
from stalwart import llm
from stalwart.evals import (
    Dataset,
    DatasetStore,
    ExperimentReport,
    Outcome,
    Score,
    Selection,
    cases_from_runs,
    experiment,
)
from stalwart.testing import Reply, ScriptedLLM, call

RECORDED = 60


@sw.policy
async def lookup(order: str) -> str:
    """The shipping status of an order.

    Args:
        order: The order number.
    """
    return f"order {order}: shipped, arrives Monday"


def _order(observations: list[sw.Message]) -> str:
    question = next(m.text for m in observations if m.role == "user")
    return question.rsplit(" ", 1)[-1].rstrip("?")


def _answered(prompt: str, reply: str) -> str:
    """A new model's answer, noted outside the process when asked."""
    log, pause = os.environ.get("STALWART_MODEL_LOG"), os.environ.get("STALWART_PAUSE_AFTER")
    if log:
        with open(log, "a") as f:
            f.write(prompt + "\n")
            f.flush()
            os.fsync(f.fileno())
        with open(log) as f:
            made = sum(line.strip() == prompt for line in f)
        if prompt == "a" and pause and made == int(pause):
            print("paused", flush=True)
            time.sleep(3600)
    return reply


def _agent(name: str, instructions: str, answer: Reply) -> tuple[ScriptedLLM, llm.Agent]:
    model = ScriptedLLM([lambda obs, _: call("lookup", order=_order(obs)), answer], name="model")
    return model, llm.Agent(model, instructions=instructions, tools=[lookup], name=name)


old_model, support = _agent("support", "Answer shipping questions.", "It has shipped.")
model_a, support_a = _agent(
    "support_a",
    "Answer shipping questions. Always give the delivery date.",
    lambda obs, _: _answered("a", f"Order {_order(obs)} has shipped, arrives Monday."),
)
model_b, support_b = _agent(
    "support_b",
    "Answer shipping questions in three words.",
    lambda obs, _: _answered("b", "It has shipped."),
)


def gives_date(old: Outcome, new: Outcome) -> Score:
    """A scorer of our own: an answer that names the day is better."""
    was, now = "Monday" in old.text, "Monday" in new.text
    if was == now:
        return Score("same", "both name the day" if now else "neither names the day")
    return Score("better" if now else "worse", "names the day" if now else "lost the day")


def still_shipped(old: Outcome, new: Outcome) -> bool:
    """A scorer of our own: the answer still says the order has shipped."""
    return "shipped" in new.text


def _ticket(i: int) -> tuple[str, dict[str, str]]:
    """The i-th recorded question and its tags: every twelfth came by chat,
    and every twelfth from the sixth on asks for a refund."""
    channel = "chat" if i % 12 == 11 else "email"
    about = "a refund for" if i % 12 == 5 else "where is"
    return f"Hello, {about} order A{i}?", {"channel": channel}


async def record(runner: sw.Runner) -> None:
    """The history: 60 runs of the recorded agent (kept if already there)."""
    for i in range(RECORDED):
        question, tags = _ticket(i)
        await runner.run(support, question, run_id=f"ticket-{i}", tags=tags)


def not_refunds(inputs: dict[str, object], outcome: Outcome) -> bool:
    """The predicate: keep the tickets that do not ask for a refund."""
    return "refund" not in str(inputs["args"])


async def main(store: str) -> tuple[ExperimentReport, ExperimentReport]:
    async with sw.Runner(store, policies=[support, support_a, support_b]) as runner:
        await record(runner)
        cases = await cases_from_runs(
            runner, Selection(policy="support", tags={"channel": "email"}, where=not_refunds)
        )
        datasets = DatasetStore(runner.store)
        tickets = await datasets.save(Dataset("tickets", cases, description="e-mail tickets"))
        print(f"dataset {tickets.name} v{tickets.version}: {len(tickets)} cases")
        reports = []
        for name, pol in (("prompt-a", support_a), ("prompt-b", support_b)):
            report = await experiment(
                runner, tickets, pol, name=name, scorers=[gives_date, still_shipped], concurrency=4
            )
            reports.append(report)
            print(report.table())
    a, b = reports
    better = max(reports, key=lambda r: (r.count("better"), r.pass_rate))
    print(f"A: {a.count('better')} better, {a.pass_rate:.0%} passed")
    print(f"B: {b.count('better')} better, {b.pass_rate:.0%} passed")
    print(f"better prompt: {better.policy}")
    print(f"new model calls in this process: {model_a.calls} (A), {model_b.calls} (B)")
    return a, b


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///experiments.db"))
