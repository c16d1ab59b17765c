"""Options dispatch: the engine runs the action calls a policy returns."""

import asyncio
import gc
import warnings
from collections.abc import Sequence
from typing import Any

import pytest

import stalwart as sw
from stalwart import Message
from stalwart.testing import ScriptedLLM, call

from ._support import Gauge, Point, Weather, collect, others


@sw.policy
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@sw.policy
async def web_search(query: str, max_results: int = 5) -> list[dict[str, Any]]:
    """Search the web.

    Args:
        query: What to search for.
        max_results: How many results to return.
    """
    return [{"title": f"{query} #{i}"} for i in range(max_results)]


@sw.policy
async def forbidden(x: int) -> int:
    raise AssertionError("an option that was not offered must never run")


def model(*turn: Message) -> sw.Policy[..., list[Message]]:
    """A one-turn model: whatever it is asked, it returns ``turn``."""

    @sw.policy(name="model")
    async def reply(observations: list[Message], options: Sequence[Any] = ()) -> list[Message]:
        return list(turn)

    return reply


async def dispatch(llm: Any, options: list[Any], **settings: Any) -> list[Message]:
    """Run ``llm`` once with ``options`` inside a run and return what the caller gets."""

    @sw.policy
    async def agent(ctx: sw.Context) -> list[Message]:
        return await ctx.call(llm, observations=[Message.user("go")], options=options)

    result: list[Message] = await sw.Runner(**settings).run(agent)
    return result


def results(messages: list[Message]) -> list[sw.ActionResult]:
    return [m.action_result for m in messages if m.action_result is not None]


# -- the loop of the issue ------------------------------------------------------
@sw.policy
async def research(ctx: sw.Context, question: str) -> str:
    llm = ScriptedLLM(
        [
            [call("web_search", query=question, max_results="2")],
            lambda obs, opts: f"found {obs[-1].action_result.value[1]['title']}",
        ]
    )
    history = [Message.system("Use tools to answer."), Message.user(question)]
    while True:
        actions = await ctx.call(llm, observations=history, options=[web_search])
        history += actions
        if not any(m.is_action_call for m in actions):
            return actions[-1].text


async def test_the_agent_loop_of_the_issue() -> None:
    assert await sw.Runner().run(research, question="python") == "found python #1"


# -- what comes back ----------------------------------------------------------------
async def test_calls_come_back_followed_by_their_results_in_call_order() -> None:
    c1 = Message.call("add", {"a": 1, "b": 2}, id="c1")
    c2 = Message.call("web_search", {"query": "x", "max_results": 1}, id="c2")
    c3 = Message.call("add", {"a": 10, "b": 20}, id="c3")
    out = await dispatch(model(c1, c2, c3), [add, web_search])
    assert out[:3] == [c1, c2, c3]
    assert [(r.call_id, r.name, r.value) for r in results(out)] == [
        ("c1", "add", 3),
        ("c2", "web_search", [{"title": "x #0"}]),
        ("c3", "add", 30),
    ]
    assert all(m.role == "tool" and not m.is_error for m in out[3:])
    assert [m.actor for m in out[3:]] == ["add", "web_search", "add"]


async def test_text_alongside_calls_is_kept_in_place() -> None:
    thought = Message.assistant("Let me add.")
    c1 = Message.call("add", {"a": 1, "b": 1}, id="c1")
    out = await dispatch(model(thought, c1), [add])
    assert out[:2] == [thought, c1]
    assert results(out)[0].value == 2


async def test_a_turn_without_calls_comes_back_as_is() -> None:
    answer = Message.assistant("42")
    assert await dispatch(model(answer), [add]) == [answer]


async def test_a_single_message_reply_always_comes_back_as_a_list() -> None:
    @sw.policy(name="model")
    async def single(observations: list[Message], options: Sequence[Any] = ()) -> Message:
        if len(observations) == 1:
            return Message.call("add", {"a": 1, "b": 2}, id="c1")
        return Message.assistant("done")

    @sw.policy
    async def agent(ctx: sw.Context) -> list[Any]:
        history = [Message.user("go")]
        first = await ctx.call(single, observations=history, options=[add])
        history += first
        second = await ctx.call(single, observations=history, options=[add])
        return [first, second]

    first, second = await sw.Runner().run(agent)
    assert isinstance(first, list) and len(first) == 2
    assert isinstance(second, list)  # so that `history += actions` works every turn


