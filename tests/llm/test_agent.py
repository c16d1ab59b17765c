"""The ready agent: its loop, structured output, budget, sub-agents and durability.

Most tests drive the agent with ``ScriptedLLM`` (no key, no network); one runs
it on each recorded provider through the real SDKs. Replay is checked the
strict way: the run is executed again from its ledger with a fencing token that
can record nothing, so any model or tool call that would not replay fails.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

import pydantic
import pytest

import stalwart as sw
from stalwart import llm
from stalwart.core.engine.engine import Engine
from stalwart.core.message import Message, Text
from stalwart.core.policy import as_policy
from stalwart.llm._common import grouped
from stalwart.llm._compaction import SUMMARY_HEADER, transcript
from stalwart.stores import open_store
from stalwart.testing import ScriptedLLM, call

from .conftest import Replay
from .weather import KINDS, RAN, TOOLS, get_time, make_model, payload_for


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    RAN.clear()


class Forecast(pydantic.BaseModel):
    city: str
    temperature: float
    sky: str


def said(name: str, *content: str | Message, usage: tuple[int, int] = (100, 10)) -> list[Message]:
    """A reply of the model ``name`` carrying its token usage, as a provider's does."""
    out = [
        Message("assistant", name, m.parts, m.action_call, id=m.id)
        for m in (c if isinstance(c, Message) else Message.assistant(c) for c in content)
    ]
    out[0] = dataclasses.replace(out[0], meta={"usage": llm.Usage(*usage).to_dict()})
    return out


class Watcher:
    """A model that answers with ``reply(turn)`` and keeps what it was shown each time."""

    def __init__(
        self, reply: Callable[[int, list[Message]], list[Message] | str], name: str = "watcher"
    ) -> None:
        self.reply = reply
        self.name = name
        self.seen: list[list[Message]] = []

    async def __call__(
        self, ctx: sw.Context, observations: list[Message], options: Sequence[Any] = ()
    ) -> list[Message] | str:
        self.seen.append(list(observations))
        return self.reply(len(self.seen), list(observations))


async def replay_from_ledger(url: str, run_id: str, target: Any, **kwargs: Any) -> Any:
    """Execute the run again from its records only: any live step would be refused."""
    store = open_store(url)
    assert store is not None
    await store.open()
    try:
        x = Engine(run_id, store=store, fence=-1, replay=await store.load_steps(run_id))
        try:
            return await x.run_root(as_policy(target), (), kwargs)
        finally:
            assert x.live_steps == 0
    finally:
        await store.close()


# -- the loop --------------------------------------------------------------------------


async def test_the_loop_runs_tools_until_the_model_answers() -> None:
    model = ScriptedLLM(
        [
            call("get_weather", city="Paris"),
            [call("get_weather", city="Lyon"), call("get_time", timezone="Europe/Paris")],
            "Paris: 18 °C, 14:05.",
        ],
        name="planner",
    )
    agent = llm.Agent(model, instructions="Use the tools.", tools=TOOLS, name="weather")
    assert await agent.run("Weather in Paris and Lyon, and the time?") == "Paris: 18 °C, 14:05."
    assert [name for name, _ in RAN] == ["get_weather", "get_weather", "get_time"]
    assert model.calls == 3


async def test_what_the_model_sees() -> None:
    model = Watcher(
        lambda turn, seen: [call("get_time", timezone="UTC")] if turn == 1 else "It is 14:05."
    )
    agent = llm.Agent(model, instructions="Be brief.", tools=[get_time])
    prior = [Message.user("Hi"), Message.assistant("Hello!", actor="watcher")]
    assert await agent.run("What time is it?", history=prior) == "It is 14:05."
    first, second = model.seen
    assert [(m.role, m.text) for m in first] == [
        ("system", "Be brief."),
        ("user", "Hi"),
        ("assistant", "Hello!"),
        ("user", "What time is it?"),
    ]
    assert [m.id for m in first[1:3]] == [m.id for m in prior]  # the history as given
    assert second[:4] == first
    assert second[-1].action_result is not None and second[-1].action_result.value == "14:05"


