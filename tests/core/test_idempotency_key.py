"""A step's idempotency key: the same on every execution of the step (a
retry, a resume), distinct between steps, runs, child runs and generations.

What a user relies on: pass ``ctx.idempotency_key`` to an API that dedupes
by key, and a step that runs again is the same request to it.
"""

from __future__ import annotations

import asyncio

import pytest

import stalwart as sw

SEEN: list[tuple[str, str]] = []


@pytest.fixture(autouse=True)
def _forget() -> None:
    SEEN.clear()


def _keys(where: str) -> list[str]:
    return [key for w, key in SEEN if w == where]


@sw.policy
async def charge(ctx: sw.Context) -> str:
    SEEN.append(("charge", ctx.idempotency_key))
    return ctx.idempotency_key


@sw.policy
async def charge_twice(ctx: sw.Context) -> list[str]:
    return [await charge(), await charge()]


async def test_the_key_is_the_run_id_and_the_step_key() -> None:
    @sw.policy
    async def nested(ctx: sw.Context) -> list[str]:
        return [ctx.idempotency_key, *await charge_twice(), await charge()]

    keys = await sw.Runner().run(nested, run_id="order-42")
    assert keys == ["order-42:", "order-42:1.1", "order-42:1.2", "order-42:2"]


async def test_two_runs_of_one_policy_have_distinct_keys(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        first = await runner.run(charge_twice, run_id="a")
        second = await runner.run(charge_twice, run_id="b")
    assert first == ["a:1", "a:2"]
    assert second == ["b:1", "b:2"]


@sw.policy
async def pay_then_confirm(ctx: sw.Context) -> str:
    SEEN.append(("pay", ctx.idempotency_key))
    await ctx.wait_for("confirmed")  # suspends the run: the step has no record yet
    return ctx.idempotency_key


@sw.policy
async def checkout(ctx: sw.Context) -> str:
    SEEN.append(("root", ctx.idempotency_key))
    return await pay_then_confirm()


async def test_a_step_executed_again_on_resume_has_the_key_it_had(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url, poll_interval=0.05, policies=[checkout]) as runner:
        handle = await runner.start(checkout, run_id="cart-7")
        while (await runner.get_run("cart-7")).status != "suspended":
            await asyncio.sleep(0.01)
        await runner.signal("cart-7", "confirmed", True)
        assert await handle.result(timeout=10) == "cart-7:1"
    assert _keys("pay") == ["cart-7:1", "cart-7:1"]  # executed twice, one key
    assert _keys("root") == ["cart-7:", "cart-7:"]


async def test_every_attempt_of_a_retried_step_has_its_first_key(sqlite_url: str) -> None:
    attempts: list[str] = []

    @sw.policy(retries=2, backoff=0)
    async def flaky(ctx: sw.Context) -> str:
        attempts.append(ctx.key)
        SEEN.append(("flaky", ctx.idempotency_key))
        await charge()  # a child of the attempt: its key is the same in each attempt
        if len(attempts) < 3:
            raise ConnectionError("the payment API hung up")
        return "paid"

    @sw.policy
    async def shop(ctx: sw.Context) -> str:
        return await flaky()

    async with sw.Runner(sqlite_url) as runner:
        assert await runner.run(shop, run_id="r") == "paid"
    assert attempts == ["1", "1@2", "1@3"]  # three executions, keyed apart in the ledger
    assert _keys("flaky") == ["r:1"] * 3
    assert _keys("charge") == ["r:1.1"] * 3


async def test_numbered_keys_count_again_on_each_attempt() -> None:
    taken: list[list[str]] = []

    @sw.policy(retries=1, backoff=0)
    async def two_effects(ctx: sw.Context) -> None:
        taken.append([ctx.next_idempotency_key(), ctx.next_idempotency_key()])
        if len(taken) == 1:
            raise ConnectionError("dropped")

    await sw.Runner().run(two_effects, run_id="r")
    assert taken == [["r:/1", "r:/2"]] * 2


async def test_child_runs_have_keys_of_their_own(sqlite_url: str) -> None:
    @sw.policy
    async def fan(ctx: sw.Context) -> list[object]:
        mine = await charge()
        children = [await ctx.spawn(charge_twice), await ctx.spawn(charge_twice)]
        return [mine, ctx.idempotency_key, *[await c.result() for c in children]]

    async with sw.Runner(sqlite_url, poll_interval=0.05, policies=[fan, charge_twice]) as r:
        mine, root, first, second = await r.run(fan, run_id="p")
    assert (mine, root) == ("p:1", "p:")
    keys = [mine, root, *first, *second]
    assert len(set(keys)) == len(keys) == 6
    assert all(k.startswith("p~") for k in [*first, *second])  # the child runs' ids


@sw.policy
async def generations(ctx: sw.Context, generation: int = 1) -> list[str]:
    SEEN.append(("gen", await charge()))
    if generation == 1:
        await ctx.engine.mailbox.continue_as_new((), {"generation": 2})
    return _keys("gen")


async def test_a_run_that_continued_as_new_keys_each_generation_apart(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url, policies=[generations], poll_interval=0.05) as runner:
        handle = await runner.start(generations, run_id="g")
        assert await handle.result(timeout=10) == ["g:1", "g~2:1"]


async def test_a_policy_awaited_outside_a_runner_gets_a_fresh_run_and_key() -> None:
    first, second = await charge_twice(), await charge_twice()
    assert first[0].endswith(":1") and second[0].endswith(":1")
    assert first[0] != second[0]  # each call is a one-off run of its own
