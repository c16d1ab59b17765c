"""Experiments and a counterfactual for the inspector's experiments pages.

:func:`seed` records answers, then runs two experiments over one dataset
(``v1``: wrong on one case; ``v2``: right there, failing another) and forks
the recorded runs at their lookup with a hostile result
(counterfactual ``hostile``). A case id, a reason and a run's result hold
markup, which the pages must show as text.
"""

from __future__ import annotations

import stalwart as sw
from stalwart.evals import Dataset, DatasetCase, DatasetStore, counterfactual, experiment
from stalwart.timetravel import Replace

from .web_app import HOSTILE

QUESTIONS = {"q-a1": "where is A1", "q-a2": "where is A2", "q-refund": "a refund please",
             HOSTILE: "what is <b>bold</b>"}  # fmt: skip


@sw.policy
async def answer_v1(question: str) -> str:
    """Wrong about A2."""
    return "wrong" if "A2" in question else question.upper()


@sw.policy
async def answer_v2(question: str) -> str:
    """Right about A2; refuses refunds, with markup in its error."""
    if "refund" in question:
        raise ValueError(HOSTILE)
    return question.upper()


@sw.policy
async def lookup(question: str) -> str:
    return f"found {question}"


@sw.policy
async def support(ctx: sw.Context, question: str) -> str:
    found = await ctx.call(lookup, question)
    return f"answer: {found}"


POLICIES = [answer_v1, answer_v2, lookup, support]


async def seed(url: str) -> None:
    async with sw.Runner(url, policies=POLICIES) as runner:
        cases = [DatasetCase(k, [q], expected=q.upper()) for k, q in QUESTIONS.items()]
        tickets = await DatasetStore(runner.store).save(Dataset("tickets", cases))
        await experiment(runner, tickets, answer_v1, name="v1")
        await experiment(runner, tickets, answer_v2, name="v2")
        for i in range(2):
            await runner.run(support, f"where is B{i}", run_id=f"s-{i}")
        await counterfactual(
            runner, ["s-0", "s-1"], at="1", replace=Replace(result=HOSTILE), experiment="hostile"
        )
