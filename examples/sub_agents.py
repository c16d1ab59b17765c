"""Sub-agents: a planner that delegates to two specialist agents, each with its tools.

An agent is a policy, so it can be another agent's tool: the planner's model
asks ``weather_expert`` and ``money_expert`` questions, each answers from its
own tools in its own loop, and the planner writes the plan. Every model and
tool call, at every depth, is a recorded step, and the specialists' tokens
count toward the planner's budget. It runs with OPENAI_API_KEY or
ANTHROPIC_API_KEY set (without one it says how to set one):

    export OPENAI_API_KEY=sk-...
    python examples/sub_agents.py "Two days in Lisbon next weekend, 300 USD to spend."
    python examples/sub_agents.py --store sqlite:///agents.db --run-id trip1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart import llm

FORECASTS = {
    ("lisbon", "saturday"): {"sky": "sunny", "high_c": 24, "rain_chance": 0.05},
    ("lisbon", "sunday"): {"sky": "showers", "high_c": 19, "rain_chance": 0.7},
    ("porto", "saturday"): {"sky": "cloudy", "high_c": 18, "rain_chance": 0.3},
    ("porto", "sunday"): {"sky": "rain", "high_c": 16, "rain_chance": 0.9},
}
RATES_TO_EUR = {"EUR": 1.0, "USD": 0.92, "GBP": 1.17, "BRL": 0.17}

NO_KEY = """\
This example calls a real model, and no API key is set. Set one of:

    export OPENAI_API_KEY=sk-...         # uses openai:gpt-4.1-mini
    export ANTHROPIC_API_KEY=sk-ant-...  # uses anthropic:claude-haiku-4-5

then run it again (or pick a model with --model provider:model)."""


@sw.policy
async def forecast(city: str, day: str) -> dict[str, Any]:
    """The weather forecast for a city on a day of the coming weekend.

    Args:
        city: The city, e.g. Lisbon.
        day: saturday or sunday.
    """
    found = FORECASTS.get((city.strip().lower(), day.strip().lower()))
    if found is None:
        raise LookupError(f"no forecast for {city} on {day}; known: Lisbon and Porto, sat/sun")
    return found


@sw.policy
async def convert(amount: float, from_currency: str, to_currency: str) -> float:
    """Convert an amount of money between currencies (EUR, USD, GBP, BRL).

    Args:
        amount: How much.
        from_currency: ISO code of the currency it is in.
        to_currency: ISO code of the currency wanted.
    """
    rates = RATES_TO_EUR
    src, dst = from_currency.upper(), to_currency.upper()
    if src not in rates or dst not in rates:
        raise ValueError(f"unknown currency; known: {', '.join(rates)}")
    return round(amount * rates[src] / rates[dst], 2)


def build_planner(
    model: Any, *, weather_model: Any = None, money_model: Any = None, budget: int | None = None
) -> llm.Agent:
    """The planner on ``model``; the specialists use ``model`` too unless given their own."""
    weather = llm.Agent(
        weather_model if weather_model is not None else model,
        name="weather_expert",
        instructions=(
            "Answers questions about the weather of the coming weekend with the forecast "
            "tool. Reply in one or two sentences with the numbers."
        ),
        tools=[forecast],
        max_rounds=6,
    )
    money = llm.Agent(
        money_model if money_model is not None else model,
        name="money_expert",
        instructions=(
            "Answers questions about money: converts amounts between currencies with the "
            "convert tool. Reply with the converted amounts."
        ),
        tools=[convert],
        max_rounds=6,
    )
    return llm.Agent(
        model,
        name="trip_planner",
        instructions=(
            "You plan short trips. Ask weather_expert about the weather and money_expert "
            "to convert the budget to the local currency (EUR), then write a day-by-day "
            "plan of a few lines that fits both. Ask them precise, self-contained questions."
        ),
        tools=[weather, money],
        max_rounds=8,
        budget=budget,
    )


async def plan(
    model: Any,
    request: str,
    *,
    weather_model: Any = None,
    money_model: Any = None,
    budget: int | None = None,
    store: str | None = None,
    run_id: str | None = None,
) -> str:
    """A trip plan for ``request``; durable when ``store`` is given."""
    planner = build_planner(
        model, weather_model=weather_model, money_model=money_model, budget=budget
    )
    async with sw.Runner(store, policies=[planner]) as runner:
        answer: str = await planner.run(request, runner=runner, run_id=run_id)
    return answer


def model_from_env(choice: str | None = None) -> Any | None:
    """The model to use: ``choice``, else one whose API key is set, else None."""
    if choice:
        return llm.model(choice)
    if os.environ.get("OPENAI_API_KEY"):
        return llm.openai("gpt-4.1-mini")
    if os.environ.get("ANTHROPIC_API_KEY"):
        return llm.anthropic("claude-haiku-4-5")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A trip planner with two sub-agents.")
    parser.add_argument(
        "request", nargs="?", default="A weekend in Lisbon, Saturday and Sunday, with 300 USD."
    )
    parser.add_argument("--model", help="provider:model, e.g. openai:gpt-4.1-mini")
    parser.add_argument("--store", help="make the run durable, e.g. sqlite:///agents.db")
    parser.add_argument("--run-id", help="name the run (starting it again resumes it)")
    parser.add_argument("--budget", type=int, help="most tokens all three agents may use")
    args = parser.parse_args(argv)
    try:
        model = model_from_env(args.model)
    except llm.MissingAPIKey as exc:
        print(f"{exc}\n\n{NO_KEY}")
        return 0
    if model is None:
        print(NO_KEY)
        return 0
    answer = plan(model, args.request, budget=args.budget, store=args.store, run_id=args.run_id)
    print(asyncio.run(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