async def test_a_result_that_is_not_messages_is_returned_untouched() -> None:
    @sw.policy
    async def not_a_model(
        observations: list[Message], options: Sequence[Any] = ()
    ) -> dict[str, int]:
        return {"n": len(observations)}

    assert await dispatch(not_a_model, [add]) == {"n": 1}  # type: ignore[comparison-overlap]


async def test_structured_results_stay_typed_and_json_safe() -> None:
    @sw.policy
    async def weather(city: str) -> Weather:
        return Weather(city=city, celsius=1.5)

    @sw.policy
    async def where(x: int, y: int) -> Point:
        return Point(x, y)

    out = await dispatch(
        model(call("weather", city="Oslo"), call("where", x="1", y=2)), [weather, where]
    )
    assert [r.value for r in results(out)] == [Weather(city="Oslo", celsius=1.5), Point(1, 2)]
    for m in out:
        assert Message.from_json(m.to_json()) == m


# -- the allow-list -----------------------------------------------------------------
async def test_an_option_not_offered_becomes_an_error_naming_the_allowed_ones() -> None:
    out = await dispatch(model(call("forbidden", x=1), call("add", a=1, b=2)), [web_search, add])
    bad, good = results(out)
    assert bad.is_error and bad.error_type == "UnknownOption"
    assert "'forbidden' is not an allowed option" in (bad.error_message or "")
    assert "allowed options: add, web_search" in (bad.error_message or "")
    assert good.value == 3  # the other call still ran


async def test_with_no_options_offered_nothing_may_run() -> None:
    out = await dispatch(model(call("add", a=1, b=2)), [])
    (r,) = results(out)
    assert r.error_type == "UnknownOption" and "(none)" in (r.error_message or "")


async def test_options_are_matched_by_policy_name_not_function_name() -> None:
    renamed = add.with_settings(name="plus")
    out = await dispatch(model(call("plus", a=2, b=2), call("add", a=1, b=1)), [renamed])
    plus, original = results(out)
    assert plus.value == 4
    assert original.error_type == "UnknownOption" and "plus" in (original.error_message or "")


async def test_plain_functions_and_class_policies_can_be_options() -> None:
    async def shout(text: str) -> str:
        return text.upper()

    class Repeat:
        async def __call__(self, text: str, times: int = 2) -> str:
            return text * times

    def count(text: str) -> int:  # sync: runs in a thread
        return len(text)

    out = await dispatch(
        model(
            call("shout", text="hi"),
            call("repeat", text="ab", times="3"),
            call("count", text="abc"),
        ),
        [shout, Repeat(), count],
    )
    assert [r.value for r in results(out)] == ["HI", "ababab", 3]


# -- bad arguments ------------------------------------------------------------------
async def test_malformed_arguments_become_an_error_and_the_option_does_not_run() -> None:
    ran = False

    @sw.policy
    async def probe(x: int) -> int:
        nonlocal ran
        ran = True
        return x

    broken = Message.call("probe", {}, id="c1", invalid="Expecting value: line 1 column 6")
    out = await dispatch(model(broken), [probe])
    (r,) = results(out)
    assert r.call_id == "c1" and r.error_type == "InvalidArguments"
    assert "not valid JSON" in (r.error_message or "")
    assert "Expecting value: line 1 column 6" in (r.error_message or "")
    assert not ran


async def test_arguments_are_coerced_to_the_declared_types() -> None:
    received: list[Any] = []

    @sw.policy
    async def typed(n: int, ratio: float, flag: bool, when: Point) -> str:
        received.extend([n, ratio, flag, when])
        return "ok"

    out = await dispatch(
        model(call("typed", n="7", ratio="0.5", flag="true", when={"x": "1", "y": 2})), [typed]
    )
    assert results(out)[0].value == "ok"
    assert received == [7, 0.5, True, Point(1, 2)]
    assert type(received[0]) is int


