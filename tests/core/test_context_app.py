"""The context: an application class binding policies, and the engine's services."""

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

import stalwart as sw
from stalwart import Message
from stalwart.core import codec
from stalwart.testing import ScriptedLLM, call

from ._support import Recorder, collect


@sw.policy
async def web_search(query: str, max_results: int = 2) -> list[str]:
    """Search the web.

    Args:
        query: What to search for.
        max_results: How many results.
    """
    return [f"{query}-{i}" for i in range(max_results)]


llm = sw.policy(
    ScriptedLLM(
        [
            [call("web_search", query="python", max_results="1")],
            lambda obs, _: f"answer: {obs[-1].action_result.value[0]}",
        ],
        name="llm",
    )
)


class App(sw.Context):
    """What our policies can reach, typed, so an IDE completes it."""

    web_search = web_search
    llm = llm


@sw.policy
async def research(ctx: App, question: str) -> str:
    assert isinstance(ctx, App)
    found = await ctx.web_search(query=question)
    history = [Message.user(question)]
    while True:
        actions = await ctx.llm(observations=history, options=[ctx.web_search, web_search])
        history += actions
        if not any(m.is_action_call for m in actions):
            return f"{found[0]} / {actions[-1].text}"


async def test_an_application_context_binds_policies_as_attributes() -> None:
    assert App.web_search is web_search  # on the class, the policy itself
    hook = Recorder()
    answer = await sw.Runner(hooks=[hook]).run(research, question="py")
    assert answer == "py-0 / answer: python-0"
    # every bound call went through the engine as a step of the run
    assert [(k, n) for k, n, _ in hook.of("before")] == [
        ("", "research"),
        ("1", "web_search"),
        ("2", "llm"),
        ("2#1", "web_search"),
        ("3", "llm"),
    ]


async def test_a_bound_policy_can_be_offered_as_an_option() -> None:
    @sw.policy
    async def agent(ctx: App) -> str:
        history = [Message.user("q")]
        history += await ctx.llm(observations=history, options=[ctx.web_search])
        return history[-1].text

    assert await sw.Runner().run(agent) == '["python-0"]'


async def test_options_given_as_bound_attributes_are_recorded_by_name() -> None:
    @sw.policy
    async def agent(ctx: App) -> None:
        await ctx.llm(observations=[Message.user("q")], options=[ctx.web_search, web_search])

    hook = Recorder()
    await sw.Runner(hooks=[hook]).run(agent)
    (_, name, arguments) = hook.of("before")[1]
    assert name == "llm"
    assert arguments["options"] == ["<policy web_search>", "<policy web_search>"]
    codec.dumps(arguments)  # what a durable run records


def test_the_application_context_never_appears_in_the_schema() -> None:
    assert research.ctx_class is App
    assert list(research.parameters["properties"]) == ["question"]


async def test_policies_with_different_context_classes_mix() -> None:
    @sw.policy
    async def plain(ctx: sw.Context) -> str:
        return type(ctx).__name__

    @sw.policy
    async def app(ctx: App) -> str:
        return type(ctx).__name__ + "/" + await plain()

    assert await sw.Runner().run(app) == "App/Context"


async def test_a_bound_attribute_is_bound_to_its_context() -> None:
    keys: list[str] = []

    @sw.policy
    async def note(ctx: sw.Context) -> None:
        keys.append(ctx.step_key)

    class Notes(sw.Context):
        write = note  # (a class body cannot see the function's `note` as `note = note`)

    @sw.policy
    async def child(ctx: Notes) -> None:
        await ctx.write()
        await ctx.write()

    @sw.policy
    async def root(ctx: Notes) -> None:
        await ctx.write()
        await ctx.call(child)

    await sw.Runner().run(root)
    assert keys == ["1", "2.1", "2.2"]


# -- services in memory ----------------------------------------------------------------
async def test_identity_of_the_run_and_the_step() -> None:
    @sw.policy
    async def child(ctx: sw.Context) -> tuple[str, str]:
        return (ctx.run_id, ctx.step_key)

    @sw.policy
    async def root(ctx: sw.Context) -> list[tuple[str, str]]:
        return [(ctx.run_id, ctx.step_key), await child(), await child()]

    assert await sw.Runner().run(root, run_id="r-1") == [("r-1", ""), ("r-1", "1"), ("r-1", "2")]