async def test_errors_are_results_the_model_reads_and_recovers_from() -> None:
    model = Watcher(
        lambda turn, seen: {
            1: [call("launch_rockets"), call("get_weather", town="Paris")],
            2: [call("get_weather", city="Paris")],
        }.get(turn, "Recovered.")
    )
    agent = llm.Agent(model, tools=TOOLS)
    assert await agent.run("Weather?") == "Recovered."
    errors = [m.action_result for m in model.seen[1] if m.is_error]
    assert [e.error_type for e in errors if e] == ["UnknownOption", "InvalidArguments"]
    assert "allowed options: get_time, get_weather" in (errors[0].error_message or "")
    assert RAN == [("get_weather", {"city": "Paris", "unit": "celsius"})]


async def test_max_turns_is_a_clear_error() -> None:
    model = Watcher(lambda turn, seen: [call("get_time", timezone="UTC")])
    agent = llm.Agent(model, tools=[get_time], max_rounds=3, name="looper")
    with pytest.raises(llm.MaxRoundsExceeded) as caught:
        await agent.run("Loop forever.")
    assert len(model.seen) == 3
    assert str(caught.value) == (
        "agent 'looper' used its 3 rounds (max_rounds) without giving a final answer; "
        "its last rounds called get_time, get_time, get_time"
    )


def test_settings_are_checked_when_the_agent_is_built() -> None:
    model = ScriptedLLM([])
    with pytest.raises(ValueError, match="letters, digits"):
        llm.Agent(model, name="my agent")
    with pytest.raises(ValueError, match="several tools named get_time"):
        llm.Agent(model, tools=[get_time, get_time])
    with pytest.raises(ValueError, match="max_rounds"):
        llm.Agent(model, max_rounds=0)
    with pytest.raises(ValueError, match="budget"):
        llm.Agent(model, budget=0)


def test_the_agent_is_a_policy_with_a_question() -> None:
    agent = llm.Agent(
        ScriptedLLM([]), instructions="Finds facts on the web.\n\nMore detail.", name="finder"
    )
    spec = as_policy(agent).spec
    assert spec.name == "finder"
    assert spec.description == "Finds facts on the web."
    assert spec.parameters["properties"] == {
        "question": {
            "type": "string",
            "description": "The question or the task, with everything needed to do it.",
        }
    }  # ``history`` is for callers, not for models
    assert spec.parameters["required"] == ["question"]


# -- on a recorded provider --------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_an_agent_on_a_recorded_provider(
    kind: str, replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r = replay(
        payload_for(kind, "tool_call"),
        payload_for(kind, "parallel_tool_calls"),
        payload_for(kind, "text"),
    )
    agent = llm.Agent(make_model(kind, r), instructions="Be brief.", tools=TOOLS, name="fc")
    url = sqlite_url
    async with sw.Runner(url) as runner:
        answer = await agent.run("Weather and time in Paris?", runner=runner, run_id="a")
        steps = await runner.steps("a")
    assert answer.startswith("It is 18 °C and partly cloudy in Paris")
    assert [name for name, _ in RAN] == ["get_weather", "get_weather", "get_time"]

    bodies = [q.json() for q in r.requests]
    assert len(bodies) == 3
    for body in bodies:
        names = [t["function"]["name"] if kind == "chat" else t["name"] for t in body["tools"]]
        assert names == ["get_weather", "get_time"]
    if kind == "chat":
        assert [m["role"] for m in bodies[2]["messages"]] == [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "tool",
        ]
    elif kind == "anthropic":
        assert bodies[0]["system"] == "Be brief."
        assert [m["role"] for m in bodies[2]["messages"]] == [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
        ]
    # The run's usage, from its ledger, is the three calls' usage.
    assert llm.run_usage(steps).total_tokens > 0
    assert sum(1 for s in steps if s.name == agent.model.name) == 3
    # And the run replays from its ledger without a single live call.
    assert await replay_from_ledger(url, "a", agent, question="Weather and time in Paris?") == (
        answer
    )