async def test_defaults_are_filled_in() -> None:
    out = await dispatch(model(call("web_search", query="q")), [web_search])
    assert len(results(out)[0].value) == 5


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"max_results": 2}, ["query: Field required"]),
        ({"query": "q", "max_results": "lots"}, ["max_results", "'lots'"]),
        ({"query": ["not", "a", "string"]}, ["query"]),
        ({"query": "q", "limit": 3}, ["limit: unexpected argument"]),
    ],
    ids=["missing", "wrong type", "wrong shape", "unexpected"],
)
async def test_bad_arguments_become_an_error_that_says_which(
    arguments: dict[str, Any], expected: list[str]
) -> None:
    out = await dispatch(model(Message.call("web_search", arguments, id="c")), [web_search])
    (r,) = results(out)
    assert r.is_error and r.error_type == "InvalidArguments"
    for fragment in expected:
        assert fragment in (r.error_message or "")
    assert out[-1].text.startswith("InvalidArguments: invalid arguments for 'web_search'")


# -- failures ------------------------------------------------------------------------
async def test_a_result_that_is_not_json_becomes_an_error_naming_the_type() -> None:
    class Socket:
        pass

    @sw.policy
    async def connect() -> Any:
        return Socket()

    out = await dispatch(model(call("connect"), call("add", a=1, b=1)), [connect, add])
    bad, good = results(out)
    assert bad.error_type == "SerializationError"
    assert "Socket" in (bad.error_message or "") and "connect" in (bad.error_message or "")
    assert bad.value is None
    assert good.value == 2
    for m in out:  # every message of the turn can be recorded
        Message.from_json(m.to_json())


async def test_exceptions_in_parallel_calls_become_errors_and_the_others_succeed() -> None:
    order: list[str] = []
    release_first = asyncio.Event()

    @sw.policy
    async def work(name: str, fail: bool = False) -> str:
        if name == "first":
            await release_first.wait()  # finishes last
        order.append(name)
        if name == "third":
            release_first.set()
        if fail:
            raise ValueError(f"{name} broke")
        return name.upper()

    out = await dispatch(
        model(
            call("work", _id="c1", name="first"),
            call("work", _id="c2", name="second", fail=True),
            call("work", _id="c3", name="third"),
            call("work", _id="c4", name="fourth", fail=True),
        ),
        [work],
    )
    assert order[-1] == "first"  # completion order differs from call order
    rs = results(out)
    assert [r.call_id for r in rs] == ["c1", "c2", "c3", "c4"]
    assert [r.value for r in rs] == ["FIRST", None, "THIRD", None]
    assert [(r.error_type, r.error_message) for r in rs if r.is_error] == [
        ("ValueError", "second broke"),
        ("ValueError", "fourth broke"),
    ]
    assert out[5].text == "ValueError: second broke"


async def test_a_failing_call_does_not_cancel_its_siblings() -> None:
    finished: list[int] = []

    @sw.policy
    async def job(i: int) -> int:
        if i == 0:
            raise RuntimeError("first one fails at once")
        for _ in range(10):
            await asyncio.sleep(0)
        finished.append(i)
        return i

    out = await dispatch(model(*(call("job", i=i) for i in range(4))), [job])
    assert sorted(finished) == [1, 2, 3]
    assert [r.value for r in results(out)] == [None, 1, 2, 3]


async def test_an_option_timeout_becomes_an_error_result() -> None:
    never = asyncio.Event()

    @sw.policy(timeout=0.01)
    async def hang() -> None:
        await never.wait()

    out = await dispatch(model(call("hang"), call("add", a=2, b=2)), [hang, add])
    timed_out, ok = results(out)
    assert timed_out.error_type == "TimeoutError"
    assert ok.value == 4


async def test_an_option_is_retried_per_call() -> None:
    attempts: dict[str, int] = {}

    @sw.policy(retries=2, backoff=0, retry_on=(ConnectionError,))
    async def fetch(url: str) -> str:
        attempts[url] = attempts.get(url, 0) + 1
        if url == "flaky" and attempts[url] < 3:
            raise ConnectionError("reset")
        if url == "broken":
            raise ConnectionError("always")
        return url

    out = await dispatch(
        model(call("fetch", url="flaky"), call("fetch", url="ok"), call("fetch", url="broken")),
        [fetch],
    )
    assert [r.value for r in results(out)] == ["flaky", "ok", None]
    assert results(out)[2].error_type == "ConnectionError"
    assert attempts == {"flaky": 3, "ok": 1, "broken": 3}


