"""The Metrics hook in one process: model tokens from recorded usage, and
label values that are data, escaped in the exposition."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from tests.llm.conftest import Replay, replay
from tests.llm.weather import ask

import stalwart as sw
from stalwart import llm
from stalwart.core.message import Message
from stalwart.metrics import Metrics

__all__ = ["replay"]  # the fixture, used here


def samples(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_model_tokens_come_from_the_usage_the_reply_recorded(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r = replay("openai_chat_text.json")
    model = llm.openai("gpt-4o", client=r.openai())
    metrics = Metrics()
    async with sw.Runner(sqlite_url, hooks=[metrics]) as runner:
        (reply,) = await ask(model, [Message.user("Weather in Paris?")], runner=runner)
    assert reply.meta is not None
    usage, name = reply.meta["usage"], reply.meta["model"]
    got = samples(metrics)
    # The recorded payload's counts (128 in, 15 out), under the model's name.
    assert (
        got[("stalwart_model_tokens_total", frozenset({("model", name), ("kind", "input")}))]
        == (usage["input_tokens"])
        == 128
    )
    assert (
        got[("stalwart_model_tokens_total", frozenset({("model", name), ("kind", "output")}))]
        == (usage["output_tokens"])
        == 15
    )


async def test_label_values_with_quotes_newlines_and_backslashes_stay_intact(
    sqlite_url: str,
) -> None:
    name, queue = 'say "hi"\n\\ # } {x="1"}', 'q\n"2"'

    @sw.policy
    async def inner(x: int) -> int:
        return x + 1

    @sw.policy(name=name)
    async def outer(x: int) -> int:
        return await inner(x)

    metrics = Metrics()
    async with sw.Runner(sqlite_url, hooks=[metrics], serving=True, policies=[outer]) as runner:
        handle = await runner.enqueue(outer, 1, queue=queue)
        assert await handle.result(timeout=30) == 2
    got = samples(metrics)
    labels = frozenset({("policy", name), ("queue", queue), ("status", "succeeded")})
    assert got[("stalwart_runs_finished_total", labels)] == 1
    step = frozenset({("policy", name), ("outcome", "succeeded")})
    assert got[("stalwart_step_seconds_count", step)] == 1
    # Nothing else was made of the odd text: every series is one of ours.
    assert {n for n, _ in got} <= {
        "stalwart_runs_started_total",
        "stalwart_runs_started_created",
        "stalwart_runs_finished_total",
        "stalwart_runs_finished_created",
        "stalwart_step_seconds_bucket",
        "stalwart_step_seconds_count",
        "stalwart_step_seconds_sum",
        "stalwart_step_seconds_created",
        # The lease and store-outage totals, unlabelled, always served.
        "stalwart_leases_taken_total",
        "stalwart_leases_renewed_total",
        "stalwart_leases_lost_total",
        "stalwart_store_outages_total",
        "stalwart_store_unavailable_seconds_total",
    }


async def test_store_up_says_whether_the_store_answered_the_scrape(sqlite_url: str) -> None:
    metrics = Metrics()
    runner = sw.Runner(sqlite_url, hooks=[metrics])
    server = metrics.serve(runner, 0)
    url = f"http://127.0.0.1:{server.port}/metrics"

    def scrape() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        with urllib.request.urlopen(url, timeout=30) as response:
            text = response.read().decode()
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    up = ("stalwart_store_up", frozenset())
    try:
        assert (await asyncio.to_thread(scrape))[up] == 0  # not opened yet
        async with runner:
            await runner.run(double_it, 4)
            while_open = await asyncio.to_thread(scrape)
        after = await asyncio.to_thread(scrape)
    finally:
        server.close()
    assert while_open[up] == 1
    assert (
        while_open[("stalwart_runs", frozenset({("status", "succeeded"), ("queue", "default")}))]
        == 1
    )
    # Closed: the store no longer answers, and the counters are served all the same.
    assert after[up] == 0
    assert (
        "stalwart_runs",
        frozenset({("status", "succeeded"), ("queue", "default")}),
    ) not in after
    finished = frozenset({("policy", "double_it"), ("queue", "default"), ("status", "succeeded")})
    assert after[("stalwart_runs_finished_total", finished)] == 1


@sw.policy
async def double_it(x: int) -> int:
    return x * 2


async def test_one_metrics_serves_one_endpoint_at_a_time(sqlite_url: str) -> None:
    metrics = Metrics()
    async with sw.Runner(sqlite_url, hooks=[metrics]) as runner:
        first = metrics.serve(runner, 0)
        try:
            with pytest.raises(RuntimeError, match=f"already serving on port {first.port}"):
                metrics.serve(runner, 0)
        finally:
            first.close()
        metrics.serve(runner, 0).close()  # closed, it may serve again


async def test_model_cost_is_the_recorded_usage_at_the_given_price(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r = replay("openai_chat_text.json")
    model = llm.openai("gpt-4o", client=r.openai())
    # Priced per million tokens; another model's price is never used.
    metrics = Metrics(prices={"gpt-4o": llm.Price(2.5, 10.0), "other": llm.Price(99, 99)})
    async with sw.Runner(sqlite_url, hooks=[metrics]) as runner:
        (reply,) = await ask(model, [Message.user("Weather in Paris?")], runner=runner)
    assert reply.meta is not None
    got = samples(metrics)
    cost = got[("stalwart_model_cost_total", frozenset({("model", "gpt-4o")}))]
    assert cost == pytest.approx((128 * 2.5 + 15 * 10.0) / 1e6)
    assert ("stalwart_model_cost_total", frozenset({("model", "other")})) not in got


async def test_a_model_without_a_price_counts_tokens_and_no_cost(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r = replay("openai_chat_text.json")
    model = llm.openai("gpt-4o", client=r.openai())
    metrics = Metrics(prices={"gpt-4.1-mini": llm.Price(0.4, 1.6)})
    async with sw.Runner(sqlite_url, hooks=[metrics]) as runner:
        await ask(model, [Message.user("Weather in Paris?")], runner=runner)
    names = {name for name, _ in samples(metrics)}
    assert "stalwart_model_tokens_total" in names
    assert "stalwart_model_cost_total" not in names


def test_a_price_table_entry_that_is_not_a_price_is_refused() -> None:
    with pytest.raises(
        TypeError, match=r"prices=\.\.\.\)\['gpt-4o'\]: expected a stalwart\.llm\.Price"
    ):
        Metrics(prices={"gpt-4o": {"input": 1, "output": 2}})  # type: ignore[dict-item]


async def until_suspended(handle: sw.RunHandle) -> None:
    for _ in range(300):
        if await handle.status() == "suspended":
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {handle.run_id} never suspended: {await handle.status()}")


@sw.policy
async def wait_for_a_human(ctx: sw.Context) -> str:
    return str(await ctx.wait_for("answer"))


async def test_runs_waiting_for_a_signal_are_counted_per_queue_when_scraped(
    sqlite_url: str,
) -> None:
    metrics = Metrics()
    async with sw.Runner(
        sqlite_url, hooks=[metrics], serving=True, policies=[wait_for_a_human, double_it]
    ) as runner:
        server = metrics.serve(runner, 0)
        try:
            waiting = [await runner.enqueue(wait_for_a_human, queue="support") for _ in range(2)]
            done = await runner.enqueue(double_it, 2, queue="support")
            assert await done.result(timeout=30) == 4
            for handle in waiting:
                await until_suspended(handle)
            url = f"http://127.0.0.1:{server.port}/metrics"
            text = await asyncio.to_thread(
                lambda: urllib.request.urlopen(url, timeout=30).read().decode()
            )
            got = {
                (s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
            }
            gauge = ("stalwart_runs_waiting_for_signal", frozenset({("queue", "support")}))
            assert got[gauge] == 2
            # Answered, the run no longer waits.
            await runner.signal(waiting[0].run_id, "answer", "yes")
            assert await waiting[0].result(timeout=30) == "yes"
            text = await asyncio.to_thread(
                lambda: urllib.request.urlopen(url, timeout=30).read().decode()
            )
        finally:
            server.close()
    after = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert after[gauge] == 1
