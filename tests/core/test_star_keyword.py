"""A keyword argument named "*" would be recorded under the name the ledger
gives positional arguments, so two different calls would share one identity
(S5) and replay could hand one call the other's result: it is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw
from stalwart import Message
from stalwart.testing import ScriptedLLM


@sw.policy
async def echo(*args: Any, **kwargs: Any) -> str:
    return repr((args, kwargs))


async def test_a_keyword_named_star_is_refused_with_the_step(sqlite_url: str) -> None:
    @sw.policy
    async def main() -> str:
        return await echo(1, **{"*": [2]})

    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(sw.SerializationError, match=r"step .*may not be named '\*'"):
            await runner.run(main)


async def test_positional_and_other_keywords_still_record(sqlite_url: str) -> None:
    @sw.policy
    async def main() -> str:
        return await echo(2, x=3)

    async with sw.Runner(sqlite_url) as runner:
        assert await runner.run(main) == repr(((2,), {"x": 3}))


# A keyword argument named "*" is refused in memory as it is on a store.
#
# The ledger records positional arguments under "*", so a durable run refuses
# a keyword of that name (S5). A run in memory must refuse it too, with the
# same error: a program that works in memory must not start failing the day
# it is given a store.


@sw.policy
async def through_ctx(ctx: sw.Context) -> str:
    return await ctx.call(echo, 1, **{"*": [2]})


@sw.policy
async def through_call() -> str:
    await echo(0)  # step 1: fine
    return await echo(1, **{"*": [2]})  # step 2


def _stores(tmp_path: Path) -> list[str | None]:
    return [None, f"sqlite:///{tmp_path / 'r.db'}"]


@pytest.mark.parametrize("main", [through_ctx, through_call], ids=["ctx.call", "policy()"])
async def test_memory_and_sqlite_refuse_it_alike(tmp_path: Path, main: Any) -> None:
    errors = []
    for store in _stores(tmp_path):
        async with sw.Runner(store) as runner:
            with pytest.raises(sw.SerializationError) as caught:
                await runner.run(main, run_id="star-1")
        errors.append(str(caught.value))
    step = "1" if main is through_ctx else "2"
    expected = (
        f"arguments of run 'star-1', step {step}: a keyword argument may not be named '*' "
        "(the ledger records positional arguments under that name)"
    )
    assert errors == [expected, expected]


async def test_a_watched_run_in_memory_refuses_it_too() -> None:
    """A run someone listens to takes the engine's full path, not the bare
    call: the same rule, the same error."""
    async with sw.Runner() as runner:
        handle = await runner.start(through_ctx, run_id="star-2")
        with pytest.raises(sw.SerializationError, match=r"^arguments of run 'star-2', step 1: "):
            async with asyncio.timeout(10):
                await handle.result()


async def test_ordinary_keywords_still_pass_in_memory() -> None:
    @sw.policy
    async def main(ctx: sw.Context) -> str:
        return await ctx.call(echo, 1, x=2, **{"*x": 3})

    async with sw.Runner() as runner:
        assert await runner.run(main) == repr(((1,), {"x": 2, "*x": 3}))


# A keyword argument named '*' arriving by the other doors: a bound attribute
# of an application context, and a model's tool call.


@sw.policy
async def st_echo(**kwargs: Any) -> str:
    """Echoes its keywords.

    Args:
        kwargs: Anything.
    """
    return repr(sorted(kwargs))


class StarApp(sw.Context):
    echo = st_echo


@sw.policy
async def st_bound(ctx: StarApp) -> str:
    result: str = await ctx.echo(**{"*": [2]})
    return result


@sw.policy
async def st_model(ctx: sw.Context) -> str:
    star = Message.call("st_echo", {"*": [2]})  # what a model may answer
    llm: Any = ScriptedLLM([[star]], name="st_model_llm")
    out = await ctx.call(llm, observations=[Message.user("go")], options=[st_echo])
    [res] = [m.action_result for m in out if m.action_result is not None]
    return f"{res.error_type}: {res.error_message}" if res.is_error else f"ran {res.value}"


async def test_a_bound_attribute_refuses_it_in_memory_and_on_a_store(tmp_path: Path) -> None:
    errors = []
    for store in _stores(tmp_path):
        async with sw.Runner(store) as runner:
            with pytest.raises(sw.SerializationError) as caught:
                await runner.run(st_bound, run_id="bound")
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert errors[0].startswith("arguments of run 'bound', step 1: a keyword argument")


async def test_a_models_tool_call_with_it_gets_one_answer_in_memory_and_on_a_store(
    tmp_path: Path,
) -> None:
    """The model's reply is data: whatever the answer, memory and a store
    must give the same one (and the store must not fail the run)."""
    answers = []
    for store in _stores(tmp_path):
        async with sw.Runner(store) as runner:
            answers.append(await runner.run(st_model, run_id="model"))
    assert answers[0] == answers[1], answers