# -- concurrency ---------------------------------------------------------------------
async def test_calls_run_concurrently() -> None:
    n = 5
    arrived = 0
    all_in = asyncio.Event()

    @sw.policy
    async def meet(i: int) -> int:
        nonlocal arrived
        arrived += 1
        if arrived == n:
            all_in.set()
        await all_in.wait()  # nobody finishes before everybody started
        return i

    async with asyncio.timeout(5):
        out = await dispatch(model(*(call("meet", i=i) for i in range(n))), [meet])
    assert [r.value for r in results(out)] == list(range(n))


def gauged(gauge: Gauge) -> sw.Policy[..., Any]:
    @sw.policy
    async def measured(i: int) -> int:
        result: int = await gauge.run(i)
        return result

    return measured


async def test_the_dispatching_policy_limits_concurrent_calls() -> None:
    gauge = Gauge()
    turn = [call("measured", i=i) for i in range(7)]
    limited = model(*turn).with_settings(max_parallel=2)
    out = await dispatch(limited, [gauged(gauge)])
    assert gauge.peak == 2 and gauge.finished == 7
    assert [r.value for r in results(out)] == list(range(7))


async def test_a_scripted_model_can_carry_the_limit() -> None:
    gauge = Gauge()
    llm = sw.policy(max_parallel=3)(ScriptedLLM([[call("measured", i=i) for i in range(9)]]))
    out = await dispatch(llm, [gauged(gauge)])
    assert gauge.peak == 3
    assert [r.value for r in results(out)] == list(range(9))


async def test_the_runner_limits_concurrent_calls() -> None:
    gauge = Gauge()
    out = await dispatch(
        model(*(call("measured", i=i) for i in range(6))), [gauged(gauge)], max_parallel=1
    )
    assert gauge.peak == 1
    assert [r.value for r in results(out)] == list(range(6))


async def test_the_policy_limit_wins_over_the_runner_limit() -> None:
    gauge = Gauge()
    limited = model(*(call("measured", i=i) for i in range(6))).with_settings(max_parallel=4)
    await dispatch(limited, [gauged(gauge)], max_parallel=1)
    assert gauge.peak == 4


async def test_without_a_limit_every_call_runs_at_once() -> None:
    gauge = Gauge()
    await dispatch(model(*(call("measured", i=i) for i in range(8))), [gauged(gauge)])
    assert gauge.peak == 8


