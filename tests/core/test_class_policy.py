"""Class policies: ``@sw.policy`` on a class with an ``async def __call__``.

The class is the policy: its schema is ``__call__``'s (hints and docstring,
without ``self`` and the context), every call gets a fresh instance that
reaches its context as ``self.ctx`` (typed by a ``ctx: App`` annotation) as
well as by an injected parameter, and a class that cannot be a policy is
refused with its name when it is decorated.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import stalwart as sw
from stalwart.core.policy import same_policy
from stalwart.testing import ScriptedLLM, call

from ._support import Recorder

searched: list[str] = []


@sw.policy
async def web_search(query: str) -> list[str]:
    """Search the web."""
    searched.append(query)
    return [f"{query}: found"]


@sw.policy
class Researcher:
    """Researches a question with the application's search."""

    ctx: App  # written above ``class App``: resolved when the policy first runs

    async def __call__(self, question: str, depth: int = 1) -> str:
        """Answer a question.

        Args:
            question: What to find out.
            depth: How many searches to make.
        """
        found = [await self.ctx.search(query=f"{question} {i}") for i in range(depth)]
        return f"{type(self.ctx).__name__}@{self.ctx.step_key}: {found[-1][0]}"


class App(sw.Context):
    search = web_search
    research = Researcher


@sw.policy
async def ask(ctx: App, question: str) -> str:
    return await ctx.research(question=question, depth=2)


def test_the_schema_is_the_calls_without_self_and_context() -> None:
    assert isinstance(Researcher, sw.Policy)
    assert Researcher.name == "researcher"
    assert Researcher.description == "Answer a question."
    schema = Researcher.parameters
    assert list(schema["properties"]) == ["question", "depth"]
    assert schema["required"] == ["question"]
    assert schema["properties"]["question"] == {
        "type": "string",
        "description": "What to find out.",
    }
    assert Researcher.validate({"question": "q", "depth": "3"}) == {"question": "q", "depth": 3}


async def test_self_ctx_is_the_application_context_of_the_call() -> None:
    hook = Recorder()
    answer = await sw.Runner(hooks=[hook]).run(ask, question="python")
    # self.ctx is an App (declared in the class body), the context of step "1"
    assert answer == "App@1: python 1: found"
    assert [(k, n) for k, n, _ in hook.of("before")] == [
        ("", "ask"),
        ("1", "research"),
        ("1.1", "search"),
        ("1.2", "search"),
    ]


async def test_an_injected_context_and_self_ctx_are_the_same_object() -> None:
    @sw.policy
    class Both:
        async def __call__(self, ctx: App, x: int) -> bool:
            return self.ctx is ctx and isinstance(ctx, App)

    assert list(Both.parameters["properties"]) == ["x"]
    assert Both.ctx_class is App
    assert await sw.Runner().run(Both, x=1) is True


async def test_each_call_has_its_own_instance_so_concurrent_calls_keep_their_context() -> None:
    @sw.policy
    class Slow:
        ctx: sw.Context

        async def __call__(self, tag: str) -> str:
            mine = self.ctx
            await asyncio.sleep(0.01)  # the other call runs meanwhile
            assert self.ctx is mine
            return f"{tag}@{self.ctx.step_key}"

    @sw.policy
    async def both(ctx: sw.Context) -> list[str]:
        return list(await asyncio.gather(Slow(tag="a"), Slow(tag="b")))

    assert await sw.Runner().run(both) == ["a@1", "b@2"]


async def test_a_constructor_taking_the_context_gets_it() -> None:
    @sw.policy
    class PocketStyle:
        def __init__(self, ctx: sw.Context) -> None:
            self.given = ctx

        async def __call__(self) -> bool:
            return self.given is self.ctx

    assert await sw.Runner().run(PocketStyle) is True


async def test_a_model_calls_a_class_policy_offered_as_an_option() -> None:
    @sw.policy
    async def agent(ctx: App) -> list[sw.Message]:
        llm = ScriptedLLM([call("researcher", question="why", depth="1")])
        return await ctx.call(llm, observations=[], options=[Researcher])

    out = await sw.Runner().run(agent)
    assert out[-1].action_result.value == "App@1#1: why 0: found"  # "1" coerced to an int


async def test_a_class_policy_runs_durably_and_replays(sqlite_url: str) -> None:
    url = sqlite_url
    searched.clear()
    async with sw.Runner(url) as runner:
        first = await runner.run(ask, question="durable", run_id="r1")
    async with sw.Runner(url) as runner:
        again = await runner.run(ask, question="durable", run_id="r1")
        steps = await runner.store.load_steps("r1")
    assert first == again == "App@1: durable 1: found"
    assert searched == ["durable 0", "durable 1"]  # the second runner executed nothing
    assert {k: s.name for k, s in steps.items()} == {
        "1": "research",
        "1.1": "search",
        "1.2": "search",
    }


def test_settings_and_a_policy_given_again() -> None:
    class Tool:
        async def __call__(self, q: str) -> str:
            return q

    named = sw.policy(name="lookup", retries=2)(Tool)
    assert (named.name, named.retries, named.named) == ("lookup", 2, True)
    assert sw.policy(named) is named
    assert sw.policy(named, timeout=5).timeout == 5
    assert same_policy(sw.policy(Tool), sw.policy(Tool))  # one class, one policy


def test_a_class_without_an_async_call_is_refused_with_its_name() -> None:
    class NoCall:
        pass

    class SyncCall:
        def __call__(self, q: str) -> str:
            return q

    with pytest.raises(TypeError, match=r"NoCall .* has no __call__"):
        sw.policy(NoCall)
    with pytest.raises(TypeError, match=r"SyncCall .*__call__ is not async"):
        sw.policy(SyncCall)


def test_a_constructor_that_needs_arguments_is_refused_with_the_way_out() -> None:
    class Configured:
        def __init__(self, model: Any, temperature: float) -> None:
            self.model = model

        async def __call__(self, q: str) -> str:
            return q

    with pytest.raises(
        TypeError, match=r"needs model, temperature.*sw.policy\(Configured\(...\)\)"
    ):
        sw.policy(Configured)
