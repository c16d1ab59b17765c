"""`stalwart worker --metrics-port`: a real worker's /metrics, read with
prometheus_client's own parser, against what the store says."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from tests.crash import kill, wait_for_files
from tests.metrics import app
from tests.metrics.scraping import free_port, scrape, start_worker, stop, total, value

import stalwart as sw

ODD = 'odd "name"\nhere\\'
ODD_QUEUE = 'q "1"\n'


async def settled(handle: sw.RunHandle) -> None:
    """Wait until the run has finished, however it ended."""
    try:
        await handle.result(timeout=30)
    except TimeoutError:
        raise
    except Exception:
        return  # failed or cancelled: settled all the same


async def step_count(url: str, policy: str) -> int:
    """How many steps the store recorded for the runs of ``policy``."""
    async with sw.Runner(url) as client:
        runs = await client.store.list_runs(policy=policy, limit=1000)
        return sum([len(await client.store.load_steps(r.id)) for r in runs])


def test_a_workers_counters_equal_the_stores_counts(tmp_path: Path, sqlite_url: str) -> None:
    url, port = sqlite_url, free_port()
    proc = start_worker(url, port, "default", "slow", ODD_QUEUE)
    try:
        before_parked = time.time()

        async def use() -> dict[str, dict[str, int]]:
            async with sw.Runner(url) as client:
                handles = [await client.enqueue(app.greet, n) for n in ("ann", "bo", "cy")]
                handles.append(await client.enqueue(app.refuse, "x", queue="slow"))
                handles += [await client.enqueue(app.odd, n, queue=ODD_QUEUE) for n in (1, 2)]
                await client.enqueue(app.greet, "parked", queue="parked")  # nobody serves it
                for h in handles:
                    await settled(h)
                return await client.store.count_runs()

        counts = asyncio.run(use())
        samples = scrape(proc, port)
        scraped_at = time.time()
        assert counts["succeeded"] == {"default": 3, ODD_QUEUE: 2}
        assert counts["failed"] == {"slow": 1}
        # What this worker counted is what the store recorded.
        for status, by_queue in counts.items():
            for queue, n in by_queue.items():
                assert value(samples, "stalwart_runs", status=status, queue=queue) == n
                if status in ("succeeded", "failed"):
                    finished = total(samples, "stalwart_runs_finished_total", status=status)
                    assert (
                        total(samples, "stalwart_runs_finished_total", status=status, queue=queue)
                        == n
                    ), (status, queue, finished)
        assert (
            value(
                samples,
                "stalwart_runs_finished_total",
                policy=ODD,
                queue=ODD_QUEUE,
                status="succeeded",
            )
            == 2
        )
        assert value(samples, "stalwart_runs_started_total", policy="greet", queue="default") == 3
        # Steps: one live `double` per greet and odd run, as the ledger holds.
        for policy in ("greet", ODD):
            recorded = asyncio.run(step_count(url, policy))
            assert recorded == (3 if policy == "greet" else 2)
            assert (
                value(samples, "stalwart_step_seconds_count", policy=policy, outcome="succeeded")
                == recorded
            )
        assert value(samples, "stalwart_store_up") == 1
        # The run nobody serves waits, and the scrape says for how long.
        assert value(samples, "stalwart_runs", status="pending", queue="parked") == 1
        age = value(samples, "stalwart_oldest_pending_seconds", queue="parked")
        assert 0 < age <= scraped_at - before_parked
    finally:
        stop(proc)


def test_counters_start_from_zero_after_a_kill_while_the_store_keeps_the_truth(
    tmp_path: Path, sqlite_url: str
) -> None:
    url, gate = sqlite_url, tmp_path / "gate"
    port = free_port()
    first = start_worker(url, port)
    try:

        async def greet_twice() -> None:
            async with sw.Runner(url) as client:
                for name in ("ann", "bo"):
                    await settled(await client.enqueue(app.greet, name))
                await client.enqueue(app.held, str(gate), run_id="held")

        asyncio.run(greet_twice())
        samples = scrape(first, port)
        assert (
            value(
                samples,
                "stalwart_runs_finished_total",
                policy="greet",
                queue="default",
                status="succeeded",
            )
            == 2
        )
        # Killed between the held run's recorded step and its end.
        wait_for_files(first, Path(str(gate) + ".reached"))
    finally:
        kill(first)

    gate.write_text("open")
    port = free_port()
    second = start_worker(url, port)
    try:

        async def held_result() -> int:
            async with sw.Runner(url) as client:
                return int(await client.outcome("held"))

        assert asyncio.run(held_result()) == 42
        samples = scrape(second, port)
        # The new process counts only what it did: the held run, resumed by
        # replay (its recorded step answered from the ledger, none live)...
        assert value(samples, "stalwart_runs_started_total", policy="held", queue="default") == 1
        assert (
            value(
                samples,
                "stalwart_runs_finished_total",
                policy="held",
                queue="default",
                status="succeeded",
            )
            == 1
        )
        assert value(samples, "stalwart_steps_replayed_total", policy="held") == 1
        assert total(samples, "stalwart_step_seconds_count", policy="held") == 0
        assert total(samples, "stalwart_runs_finished_total", policy="greet") == 0
        # ...while the store's counts hold every run, whoever executed it.
        assert value(samples, "stalwart_runs", status="succeeded", queue="default") == 3
    finally:
        stop(second)


def test_a_worker_without_metrics_never_imports_prometheus_client(sqlite_url: str) -> None:
    proc = start_worker(sqlite_url, None)
    try:

        async def ask() -> bool:
            async with sw.Runner(sqlite_url) as client:
                return bool(await (await client.enqueue(app.metrics_imported)).result(timeout=30))

        assert asyncio.run(ask()) is False
    finally:
        stop(proc)


def test_a_port_already_taken_fails_clearly(sqlite_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = start_worker(sqlite_url, port)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert f"--metrics-port {port}" in err