async def test_recorded_services_give_values_and_take_keys() -> None:
    @sw.policy
    async def root(ctx: sw.Context) -> list[Any]:
        now = await ctx.now()
        uid = await ctx.uuid()
        rnd = await ctx.random()
        await ctx.sleep(0)
        changed = await ctx.patched("new-prompt")
        after = await ctx.call(key_of)
        return [now, uid, rnd, changed, after]

    now, uid, rnd, changed, after = await sw.Runner().run(root)
    assert isinstance(now, float) and now > 1_600_000_000
    assert isinstance(uid, str) and len(uid) == 36
    assert 0 <= rnd < 1
    assert changed is True  # a run that reaches the marker live takes the new path
    assert after == "6"  # now, uuid, random, sleep and patched each took a key


@sw.policy
async def key_of(ctx: sw.Context) -> str:
    return ctx.step_key


async def test_a_signal_reaches_a_waiting_run() -> None:
    @sw.policy
    async def approval(ctx: sw.Context) -> str:
        answer = await ctx.ask("Deploy?", signal="approve")
        early = await ctx.wait_for("early")
        return f"{answer}/{early}"

    runner = sw.Runner()
    events: list[sw.Event] = []

    async def consume() -> None:
        async for ev in runner.stream(approval, run_id="ask"):
            events.append(ev)
            if isinstance(ev, sw.Emitted):
                await runner.signal("ask", "early", "queued")  # sent before anyone waits
                await runner.signal("ask", "approve", "yes")

    async with asyncio.timeout(5):
        await consume()
    emitted = [e for e in events if isinstance(e, sw.Emitted)]
    assert emitted[0].value == {"prompt": "Deploy?", "signal": "approve"}
    assert events[-1] == sw.RunFinished("ask", "succeeded", "yes/queued", None)


async def test_waiting_for_a_signal_can_time_out() -> None:
    @sw.policy
    async def impatient(ctx: sw.Context) -> str:
        try:
            await ctx.wait_for("never", timeout=0.01)
        except TimeoutError as exc:
            return str(exc)
        return "got it"

    assert "never" in await sw.Runner().run(impatient)


async def test_a_signal_to_an_unknown_run_is_an_error() -> None:
    with pytest.raises(sw.RunNotFound):
        await sw.Runner().signal("missing", "x")


async def test_the_context_annotation_may_be_a_string() -> None:
    @sw.policy
    async def quoted(ctx: "sw.Context", x: int) -> str:
        return f"{ctx.step_key}:{x}"

    assert quoted.takes_ctx
    assert list(quoted.parameters["properties"]) == ["x"]
    assert await sw.Runner().run(quoted, x=1) == ":1"


async def test_a_class_policy_reaches_its_application_context() -> None:
    class Agent:
        def __init__(self, model: Any) -> None:
            self.model = model

        async def __call__(self, ctx: App, question: str) -> str:
            history = [Message.user(question)]
            history += await ctx.call(self.model, observations=history, options=[ctx.web_search])
            return history[-1].text

    async def heuristic(obs: list[Message], options: Sequence[Any]) -> Message:
        return call("web_search", query=obs[-1].text)

    agent = Agent(ScriptedLLM([heuristic]))
    assert sw.policy(agent).ctx_class is App
    events = await collect(sw.Runner().stream(agent, question="stalwart"))
    finished = events[-1]
    assert isinstance(finished, sw.RunFinished)
    assert finished.result == '["stalwart-0", "stalwart-1"]'


class Toolbox:
    """A class policy that keeps its tools as class attributes (no Context subclass)."""

    search = web_search

    async def __call__(self, ctx: sw.Context, q: str) -> list[str]:
        return await self.search(query=q, max_results=1)


async def test_a_policy_kept_on_an_ordinary_class_stays_a_policy() -> None:
    assert Toolbox().search is web_search
    hook = Recorder()
    assert await sw.Runner(hooks=[hook]).run(Toolbox(), q="x") == ["x-0"]
    assert [(k, n) for k, n, _ in hook.of("before")] == [("", "toolbox"), ("1", "web_search")]


async def test_a_model_cannot_pass_the_context_as_an_argument() -> None:
    @sw.policy
    async def sneaky(ctx: sw.Context, x: int) -> int:
        return x

    @sw.policy
    async def agent(ctx: sw.Context) -> list[Message]:
        llm = ScriptedLLM([[call("sneaky", ctx="evil", x=1)]])
        return await ctx.call(llm, observations=[], options=[sneaky])

    out = await sw.Runner().run(agent)
    assert out[1].is_error and "ctx: unexpected argument" in out[1].text
