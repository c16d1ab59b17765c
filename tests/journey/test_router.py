"""Intent routing: a router's model picks a route, and the router runs it, durably."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import stalwart as sw
from stalwart import llm
from stalwart.journey import Journey, NoRoute, Route, Router, Step, ToolContext
from stalwart.testing import ScriptedLLM, call

ROOT = Path(__file__).resolve().parents[2]


def billing() -> llm.Agent:
    return llm.Agent(
        ScriptedLLM(["Your last invoice was 30 EUR."], name="billing_model"),
        name="billing",
        instructions="Charges, invoices and refunds.",
    )


class Stage(Enum):
    HELP = "help"


class Ticket(BaseModel):
    problem: str = ""


async def open_ticket(ctx: ToolContext, problem: str) -> str:
    """Open a ticket.

    Args:
        problem: What is wrong.
    """
    ctx.state.problem = problem
    ctx.finish()
    return "ticket opened"


def support() -> Journey[Stage, Ticket]:
    return Journey(
        ScriptedLLM(
            [
                "Which device is it?",  # the journey asks, and waits for the answer
                call("open_ticket", problem="router drops the line"),
                "Ticket opened.",
            ],
            name="support_model",
        ),
        steps={Stage.HELP: Step("Help with {problem}.", tools=[open_ticket])},
        state=Ticket,
        start=Stage.HELP,
        name="support",
    )


def desk(*script: Any, **settings: Any) -> Router:
    return Router(
        ScriptedLLM(list(script), name="desk_model"),
        routes=[
            Route(billing(), "Charges and invoices."),
            Route(support(), "Technical problems."),
        ],
        name="desk",
        **settings,
    )


def test_the_model_picks_a_route_and_the_router_returns_what_the_route_answers() -> None:
    seen: list[list[str]] = []

    def pick(observations: list[sw.Message], options: Sequence[Any]) -> sw.Message:
        seen.append([f"{o.name}: {o.description}" for o in options])
        return call("route_to_billing")

    router = desk(pick)
    assert (
        sw.Runner().run_sync(router, message="what did I pay?") == "Your last invoice was 30 EUR."
    )
    assert seen == [
        ["route_to_billing: Charges and invoices.", "route_to_support: Technical problems."]
    ]


def test_a_route_chosen_is_recorded_and_a_journey_behind_it_holds_the_conversation(
    sqlite_url: str,
) -> None:
    """On SQLite: the router asks, waits for the answer holding nothing, routes
    to the journey, and the journey goes on with the run's next messages."""
    router = desk("Is it about a bill or a technical problem?", call("route_to_support"))
    url = sqlite_url

    async def converse() -> tuple[Any, list[str], list[str]]:
        prompts: list[str] = []
        async with sw.Runner(url, policies=[router], poll_interval=0.02) as runner:
            handle = await runner.start(router, message="hello", run_id="c")
            for answer in ("my internet keeps dropping", "the router"):
                prompts.append(await _asked(runner, "c", len(prompts) + 1))
                await runner.signal("c", "message", answer)
            reply = await handle.result(timeout=30)
            names = [s.name for s in await runner.steps("c")]
        return reply, prompts, names

    reply, prompts, names = asyncio.run(converse())
    assert prompts == ["Is it about a bill or a technical problem?", "Which device is it?"]
    assert reply.text == "Ticket opened." and reply.state == {"problem": "router drops the line"}
    assert names.count("route_to_support") == 1 and names.count("support") == 1
    assert "route_to_billing" not in names and "billing" not in names


async def _asked(runner: sw.Runner, run_id: str, n: int) -> str:
    """The ``n``-th question the run asks, once it waits for the answer."""
    import json

    while True:
        run = await runner.get_run(run_id)
        assert run.status not in ("failed", "succeeded", "cancelled"), run.error
        if run.status == "suspended":
            asks = sorted(
                (s for s in await runner.steps(run_id) if s.name == "stalwart.ask"),
                key=lambda s: s.finished_at,
            )
            if len(asks) >= n:
                return str(json.loads(asks[n - 1].output or "{}")["prompt"])
        await asyncio.sleep(0.01)


def test_the_journey_gets_everything_the_user_said_before_the_choice() -> None:
    heard: list[str] = []

    @sw.policy
    async def echo(message: str) -> str:
        heard.append(message)
        return "ok"

    router = Router(
        ScriptedLLM(["Which one?", call("route_to_echo")], name="desk_model"), routes=[echo]
    )

    @sw.policy
    async def chat(ctx: sw.Context) -> tuple[str | None, str]:
        conversation = [sw.Message.user("hi")]
        first = await router.choose(ctx, conversation)
        assert first == (None, "Which one?")
        conversation.append(sw.Message.user("the echo one"))
        route, _ = await router.choose(ctx, conversation)
        assert route == "echo"
        return route, await router.start(ctx, route, conversation)

    assert sw.Runner().run_sync(chat) == ("echo", "ok")
    assert heard == ["hi\nthe echo one"]


def test_a_tool_that_is_not_a_route_is_the_models_error_and_it_chooses_again() -> None:
    errors: list[str] = []

    def second_try(observations: list[sw.Message], options: Sequence[Any]) -> sw.Message:
        errors.append(observations[-1].text)
        return call("route_to_billing")

    router = desk(call("route_to_sales"), second_try)
    assert sw.Runner().run_sync(router, message="hi") == "Your last invoice was 30 EUR."
    assert errors[0].startswith("UnknownOption: 'route_to_sales' is not an allowed option")


def test_out_of_turns_the_fallback_route_is_taken() -> None:
    router = desk(call("nothing"), call("nothing"), max_rounds=2, fallback="billing")
    assert sw.Runner().run_sync(router, message="hi") == "Your last invoice was 30 EUR."


def test_out_of_turns_without_a_fallback_the_run_fails_saying_why() -> None:
    router = desk(call("nothing"), call("nothing"), max_rounds=2)
    with pytest.raises(NoRoute, match=r"router 'desk'.*chose none of billing, support in 2 calls"):
        sw.Runner().run_sync(router, message="hi")


def test_a_router_is_checked_when_it_is_made() -> None:
    model = ScriptedLLM([])
    with pytest.raises(ValueError, match="two routes named 'billing'"):
        Router(model, routes=[billing(), billing()])
    with pytest.raises(ValueError, match="the fallback 'sales' is not one of its routes"):
        Router(model, routes=[billing()], fallback="sales")

    @sw.policy
    async def two_args(a: str, b: str) -> str:
        return a + b

    with pytest.raises(ValueError, match=r"route 'two_args'.*parameters: a, b.*argument="):
        Router(model, routes=[two_args])
    assert Router(model, routes=[Route(two_args, argument="b")]).routes["two_args"].argument == "b"
    with pytest.raises(ValueError, match="at least one route"):
        Router(model, routes=[])


def test_the_router_example_runs_offline(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "router.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "I refunded both, 60 EUR in all." in out
    # refund is exclusive: the two refunds the model asked for together ran one at a time
    assert "refund start 30.0; refund end 30.0; refund start 30.0; refund end 30.0" in out
    assert "desk:     What can I help you with: a bill, or a technical problem?" in out
    assert "I opened ticket T-1 for you." in out
    assert "route_to_support" in out