# -- structured output -------------------------------------------------------------------


async def test_structured_output_with_one_repair(sqlite_url: str) -> None:
    model = ScriptedLLM(
        [
            'Here you go: {"city": "Paris", "temperature": "warm"}',
            '```json\n{"city": "Paris", "temperature": 18.5, "sky": "partly cloudy"}\n```',
        ],
        name="extractor",
    )
    agent = llm.Agent(model, instructions="Extract the forecast.", output_type=Forecast)
    url = sqlite_url
    async with sw.Runner(url) as runner:
        result = await agent.run("Paris: partly cloudy, 18.5 °C", runner=runner, run_id="x")
    assert result == Forecast(city="Paris", temperature=18.5, sky="partly cloudy")

    system = agent.system_prompt
    assert system.startswith("Extract the forecast.\n\nGive your final answer as one JSON object")
    assert json.loads(system.split("JSON schema:\n", 1)[1])["title"] == "Forecast"
    again = await replay_from_ledger(url, "x", agent, question="Paris: partly cloudy, 18.5 °C")
    assert again == result


async def test_the_repair_request_says_what_is_wrong() -> None:
    model = Watcher(
        lambda turn, seen: (
            '{"city": "Paris", "temperature": "warm"}'
            if turn == 1
            else '{"city": "Paris", "temperature": 18, "sky": "sunny"}'
        )
    )
    agent = llm.Agent(model, output_type=Forecast)
    assert await agent.run("Paris?") == Forecast(city="Paris", temperature=18, sky="sunny")
    repair = model.seen[1][-1]
    assert (repair.role, repair.actor) == ("user", "validator")
    assert "temperature: Input should be a valid number" in repair.text
    assert "sky: Field required" in repair.text


async def test_repairs_are_bounded() -> None:
    model = Watcher(lambda turn, seen: "I'd rather not say.")
    agent = llm.Agent(model, output_type=Forecast, max_repairs=1, name="stubborn")
    with pytest.raises(llm.OutputValidationError) as caught:
        await agent.run("Paris?")
    assert len(model.seen) == 2  # the answer, and one repair
    message = str(caught.value)
    assert "agent 'stubborn': the final answer does not validate against Forecast" in message
    assert "Invalid JSON" in message and "I'd rather not say." in message


# -- budget ----------------------------------------------------------------------------


def always_calls(name: str, usage: tuple[int, int]) -> ScriptedLLM:
    """A scripted model that calls get_time on every turn, with the given usage per call."""
    return ScriptedLLM(
        [lambda obs, opts: said(name, call("get_time", timezone="UTC"), usage=usage)] * 50,
        name=name,
    )


async def test_the_budget_stops_the_agent_before_its_next_call(sqlite_url: str) -> None:
    model = always_calls("spender", (100, 20))
    agent = llm.Agent(model, tools=[get_time], budget=250, name="thrifty")
    url = sqlite_url
    async with sw.Runner(url) as runner:
        with pytest.raises(llm.BudgetExceeded) as caught:
            await agent.run("Spend.", runner=runner, run_id="b")
        steps = await runner.steps("b")
    message = (
        "agent 'thrifty' used 360 tokens (300 in, 60 out), over its budget of 250; "
        "it stopped before its next model call"
    )
    assert str(caught.value) == message
    assert model.calls == 3  # 120, 240 (under 250), 360: no fourth call
    assert llm.run_usage(steps) == llm.Usage(300, 60)
    # Deterministic: a replay of the ledger stops at the same point, with no live call.
    with pytest.raises(llm.BudgetExceeded, match="used 360 tokens"):
        await replay_from_ledger(url, "b", agent, question="Spend.")