# -- cancellation ---------------------------------------------------------------------
class InFlight:
    """Options that block until cancelled, counting how many started and were stopped."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.started = 0
        self.cancelled = 0
        self.all_started = asyncio.Event()
        self.never = asyncio.Event()

        @sw.policy
        async def block(i: int) -> int:
            self.started += 1
            if self.started == self.n:
                self.all_started.set()
            try:
                await self.never.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            return i

        self.option = block

    def agent(self, calls: int | None = None, **settings: Any) -> sw.Policy[..., Any]:
        llm = model(*(call("block", i=i) for i in range(calls or self.n)))
        if settings:
            llm = llm.with_settings(**settings)
        option = self.option

        @sw.policy
        async def agent(ctx: sw.Context) -> Any:
            return await ctx.call(llm, observations=[], options=[option])

        return agent


async def test_cancelling_a_run_mid_call_leaves_no_orphan_task() -> None:
    flight = InFlight(4)
    runner = sw.Runner()
    before = others()
    handle = await runner.start(flight.agent(), run_id="cancel-me")
    async with asyncio.timeout(5):
        await flight.all_started.wait()
    await handle.cancel()
    assert flight.cancelled == 4  # every call in flight was stopped, and waited for
    assert others() == before  # nothing left running behind our back
    with pytest.raises(sw.CancelledRun):
        await handle.result()
    assert await handle.status() == "cancelled"


async def test_cancelling_the_awaiting_task_leaves_no_orphan_task() -> None:
    flight = InFlight(3)
    before = others()
    task = asyncio.create_task(sw.Runner().run(flight.agent()))
    async with asyncio.timeout(5):
        await flight.all_started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert flight.cancelled == 3
    assert others() == before


async def test_cancelling_a_streamed_run_ends_the_stream_with_its_status() -> None:
    flight = InFlight(2)
    runner = sw.Runner()
    events: list[sw.Event] = []

    async def consume() -> None:
        async for ev in runner.stream(flight.agent(), run_id="s"):
            events.append(ev)

    consumer = asyncio.create_task(consume())
    async with asyncio.timeout(5):
        await flight.all_started.wait()
        await runner.cancel("s")
        await consumer
    assert flight.cancelled == 2
    last = events[-1]
    assert isinstance(last, sw.RunFinished) and last.status == "cancelled"


async def test_cancelling_with_queued_calls_leaves_nothing_unawaited() -> None:
    flight = InFlight(2)  # 4 calls, 2 at a time: 2 in flight and 2 queued
    before = others()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = await sw.Runner().start(flight.agent(calls=4, max_parallel=2))
        async with asyncio.timeout(5):
            await flight.all_started.wait()
        await handle.cancel()
        gc.collect()
    assert flight.started == 2 and flight.cancelled == 2
    assert others() == before
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []


# -- deep nesting ---------------------------------------------------------------------
@sw.policy
async def lookup(term: str) -> str:
    """The leaf: looks a term up."""
    return f"<{term}>"


def agent_tool(name: str, llm: ScriptedLLM, options: list[Any]) -> sw.Policy[..., str]:
    """An option that is itself an agent: its model's calls go through the engine."""

    @sw.policy(name=name)
    async def tool(ctx: sw.Context, task: str) -> str:
        history = [Message.user(task)]
        while True:
            actions = await ctx.call(llm, observations=history, options=options)
            history += actions
            if not any(m.is_action_call for m in actions):
                return actions[-1].text

    return tool


async def test_options_nest_at_any_depth() -> None:
    level3 = agent_tool(
        "level3",
        ScriptedLLM(
            [
                [call("lookup", term="a"), call("lookup", term="b")],
                lambda obs, _: obs[-2].text + obs[-1].text,
            ],
            name="llm3",
        ),
        [lookup],
    )
    level2 = agent_tool(
        "level2",
        ScriptedLLM(
            [[call("level3", task="t3")], lambda obs, _: f"2[{obs[-1].text}]"], name="llm2"
        ),
        [level3],
    )
    level1 = agent_tool(
        "level1",
        ScriptedLLM(
            [
                [call("level2", task="t2"), call("lookup", term="c"), call("level3", task="x")],
                lambda obs, _: "|".join(m.text for m in obs[-3:]),
            ],
            name="llm1",
        ),
        [level2, lookup],  # level3 is not offered at the top
    )

    @sw.policy
    async def root(ctx: sw.Context) -> str:
        return await level1(task="t1")

    events = await collect(sw.Runner().stream(root))
    finished = events[-1]
    assert isinstance(finished, sw.RunFinished) and finished.status == "succeeded"
    assert finished.result == (
        "2[<a><b>]|<c>|UnknownOption: 'level3' is not an allowed option; "
        "allowed options: level2, lookup"
    )
    started = [(e.key, e.name) for e in events if isinstance(e, sw.CallStarted)]
    assert ("1.1#1.1#1.1#1", "lookup") in started  # root > level1 > level2 > level3 > lookup
    assert ("1.1#1.1#1.1#2", "lookup") in started
    assert ("1.1#2", "lookup") in started
    depth = max(k.count("#") for k, _ in started)
    assert depth == 3


async def test_a_nested_failure_stays_inside_its_own_level() -> None:
    @sw.policy
    async def explode(term: str) -> str:
        raise KeyError(term)

    inner = agent_tool(
        "inner",
        ScriptedLLM([[call("explode", term="z")], lambda obs, _: f"inner saw {obs[-1].text}"]),
        [explode],
    )
    out = await dispatch(model(call("inner", task="go")), [inner])
    assert results(out)[0].value == "inner saw KeyError: 'z'"
