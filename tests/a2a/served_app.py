"""What the A2A tests serve, with ``stalwart a2a serve --app tests/a2a/served_app.py:NAME``.

Each step that does work appends a line to the file named by ``A2A_LOG``
(one line an execution), so a test counts executions from outside the
server process, across a SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import stalwart as sw
from stalwart import llm
from stalwart.testing import ScriptedLLM, call


def _log(line: str) -> None:
    path = os.environ.get("A2A_LOG")
    if path:
        with Path(path).open("a") as f:
            f.write(line + "\n")
            f.flush()


def _mark(n: int) -> None:
    marker = os.environ.get("A2A_MARK")
    if marker:
        Path(marker).write_text(str(n))


@sw.policy
async def shout_step(text: str) -> str:
    """One recorded step: the text in capitals."""
    _log(f"shout {text}")
    return text.upper()


@sw.policy
async def shout(ctx: sw.Context, question: str) -> str:
    """Shouts the question back.

    Args:
        question: What to shout.
    """
    ctx.emit("shouting")
    return await shout_step(question) + "!"


@sw.policy
async def greeter(ctx: sw.Context, question: str) -> str:
    """Asks for a name, then greets.

    Args:
        question: Anything; the greeter asks who you are.
    """
    name = await ctx.ask(f"Who is asking about {question!r}?")
    return f"Hello, {name}: {await shout_step(str(question))}"


@sw.policy
async def slow_step(n: int) -> int:
    """A step that marks its start, then takes a while (the test kills the server here)."""
    _log(f"slow {n} started")
    _mark(n)
    await asyncio.sleep(float(os.environ.get("A2A_SLOW", "0.1")))
    _log(f"slow {n} done")
    return n


@sw.policy
async def counter(ctx: sw.Context, question: str) -> str:
    """Counts in three slow steps.

    Args:
        question: A label for the count.
    """
    total = 0
    for n in range(1, 4):
        total += await slow_step(n)
    return f"{question}: {total}"


@sw.policy
async def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    _log(f"weather {city}")
    return f"sunny in {city}"


# The project's scripted model: no live LLM. It calls the weather tool once, then answers.
forecaster = llm.Agent(
    ScriptedLLM([call("weather", city="Paris"), "It is sunny in Paris."]),
    instructions="You tell the weather.",
    tools=[weather],
    name="forecaster",
)


@sw.policy(approval=True)
async def refund(amount: int) -> str:
    """Refund an amount, once a person approves.

    Args:
        amount: How much to refund.
    """
    _log(f"refund {amount}")
    return f"refunded {amount}"


# Its tool call waits for a person's approval: an A2A task in input-required.
cashier = llm.Agent(
    ScriptedLLM([call("refund", amount=30), lambda seen, options: f"Done: {seen[-1].text}"]),
    instructions="You refund customers.",
    tools=[refund],
    name="cashier",
)


def _recall(seen: list[sw.Message], options: object) -> str:
    said = [m.text for m in seen if m.role == "user"]
    return f"you said {' then '.join(said)}"


# Served with --conversation: each contextId a conversation, its history the agent's.
chatbot = llm.Agent(ScriptedLLM([_recall] * 4), instructions="You remember.", name="chatbot")


@sw.policy
async def confirm(ctx: sw.Context, what: str) -> str:
    """Ask the person to confirm.

    Args:
        what: What to confirm.
    """
    return str(await ctx.ask(f"Confirm the {what}?"))


concierge = llm.Agent(
    ScriptedLLM(
        [call("confirm", what="booking"), lambda seen, options: f"Booked: {seen[-1].text}"]
    ),
    instructions="You book things.",
    tools=[confirm],
    name="concierge",
)


@sw.policy
async def writer(ctx: sw.Context, question: str) -> str:
    """Writes its answer as a model streams one: in pieces, then whole.

    Args:
        question: What to write about.
    """
    pieces = ["Once ", "upon ", f"a {question}."]
    for piece in pieces:
        ctx.stream_text(piece)
    await shout_step(question)  # a step, so the pieces go out before the end
    return "".join(pieces)


@sw.policy
async def broken(question: str) -> str:
    """Always fails.

    Args:
        question: Ignored.
    """
    raise LookupError(f"nothing known about {question}")


@sw.policy
async def interviewer(ctx: sw.Context, question: str) -> str:
    """Asks two questions, each a wait for the same signal.

    Args:
        question: The topic of the interview.
    """
    name = await ctx.ask("Your name?")
    city = await ctx.ask("Your city?")
    return f"{question}: {name} from {city}"


@sw.policy
async def pause(seconds: float) -> None:
    await asyncio.sleep(seconds)


@sw.policy
async def panel(ctx: sw.Context, question: str) -> str:
    """Asks two questions, each a wait for the same signal, thinking a while between.

    Args:
        question: The topic of the interview.
    """
    name = await ctx.ask("Your name?")
    await pause(0.5)
    city = await ctx.ask("Your city?")
    return f"{question}: {name} from {city}"