async def test_an_answer_that_crosses_the_budget_is_still_returned() -> None:
    model = ScriptedLLM([lambda o, p: said("m", "Done.", usage=(900, 100))], name="m")
    assert await llm.Agent(model, budget=10).run("Go.") == "Done."


# -- sub-agents ----------------------------------------------------------------------------


def researcher(script: list[Any], **settings: Any) -> llm.Agent:
    return llm.Agent(
        ScriptedLLM(script, name="researcher_model"),
        instructions="Looks up weather facts.",
        tools=TOOLS,
        name="researcher",
        **settings,
    )


async def test_a_sub_agent_is_a_tool(sqlite_url: str) -> None:
    child = researcher(
        [
            lambda o, p: said("researcher_model", call("get_weather", city="Paris")),
            lambda o, p: said("researcher_model", "18 °C, partly cloudy.", usage=(50, 5)),
        ]
    )
    boss = Watcher(
        lambda turn, seen: (
            said("watcher", call("researcher", question="Weather in Paris?"))
            if turn == 1
            else "Paris is at 18 °C."
        )
    )
    parent = llm.Agent(boss, instructions="Delegate research.", tools=[child, get_time])
    url = sqlite_url
    async with sw.Runner(url) as runner:
        assert await parent.run("How is Paris?", runner=runner, run_id="s") == "Paris is at 18 °C."
        steps = await runner.steps("s")

    offered = llm.tool_specs(parent.options)
    assert [s.name for s in offered] == ["researcher", "get_time"]
    assert offered[0].description == "Looks up weather facts."
    assert list(offered[0].parameters["properties"]) == ["question"]
    (result,) = [m for m in boss.seen[1] if m.action_result is not None]
    assert result.action_result is not None
    assert result.action_result.value.text == "18 °C, partly cloudy."
    assert "18 °C, partly cloudy." in result.text  # what the parent model reads
    assert RAN == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    keys = {s.key: s.name for s in steps}
    assert keys == {
        "1": "watcher",
        "1#1": "researcher",  # the sub-agent is one step...
        "1#1.1": "researcher_model",  # ...whose model and tool calls are its children
        "1#1.1#1": "get_weather",
        "1#1.2": "researcher_model",
        "2": "watcher",
    }
    # Every model call counted once: the parent's and the sub-agent's two.
    assert llm.run_usage(steps) == llm.Usage(100 + 100 + 50, 10 + 10 + 5)
    assert await replay_from_ledger(url, "s", parent, question="How is Paris?") == (
        "Paris is at 18 °C."
    )


async def test_a_sub_agents_tokens_count_toward_the_budget() -> None:
    child = researcher(
        [
            lambda o, p: said("researcher_model", call("get_time", timezone="UTC"), usage=(150, 0)),
            lambda o, p: said("researcher_model", "Noon.", usage=(150, 0)),
        ]
    )
    boss = ScriptedLLM(
        [lambda o, p: said("boss", call("researcher", question="Time?")), "Noon it is."],
        name="boss",
    )
    parent = llm.Agent(boss, tools=[child], budget=400, name="parent")
    with pytest.raises(llm.BudgetExceeded, match=r"agent 'parent' used 410 tokens"):
        await parent.run("What time is it?")


async def test_a_sub_agent_gets_only_what_is_left_of_the_budget() -> None:
    child = researcher(
        [lambda o, p: said("researcher_model", call("get_time", timezone="UTC"))] * 5
    )
    boss = ScriptedLLM(
        [lambda o, p: said("boss", call("researcher", question="Time?")), "Done."], name="boss"
    )
    parent = llm.Agent(boss, tools=[child], budget=250, name="parent")
    with pytest.raises(llm.BudgetExceeded) as caught:
        await parent.run("What time is it?")
    message = str(caught.value)
    assert message.startswith(
        "agent 'parent' stopped: its sub-agent 'researcher' ran out of budget"
    )
    # What the parent had left as its turn began: 250 (its first call's 110
    # count once the engine has run the calls it asked for).
    assert "used 330 tokens (300 in, 30 out)" in message
    assert "over the 250 tokens its caller had left of its budget" in message
    assert boss.calls == 1 and child.model.calls == 3  # 110, 220, 330 > 250: stopped


