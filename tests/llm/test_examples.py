"""The examples: without a key they say how to set one; their logic runs offline.

Each example keeps its logic in functions that take a model, so here the model
is a ``ScriptedLLM`` whose replies are small heuristics over what it is shown
(the tool results), and everything else (tools, agents, validation,
sub-agents, durability) is the example's own code.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import stalwart as sw
from stalwart import llm
from stalwart.core.message import Message
from stalwart.testing import ScriptedLLM, call

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = ["research_agent", "extract_structured", "sub_agents", "handoffs"]


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # so that recorded values can name its classes
    spec.loader.exec_module(module)
    return module


def results(observations: Sequence[Message]) -> list[Any]:
    """The values of the tool results in the last turn shown."""
    out: list[Any] = []
    for m in reversed(observations):
        if m.action_result is None:
            break
        out.insert(0, m.action_result.value)
    return out


def no_keys() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


@pytest.mark.parametrize(
    ("name", "extra"),
    [(name, []) for name in NAMES]
    + [("research_agent", ["--model", "anthropic:claude-haiku-4-5"])],
)
def test_without_a_key_an_example_says_how_to_set_one(name: str, extra: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *extra],
        capture_output=True,
        text=True,
        env=no_keys(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "export OPENAI_API_KEY=" in done.stdout
    assert "export ANTHROPIC_API_KEY=" in done.stdout
    assert done.stderr == ""


# -- research_agent ------------------------------------------------------------------


def librarian() -> ScriptedLLM:
    """Searches for the question, reads the best hit, answers with its first sentence."""

    def question(observations: Sequence[Message]) -> str:
        return next(m.text for m in observations if m.role == "user")

    def answer(observations: list[Message], options: Sequence[Any]) -> str:
        (text,) = results(observations)
        doc_id = next(
            m.action_call.arguments["doc_id"]
            for m in observations
            if m.action_call and m.action_call.name == "read"
        )
        return f"{text.split('. ')[0].rstrip('.')}. [{doc_id}]"

    return ScriptedLLM(
        [
            lambda obs, opts: call("search", query=question(obs)),
            lambda obs, opts: call("read", doc_id=results(obs)[0][0]["id"]),
            answer,
        ],
        name="librarian",
    )


async def test_the_research_agent_answers_from_its_tools(sqlite_url: str) -> None:
    example = load("research_agent")
    model = librarian()
    url = sqlite_url
    answer = await example.research(model, "When was Python 3.13 released?", store=url, run_id="q")
    assert (
        answer == "Python 3.13 was released on October 7, 2024, with an experimental "
        "free-threaded build, a new interactive interpreter and an experimental JIT "
        "compiler. [python-3-13]"
    )
    assert model.calls == 3
    # The same run id again: the finished run's answer, with no model call.
    again = await example.research(model, "When was Python 3.13 released?", store=url, run_id="q")
    assert again == answer and model.calls == 3


async def test_the_research_agents_tools() -> None:
    example = load("research_agent")
    hits = await example.search("free-threaded build")
    assert hits[0]["id"] in ("python-3-13", "python-3-14")
    with pytest.raises(KeyError, match="search first"):
        await example.read("nope")


@pytest.mark.parametrize("name", NAMES)
def test_the_model_comes_from_the_environment(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    example = load(name)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert example.model_from_env() is None
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert example.model_from_env().name == "anthropic:claude-haiku-4-5"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert example.model_from_env().name == "openai:gpt-4.1-mini"
    assert example.model_from_env("openai-responses:gpt-4.1").name == "openai:gpt-4.1"


# -- extract_structured ----------------------------------------------------------------


async def test_the_extractor_returns_a_validated_meeting_after_a_repair() -> None:
    example = load("extract_structured")
    seen: list[list[Message]] = []

    def first(observations: list[Message], options: Sequence[Any]) -> str:
        seen.append(observations)
        return '{"title": "Launch review", "attendees": []}'  # no date, no action items

    def second(observations: list[Message], options: Sequence[Any]) -> str:
        seen.append(observations)
        return (
            '{"title": "Launch review", "date": "2026-03-12", "time": "14:30", '
            '"location": "room Tejo", "attendees": [{"name": "Ana Souza", "role": "PM"}, '
            '{"name": "Ben Okafor", "role": "engineering"}, {"name": "Chloe Martin", '
            '"role": "design"}], "action_items": ["Ben sends the load test results.", '
            '"Chloe updates the onboarding screens."]}'
        )

    meeting = await example.extract(ScriptedLLM([first, second], name="m"), example.EMAIL)
    assert isinstance(meeting, example.Meeting)
    assert meeting.date == "2026-03-12"
    assert [p.name for p in meeting.attendees] == ["Ana Souza", "Ben Okafor", "Chloe Martin"]
    assert '"title": "Meeting"' in seen[0][0].text  # the schema is in the instructions
    repair = seen[1][-1].text
    assert "date: Field required" in repair and "action_items: Field required" in repair


# -- sub_agents ----------------------------------------------------------------------------


def planner_models() -> tuple[ScriptedLLM, ScriptedLLM, ScriptedLLM]:
    weather = ScriptedLLM(
        [
            [
                call("forecast", city="Lisbon", day="saturday"),
                call("forecast", city="Lisbon", day="sunday"),
            ],
            lambda obs, opts: "Saturday: {sky}, {high_c} °C. Sunday: {1[sky]}.".format(
                *results(obs), **results(obs)[0]
            ),
        ],
        name="weather_model",
    )
    money = ScriptedLLM(
        [
            call("convert", amount=300, from_currency="USD", to_currency="EUR"),
            lambda obs, opts: f"300 USD is {results(obs)[0]} EUR.",
        ],
        name="money_model",
    )
    planner = ScriptedLLM(
        [
            [
                call("weather_expert", question="Weather in Lisbon on Saturday and Sunday?"),
                call("money_expert", question="How much is 300 USD in EUR?"),
            ],
            lambda obs, opts: (
                "Plan: "
                + " ".join(m.action_result.value.text for m in obs if m.action_result is not None)
            ),
        ],
        name="planner_model",
    )
    return planner, weather, money


async def test_the_planner_delegates_to_its_sub_agents(sqlite_url: str) -> None:
    example = load("sub_agents")
    planner, weather, money = planner_models()
    plan = await example.plan(
        planner,
        "A weekend in Lisbon with 300 USD.",
        weather_model=weather,
        money_model=money,
        store=sqlite_url,
    )
    assert plan == "Plan: Saturday: sunny, 24 °C. Sunday: showers. 300 USD is 276.0 EUR."
    assert (planner.calls, weather.calls, money.calls) == (2, 2, 2)


async def test_the_planners_budget_covers_its_sub_agents() -> None:
    example = load("sub_agents")
    planner, _, money = planner_models()

    def costly(*messages: Message) -> list[Message]:
        spent = {"usage": llm.Usage(450, 50).to_dict()}
        return [dataclasses.replace(messages[0], meta=spent), *messages[1:]]

    weather = ScriptedLLM(
        [
            lambda obs, opts: costly(
                Message.call(
                    "forecast", {"city": "Lisbon", "day": "saturday"}, actor="weather_model"
                )
            ),
            lambda obs, opts: costly(Message.assistant("Sunny.", actor="weather_model")),
        ],
        name="weather_model",
    )
    agent = example.build_planner(planner, weather_model=weather, money_model=money, budget=600)
    with pytest.raises(llm.BudgetExceeded, match="agent 'trip_planner' used 1000 tokens"):
        await agent.run("A weekend in Lisbon?")
    assert planner.calls == 1  # the sub-agent's 1000 tokens stopped the planner
    with pytest.raises(ValueError, match="unknown currency"):
        await example.convert(1, "XYZ", "EUR")


# -- handoffs ------------------------------------------------------------------------------


def desk_models() -> tuple[ScriptedLLM, ScriptedLLM]:
    """Triage hands invoices to billing; billing looks the invoice up, then answers."""

    def asked(observations: Sequence[Message]) -> str:
        return [m.text for m in observations if m.role == "user"][-1]

    def route(observations: list[Message], options: Sequence[Any]) -> Any:
        if "invoice" in asked(observations):
            return call("transfer_to_billing")
        return "Triage here: how can I help?"

    def answer(observations: list[Message], options: Sequence[Any]) -> str:
        (found,) = results(observations)
        if "paid" in asked(observations):
            return f"INV-7 was paid on {found['paid_on']}."
        return f"INV-7 totals {found['total_eur']} EUR ({found['status']})."

    billing = ScriptedLLM([call("invoice", number="INV-7"), answer], name="billing_model")
    return ScriptedLLM([route], name="triage_model"), billing


async def test_the_desk_hands_invoices_to_billing_which_keeps_the_conversation(
    sqlite_url: str,
) -> None:
    example = load("handoffs")
    triage, billing = desk_models()
    desk = example.build_desk(triage, billing_model=billing)
    messages = ["What is the total of invoice INV-7?", "When was it paid?"]
    replies = await example.converse(desk, messages, store=sqlite_url, conversation="ada")
    assert replies == ["INV-7 totals 129.0 EUR (paid).", "INV-7 was paid on 2026-05-03."]
    assert (triage.calls, billing.calls) == (1, 4)  # the second turn went to billing
    async with sw.Runner(sqlite_url) as runner:
        names = [s.name for s in await runner.steps("ada")]
    assert names.count("stalwart.handoff:triage>billing") == 1


# -- fallback_model --------------------------------------------------------------------


def test_the_fallback_example_answers_from_the_backup_then_replays_without_a_request(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'fallback.db'}"
    runs = [
        subprocess.run(
            [sys.executable, str(EXAMPLES / "fallback_model.py"), "--store", store],
            capture_output=True,
            text=True,
            env=no_keys(),
            timeout=60,
            check=False,
        )
        for _ in range(2)
    ]
    for done in runs:
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0] == "answer: Paris is the capital of France."
        assert [line.split()[1:] for line in lines[1:4]] == [
            ["1", "primary", "or", "backup", "answered"],
            ["1.1", "primary", "failed:", "RateLimited"],
            ["1.2", "backup", "answered"],
        ]
        assert lines[4] == "usage of backup: 21 in, 7 out"
    # The first run was rate limited by the primary, then answered by the backup;
    # the second replayed the recorded answer.
    assert runs[0].stdout.splitlines()[-1] == "requests sent: 2"
    assert runs[1].stdout.splitlines()[-1] == "requests sent: 0"
