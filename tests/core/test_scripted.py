"""stalwart.testing.ScriptedLLM: a model that plays a script, for offline tests."""

from collections.abc import Sequence
from typing import Any

import pytest

import stalwart as sw
from stalwart import Message
from stalwart.testing import ScriptedLLM, ScriptExhausted, call


@sw.policy
async def add(a: int, b: int) -> int:
    return a + b


async def ask(llm: Any, history: list[Message], options: Sequence[Any] = ()) -> list[Message]:
    """One model turn inside a run, as an agent would take it."""

    @sw.policy
    async def turn(ctx: sw.Context) -> list[Message]:
        return await ctx.call(llm, observations=history, options=list(options))

    result: list[Message] = await sw.Runner().run(turn)
    return result


async def test_a_text_reply() -> None:
    llm = ScriptedLLM(["Hello!"])
    (m,) = await ask(llm, [Message.user("hi")])
    assert (m.role, m.actor, m.text) == ("assistant", "scripted_llm", "Hello!")
    assert llm.calls == 1


async def test_a_call_reply_and_the_call_helper() -> None:
    llm = ScriptedLLM([call("add", _id="c1", a=1, b=2)])
    out = await ask(llm, [Message.user("1+2?")], [add])
    assert out[0].action_call == sw.ActionCall("c1", "add", {"a": 1, "b": 2})
    assert out[0].actor == "scripted_llm"  # the script's messages are the model's own
    assert out[1].action_result is not None and out[1].action_result.value == 3


async def test_parallel_calls_in_one_turn() -> None:
    llm = ScriptedLLM(
        [[Message.assistant("Two sums."), call("add", a=1, b=1), call("add", a=2, b=2)]]
    )
    out = await ask(llm, [Message.user("go")], [add])
    assert [m.is_action_call for m in out] == [False, True, True, False, False]
    assert [m.action_result.value for m in out[3:] if m.action_result] == [2, 4]


async def test_the_position_in_the_script_comes_from_the_conversation() -> None:
    llm = ScriptedLLM(["first", "second", "third"])
    history = [Message.user("a")]
    history += await ask(llm, history)
    history.append(Message.user("b"))
    history += await ask(llm, history)
    assert [m.text for m in history] == ["a", "first", "b", "second"]
    # the same conversation replayed gets the same reply: no hidden counter
    assert [m.text for m in await ask(llm, history[:1])] == ["first"]
    assert llm.calls == 3


async def test_another_models_turns_do_not_count() -> None:
    llm = ScriptedLLM(["mine"], name="me")
    history = [Message.user("q"), Message.assistant("from someone else", actor="other")]
    assert [m.text for m in await ask(llm, history)] == ["mine"]


async def test_a_callable_reply_sees_the_observations_and_the_options() -> None:
    seen: list[Any] = []

    def heuristic(observations: list[Message], options: Sequence[Any]) -> Message:
        seen.append(([m.text for m in observations], [sw.policy(o).name for o in options]))
        return call("add", a=len(observations), b=10)

    async def async_heuristic(observations: list[Message], options: Sequence[Any]) -> str:
        return f"sum is {observations[-1].text}"

    llm = ScriptedLLM([heuristic, async_heuristic])
    history = [Message.user("x"), Message.user("y")]
    history += await ask(llm, history, [add])
    history += await ask(llm, history, [add])
    assert seen == [(["x", "y"], ["add"])]
    assert history[-1].text == "sum is 12"


async def test_running_past_the_script_raises_script_exhausted() -> None:
    llm = ScriptedLLM(["only"], name="short")
    history = [Message.user("a")]
    history += await ask(llm, history)
    with pytest.raises(ScriptExhausted, match=r"short: the script has 1 replies, reply 2 was"):
        await ask(llm, history)
    assert issubclass(ScriptExhausted, RuntimeError)


async def test_an_empty_script_is_exhausted_at_once() -> None:
    with pytest.raises(ScriptExhausted):
        await ask(ScriptedLLM([]), [Message.user("a")])


async def test_a_reply_that_is_not_messages_is_refused() -> None:
    with pytest.raises(TypeError, match="script reply"):
        await ask(ScriptedLLM([42]), [Message.user("a")])  # type: ignore[list-item]


async def test_it_is_a_policy_with_a_schema_without_ctx() -> None:
    pol = sw.policy(ScriptedLLM(["x"], name="gpt_fake"))
    assert pol.name == "gpt_fake"
    assert pol.takes_ctx
    assert set(pol.parameters["properties"]) == {"observations", "options"}


def test_it_runs_from_a_script_with_run_sync() -> None:
    out = sw.Runner().run_sync(ScriptedLLM(["hi"]), observations=[Message.user("hello")])
    assert [m.text for m in out] == ["hi"]