async def test_an_agent_is_an_option_of_any_loop() -> None:
    child = researcher([lambda o, p: said("researcher_model", "Sunny.")])

    @sw.policy
    async def hand_written(ctx: sw.Context) -> list[Message]:
        model = ScriptedLLM([call("researcher", question="Sky over Paris?")], name="m")
        return await ctx.call(model, observations=[Message.user("Sky?")], options=[child])

    _, result = await sw.Runner().run(hand_written)
    assert result.action_result is not None and result.action_result.value == "Sunny."


# -- context management -----------------------------------------------------------------


def conversation(seed: int) -> list[Message]:
    """A random but well-formed agent conversation: parallel calls, results out of order."""
    import random

    rng = random.Random(seed)
    messages = [Message.system("You are an agent.")]
    if rng.random() < 0.3:
        messages.append(Message.system("Another rule."))
    messages.append(Message.user("The task."))
    for turn in range(rng.randint(0, 14)):
        roll = rng.random()
        if roll < 0.15:
            messages.append(Message.user(f"Also this ({turn})."))
        elif roll < 0.3:
            messages.append(Message.assistant(f"Thinking ({turn}).", actor="m"))
        else:
            if rng.random() < 0.5:
                messages.append(Message.assistant("Let me check.", actor="m"))
            calls = [
                Message.call("tool", {"i": i}, id=f"c{turn}_{i}", actor="m")
                for i in range(rng.randint(1, 4))
            ]
            results = [Message.result(c, i) for i, c in enumerate(calls)]
            rng.shuffle(results)
            messages += calls + results
    if rng.random() < 0.5:
        messages.append(Message.assistant("Done.", actor="m"))
    return messages


def assert_well_formed(original: list[Message], kept: list[Message]) -> None:
    """What a cut conversation must keep, whatever was cut."""
    positions = {m.id: i for i, m in enumerate(original)}
    from_original = [m for m in kept if m.id in positions]
    order = [positions[m.id] for m in from_original]
    assert order == sorted(order), "order changed"
    called: set[str] = set()
    for m in kept:
        if m.action_call is not None:
            called.add(m.action_call.id)
        if m.action_result is not None:
            assert m.action_result.call_id in called, "a result without its call"
    results_of: dict[str, int] = {}
    for m in original:
        if m.action_result is not None:
            results_of[m.action_result.call_id] = results_of.get(m.action_result.call_id, 0) + 1
    kept_results = [m.action_result.call_id for m in kept if m.action_result is not None]
    for call_id in called:
        assert kept_results.count(call_id) == results_of.get(call_id, 0), "a call lost a result"
    assert [m for m in original if m.role == "system"] == [m for m in kept if m.role == "system"]
    first_user = next(m for m in original if m.role == "user")
    assert first_user in kept, "the task was dropped"
    non_system = [m for m in kept if m.role != "system"]
    assert non_system[0].role == "user"  # Anthropic wants a user message first
    grouped(kept)  # and the providers' grouping accepts it


@pytest.mark.parametrize("seed", range(200))
def test_a_window_never_splits_a_call_from_its_results(seed: int) -> None:
    original = conversation(seed)
    for last in (1, 2, 3, 5, 8, 100):
        kept = llm.window(original, last)
        assert_well_formed(original, kept)
        assert all(m in kept for m in original[-last:]), "the window lost a recent message"
        assert llm.window(kept, last) == kept  # a window of a window is the same window


