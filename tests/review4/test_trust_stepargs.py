"""Trust review of the compact step-argument format (core/stepargs.py,
core/engine/argslog.py).

* A keyword argument named ``"*5"`` was taken for the sixth positional
  argument: a list under that keyword was recorded as extending an earlier
  step's positional list, and every reader then failed on it (or read the
  wrong list).
* When two workers race on a step and the other one's record wins with other
  arguments, the loser must say it is nondeterminism naming the run and the
  step, even when the winner's record refers to steps the loser never read.

Real SQLite files and PostgreSQL, a real runner; no mocks.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import stalwart as sw
from stalwart.core.ledger import StoredStep
from stalwart.core.stepargs import args_digest, ext_node

LONG = "a long system prompt that is well past the size worth referring to. " * 3


@sw.policy
async def echo(*args: Any, **kwargs: Any) -> int:
    """A step given anything: the lengths of what it got."""
    return len(args) + len(kwargs)


@sw.policy
async def star_keyword(ctx: sw.Context) -> int:
    """A positional list argument 5, then a keyword argument named "*5" that
    holds a longer list starting the same way."""
    items = [LONG, "one"]
    await ctx.call(echo, 0, 1, 2, 3, 4, list(items))
    await ctx.call(echo, **{"*5": [*items, "two"]})
    await ctx.call(echo, 0, 1, 2, 3, 4, [*items, "two", "three"], **{"*5": [LONG]})
    return 3


async def test_a_keyword_named_like_a_positional_field_reads_back_as_given(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, policies=[star_keyword]) as runner:
        handle = await runner.start(star_keyword, run_id="star")
        assert await handle.result(timeout=30) == 3
        steps = [s for s in await runner.steps("star") if s.name == echo.name]
        assert [json.loads(s.args or "") for s in steps] == [
            {"*": [0, 1, 2, 3, 4, [LONG, "one"]]},
            {"*5": [LONG, "one", "two"]},
            {"*": [0, 1, 2, 3, 4, [LONG, "one", "two", "three"]], "*5": [LONG]},
        ]


# -- a race on a step whose winning record refers to steps the loser never read --

RACE: dict[str, Any] = {}


@sw.policy
async def chat(messages: list[sw.Message]) -> str:
    """A model call; the second one is raced by another worker's record."""
    if len(messages) == 3 and "write" in RACE:
        await RACE.pop("write")()
        if RACE.pop("fail", False):
            raise RuntimeError("this worker's call failed")
    return "mine"


@sw.policy
async def conversation(ctx: sw.Context) -> str:
    history = [sw.Message.system(LONG), sw.Message.user("first")]
    await ctx.call(chat, messages=list(history))
    history.append(sw.Message.user("second"))
    return await ctx.call(chat, messages=list(history))


def _msg_json(message: sw.Message) -> str:
    from stalwart.core import codec
    from stalwart.core.engine.identity import strip_ids

    return json.dumps(strip_ids(codec.encode(message, "a message")), separators=(",", ":"))


@pytest.mark.parametrize("ours", ["succeeds", "fails"])
async def test_a_lost_race_on_other_arguments_is_nondeterminism(store_url: str, ours: str) -> None:
    RACE["fail"] = ours == "fails"
    async with sw.Runner(store_url, policies=[conversation]) as runner:
        store = runner.store

        async def write_theirs() -> None:
            # The other worker's record of step 2: the same conversation
            # with another last message, recorded compact (it extends step 1).
            (run,) = await store.get_runs(["raced"])
            head = [_msg_json(sw.Message.system(LONG)), _msg_json(sw.Message.user("first"))]
            tail = [_msg_json(sw.Message.user("something else"))]
            whole = '{"messages":[' + ",".join(head + tail) + "]}"
            compact = '{"messages":' + ext_node("1", 2, tail) + "}"
            now = time.time()
            theirs = StoredStep(
                "2", chat.name, args_digest(whole), compact, '"theirs"', None, 1, now, now
            )
            won = await store.record_step("raced", run.fence, theirs)
            assert won.args == compact

        RACE["write"] = write_theirs
        handle = await runner.start(conversation, run_id="raced")
        with pytest.raises(sw.NonDeterminismError) as caught:
            await handle.result(timeout=30)
        text = str(caught.value)
        assert "raced" in text and "step 2" in text
        assert "something else" in text  # the winner's arguments, shown whole
