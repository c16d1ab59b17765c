"""Calls already answered inside a reply are not run again.

A policy offered options may answer some of its own calls (a provider-side
tool, a policy that ran a call itself, a PocketJoe policy returning calls and
results). The engine runs only the calls nobody answered, and the reply the
caller gets holds each result once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart import Message

RAN: list[str] = []


@sw.policy
async def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city's name.
    """
    RAN.append(city)
    return f"{city}: found"


def answered_reply() -> list[Message]:
    """Two calls; the first already has its result in the reply."""
    first = Message.call("lookup", {"city": "Paris"}, id="c1")
    second = Message.call("lookup", {"city": "Rome"}, id="c2")
    return [first, Message.result(first.action_call or "c1", "Paris: cached"), second]


@sw.policy(name="model")
async def model(observations: list[Message], options: Sequence[Any] = ()) -> list[Message]:
    return answered_reply()


@sw.policy
async def agent(ctx: sw.Context) -> list[Message]:
    out: list[Message] = await ctx.call(model, observations=[Message.user("go")], options=[lookup])
    return out


def _result_ids(messages: list[Message]) -> list[str]:
    return [m.action_result.call_id for m in messages if m.action_result is not None]


def test_an_answered_call_is_not_run_again_and_its_result_is_not_duplicated() -> None:
    RAN.clear()
    out = sw.Runner().run_sync(agent)
    assert RAN == ["Rome"]  # Paris was answered in the reply: never run
    assert _result_ids(out) == ["c1", "c2"]  # one result per call, in call order
    by_id = {m.action_result.call_id: m.action_result.value for m in out if m.action_result}
    assert by_id == {"c1": "Paris: cached", "c2": "Rome: found"}


def test_a_reply_whose_calls_are_all_answered_is_returned_as_it_is() -> None:
    @sw.policy(name="model")
    async def all_answered(
        observations: list[Message], options: Sequence[Any] = ()
    ) -> list[Message]:
        c = Message.call("lookup", {"city": "Oslo"}, id="c9")
        return [c, Message.result("c9", "Oslo: cached", name="lookup")]

    @sw.policy
    async def run_it(ctx: sw.Context) -> list[Message]:
        out: list[Message] = await ctx.call(
            all_answered, observations=[Message.user("go")], options=[lookup]
        )
        return out

    RAN.clear()
    out = sw.Runner().run_sync(run_it)
    assert RAN == []
    assert _result_ids(out) == ["c9"]


def test_the_unanswered_call_keeps_its_key_by_position_in_the_reply(sqlite_url: str) -> None:
    """Keys count every call of the reply (S1): the second call is ``#2``
    whether or not the first was answered, so a run recorded before this
    change replays its results under the same keys."""
    RAN.clear()
    url = sqlite_url
    sw.Runner(url).run_sync(agent, run_id="a")

    async def steps() -> list[str]:
        async with sw.Runner(url, serving=False) as runner:
            return [s.key for s in await runner.steps("a")]

    import asyncio

    assert asyncio.run(steps()) == ["1", "1#2"]
    assert RAN == ["Rome"]


@sw.policy
async def count(n: int) -> int:
    return n


@sw.policy
async def agent_then_wait(ctx: sw.Context) -> int:
    out: list[Message] = await ctx.call(model, observations=[Message.user("go")], options=[lookup])
    seen: int = await ctx.call(count, len(out))
    await ctx.wait_for("go")
    return seen


def test_a_run_recorded_before_answered_calls_were_skipped_replays_as_it_ran(
    sqlite_url: str,
) -> None:
    """Before this change an answered call ran anyway (``1#1``) and its result
    was appended. A run recorded then and resumed now must replay that, not
    skip the call: the history its next step saw had the extra result (S5)."""
    import asyncio
    from dataclasses import replace

    from stalwart.core import codec
    from stalwart.core.engine.identity import identity_json, step_hash

    url = sqlite_url

    async def main() -> int:
        async with sw.Runner(
            url, policies=[agent_then_wait, lookup, count, model], serving=True
        ) as r:
            await r.start(agent_then_wait, run_id="new")
            while (await r.get_run("new")).waiting_for != "go":
                await asyncio.sleep(0.01)
            dump = await r.store.export_run("new")
            assert dump is not None
            steps = {s.key: s for s in dump.steps}
            assert "1#1" not in steps and steps["2"].output == "4"  # skipped, 4 messages
            # The same run as the previous version recorded it: Paris ran at
            # 1#1, and the next step saw five messages.
            paris = identity_json((), {"city": "Paris"}, "1#1")
            five = identity_json((5,), {}, "2")
            old = [
                *(s for s in dump.steps if s.key not in ("2",)),
                replace(
                    steps["1#2"],
                    key="1#1",
                    args=paris,
                    args_hash=step_hash(paris),
                    output=codec.dumps("Paris: found"),
                ),
                replace(steps["2"], args=five, args_hash=step_hash(five), output="5"),
            ]
            run = replace(dump.run, id="old", owner=None, lease_expires_at=None)
            assert await r.store.import_run(replace(dump, run=run, steps=old))
            RAN.clear()
            await r.signal("old", "go")
            return int(await r.outcome("old"))

    assert asyncio.run(main()) == 5  # replayed as recorded, nothing ran again
    assert RAN == []