@pytest.mark.parametrize("seed", range(200))
async def test_compaction_never_splits_a_call_from_its_results(seed: int) -> None:
    original = conversation(seed)
    asked: list[list[Message]] = []

    async def summarize(observations: list[Message], *, model: Any = None) -> list[Message]:
        asked.append(observations)
        return [Message.assistant("The agent called tool a few times.", actor="m")]

    compaction = llm.Compaction(max_messages=8, keep_last=3)
    kept = await compaction(list(original), summarize)
    if len(original) <= 8:
        assert kept == original and not asked
        return
    notes = [m for m in kept if m.actor == "summary"]
    if asked:
        (note,) = notes
        assert note.text == SUMMARY_HEADER + "The agent called tool a few times."
        assert asked[0][0].text == compaction.prompt
    assert_well_formed(original, kept)
    assert all(m in kept for m in original[-3:])
    summarized = [m for m in original if m not in kept]
    for m in summarized:  # what was dropped is in the transcript the model summarized
        if m.action_call is not None:
            assert f"called {m.action_call.name}" in asked[0][1].text


async def test_an_agent_with_a_window_sends_only_the_window() -> None:
    model = Watcher(
        lambda turn, seen: [call("get_time", timezone="UTC")] if turn < 6 else "Enough."
    )
    agent = llm.Agent(model, instructions="Rules.", tools=[get_time], context=llm.Window(4))
    assert await agent.run("Keep checking the time.") == "Enough."
    for seen in model.seen:
        assert [m.text for m in seen[:2]] == ["Rules.", "Keep checking the time."]
        assert len(seen) <= 2 + 4
        grouped(seen)
    assert len(model.seen[-1]) == 6


async def test_an_agent_compacts_with_its_summarizer(sqlite_url: str) -> None:
    summarizer = ScriptedLLM(
        [lambda o, p: said("summarizer", "Checked the time 3 times: 14:05.", usage=(30, 3))],
        name="summarizer",
    )
    model = Watcher(
        lambda turn, seen: (
            said("watcher", call("get_time", timezone="UTC"))
            if turn < 5
            else said("watcher", "It is 14:05.")
        )
    )
    compaction = llm.Compaction(max_messages=7, keep_last=2, model=summarizer)
    agent = llm.Agent(model, instructions="Rules.", tools=[get_time], context=compaction)
    url = sqlite_url
    async with sw.Runner(url) as runner:
        assert await agent.run("Time?", runner=runner, run_id="c") == "It is 14:05."
        steps = await runner.steps("c")
    assert summarizer.calls >= 1
    last = model.seen[-1]
    assert [m.role for m in last[:3]] == ["system", "user", "user"]
    assert last[2].text.startswith("Summary of the conversation so far:\nChecked the time")
    assert len(last) <= 7
    assert llm.run_usage(steps) == llm.Usage(
        5 * 100 + summarizer.calls * 30, 5 * 10 + summarizer.calls * 3
    )
    assert await replay_from_ledger(url, "c", agent, question="Time?") == "It is 14:05."


def test_compaction_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="say when to compact"):
        llm.Compaction()
    with pytest.raises(ValueError, match="max_messages must exceed"):
        llm.Compaction(max_messages=5, keep_last=4)


async def test_compaction_by_tokens_uses_the_recorded_usage() -> None:
    compaction = llm.Compaction(max_input_tokens=1000, keep_last=1)
    small = said("m", "ok", usage=(900, 1))
    big = said("m", "ok", usage=(1200, 1))
    base = [Message.system("s"), Message.user("task"), Message.assistant("a", actor="m")]
    assert not compaction.due(base + small)
    assert compaction.due(base + big)
    assert compaction.due(base + small + big) and not compaction.due(base + big + small)


def test_the_transcript_shows_calls_and_results() -> None:
    c = Message.call("get_time", {"timezone": "UTC"}, actor="m")
    text = transcript(
        [
            Message.user("Time?"),
            c,
            Message.result(c, "x" * 5000),
            Message("assistant", "m", (Text("14:05"),)),
        ]
    )
    assert text.splitlines()[0] == "user (user): Time?"
    assert text.splitlines()[1] == '[m called get_time({"timezone": "UTC"})]'
    assert text.splitlines()[2].endswith("[... 1000 more characters]")
    assert text.splitlines()[3] == "assistant (m): 14:05"
