"""stalwart_runs_stranded: runs of a retired version, counted per queue
when Prometheus scrapes, and none while the store has no serving workers."""

from __future__ import annotations

import asyncio
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

import stalwart as sw
from stalwart.metrics import Metrics
from stalwart.stores import open_store


@sw.policy(name="job")
async def job(ctx: sw.Context) -> str:
    return str(await ctx.wait_for("go"))


async def _scrape(server_port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    url = f"http://127.0.0.1:{server_port}/metrics"
    text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=30).read().decode())
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def _suspended(runner: sw.Runner, run_id: str) -> None:
    deadline = time.monotonic() + 20
    while (await runner.get_run(run_id)).status != "suspended":
        assert time.monotonic() < deadline, f"run {run_id} never suspended"
        await asyncio.sleep(0.02)


async def test_runs_of_a_retired_version_are_counted_stranded(store_url: str) -> None:
    gauge = ("stalwart_runs_stranded", frozenset({("queue", "orders")}))
    metrics = Metrics()
    async with sw.Runner(
        store_url, policies=[job], code_version="v1", serving=True, poll_interval=0.02
    ) as v1:
        server = metrics.serve(v1, 0)
        try:
            for i in range(2):
                await v1.enqueue(job, run_id=f"left-{i}", queue="orders")
                await _suspended(v1, f"left-{i}")
            assert (await _scrape(server.port))[gauge] == 0  # v1 serves them
            store = open_store(store_url)
            await store.open()
            try:
                await store.retire_version("v1")
            finally:
                await store.close()
            assert (await _scrape(server.port))[gauge] == 2
        finally:
            server.close()


async def test_without_serving_workers_nothing_is_counted_stranded(store_url: str) -> None:
    metrics = Metrics()
    async with sw.Runner(store_url, policies=[job]) as runner:
        server = metrics.serve(runner, 0)
        try:
            await runner.start(job, run_id="embedded")
            await _suspended(runner, "embedded")
            got = await _scrape(server.port)
        finally:
            server.close()
    assert not [key for key in got if key[0] == "stalwart_runs_stranded"]
