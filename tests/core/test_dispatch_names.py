"""Options by name: ``options=["web_search"]`` and tool specs.

A name is looked up in the application context the calling step runs under
(its bound policies, by attribute or by policy name), then among the
policies the runner was given. An unknown name given by the program is an
error at the call; a model calling a tool that is not offered reads an
error result, and the run goes on.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import stalwart as sw
from stalwart import Message
from stalwart.testing import ScriptedLLM, call


@sw.policy
async def web_search(query: str) -> str:
    """Search the web.

    Args:
        query: What to search for.
    """
    return f"results for {query}"


@sw.policy
async def weather(city: str) -> str:
    """Today's weather.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


@sw.policy(name="headlines")
async def news(topic: str) -> str:
    """Today's headlines.

    Args:
        topic: The topic.
    """
    return f"headlines on {topic}"


class App(sw.Context):
    search = web_search  # bound, and so named, as ``search``
    weather = weather
    news = news  # its name was given: it stays ``headlines``

    def helper(self) -> str:  # a method is not an option
        return "no"


def reply_of(out: list[Message]) -> list[str]:
    return [m.text for m in out if m.action_result is not None]


def test_a_name_is_resolved_against_the_contexts_bound_policies() -> None:
    llm = ScriptedLLM(
        [[call("search", query="py"), call("weather", city="Oslo"), call("headlines", topic="x")]]
    )

    @sw.policy
    async def agent(ctx: App) -> list[Message]:
        out: list[Message] = await ctx.call(
            llm, observations=[Message.user("go")], options=["search", "weather", "headlines"]
        )
        return out

    assert reply_of(sw.Runner().run_sync(agent)) == [
        "results for py",
        "sunny in Oslo",
        "headlines on x",  # found by the policy's own name (its attribute is ``news``)
    ]


def test_the_model_is_shown_the_policies_the_names_stand_for() -> None:
    shown: list[list[str]] = []

    def look(observations: list[Message], options: Any) -> str:
        shown.append([o.name for o in options])
        return "ok"

    llm = ScriptedLLM([look])

    @sw.policy
    async def agent(ctx: App) -> Any:
        spec = sw.ToolSpec("weather", "what the program calls it", {})
        return await ctx.call(llm, observations=[], options=["news", spec])

    sw.Runner().run_sync(agent)
    assert shown == [["headlines", "weather"]]  # by attribute, and by a spec's name


def test_names_record_as_the_policies_do_so_a_run_replays_either_way(sqlite_url: str) -> None:
    """S1/S5: a step offered names records the same identity as one offered
    the policies, so code that switches from one to the other replays its runs."""
    url = sqlite_url

    def agent_with(options: list[Any]) -> Any:
        llm = ScriptedLLM([[call("search", _id="c1", query="py")], "done"])

        @sw.policy(name="agent")
        async def agent(ctx: App) -> str:
            history = [Message.user("go")]
            while True:
                out = await ctx.call(llm, observations=history, options=options)
                history += out
                if not any(m.is_action_call for m in out):
                    return out[-1].text

        return agent

    assert sw.Runner(url).run_sync(agent_with([App.search]), run_id="objects") == "done"
    assert sw.Runner(url).run_sync(agent_with(["search"]), run_id="names") == "done"

    async def identities(run_id: str) -> list[tuple[str, str, str]]:
        async with sw.Runner(url, serving=False) as runner:
            return sorted((s.key, s.name, s.args_hash) for s in await runner.steps(run_id))

    objects, names = asyncio.run(identities("objects")), asyncio.run(identities("names"))
    assert objects == names
    assert [k for k, _, _ in names] == ["1", "1#1", "2"]


def test_a_name_the_runner_was_given_resolves_without_a_context() -> None:
    llm = ScriptedLLM([[call("weather", city="Rome")]])

    @sw.policy
    async def agent(ctx: sw.Context) -> list[Message]:
        out: list[Message] = await ctx.call(llm, observations=[], options=["weather"])
        return out

    runner = sw.Runner(policies=[weather])
    assert reply_of(runner.run_sync(agent)) == ["sunny in Rome"]


def test_an_unknown_name_is_an_error_at_the_call_naming_what_exists() -> None:
    llm = ScriptedLLM(["never"])

    @sw.policy
    async def agent(ctx: App) -> Any:
        return await ctx.call(llm, observations=[], options=["weather", "helper"])

    with pytest.raises(sw.UnknownOption) as caught:
        sw.Runner().run_sync(agent)
    text = str(caught.value)
    assert "options[1] names 'helper'" in text
    assert "the context App binds headlines, news, search, weather" in text
    assert "step 1" not in text and "(root)" in text  # the step that made the call
    assert llm.calls == 0


def test_a_model_calling_a_tool_not_offered_reads_an_error_and_the_run_goes_on() -> None:
    llm = ScriptedLLM(
        [[call("delete_everything"), call("weather", city="Oslo")], "fine"], name="model"
    )

    @sw.policy
    async def agent(ctx: App) -> list[str]:
        out: list[Message] = await ctx.call(llm, observations=[], options=["weather"])
        return [m.text for m in out if m.action_result is not None]

    assert sw.Runner().run_sync(agent) == [
        "UnknownOption: 'delete_everything' is not an allowed option; allowed options: weather",
        "sunny in Oslo",
    ]
