"""A worker that serves Prometheus metrics, scraped by itself.

    pip install 'stalwart[metrics]'
    python examples/worker_metrics.py                        # a SQLite file in a temp dir
    python examples/worker_metrics.py --store sqlite:///orders.db --port 9464 --serve

It enqueues a few orders (one refused), lets its own serving runner execute
them, then reads ``/metrics`` the way Prometheus would and prints the
Stalwart lines: runs finished by policy, queue and status, the steps they
executed, and the store's own counts. ``--serve`` keeps serving until
Ctrl-C, for a real Prometheus to scrape.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import urllib.request
from pathlib import Path

import stalwart as sw
from stalwart.metrics import Metrics


@sw.policy
async def reserve(item: str) -> str:
    return f"reserved {item}"


@sw.policy
async def charge(amount: int) -> int:
    if amount > 100:
        raise ValueError(f"{amount} is over the limit")
    return amount


@sw.policy
async def order(item: str, amount: int) -> str:
    held = await reserve(item)
    paid = await charge(amount)
    return f"{held}, paid {paid}"


def read(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


async def main(store: str, port: int, serve: bool) -> None:
    metrics = Metrics()
    async with sw.Runner(store, hooks=[metrics], policies=[order], serving=True) as runner:
        server = metrics.serve(runner, port)
        try:
            handles = [
                await runner.enqueue(order, item, amount, queue="orders")
                for item, amount in (("book", 12), ("lamp", 40), ("piano", 900))
            ]
            for handle in handles:
                with contextlib.suppress(ValueError):  # the piano: refused, counted as failed
                    await handle.result(timeout=30)
            url = f"http://127.0.0.1:{server.port}/metrics"
            text = await asyncio.to_thread(read, url)
            for line in text.splitlines():
                if line.startswith(
                    (
                        "stalwart_runs_finished_total",
                        "stalwart_step_seconds_count",
                        "stalwart_runs{",
                    )
                ):
                    print(line)
            if serve:
                print(f"serving {url} until Ctrl-C", flush=True)
                await asyncio.Event().wait()
        finally:
            server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="store URL (default: a SQLite file in a temp dir)")
    parser.add_argument("--port", type=int, default=0, help="metrics port (0: any free one)")
    parser.add_argument("--serve", action="store_true", help="keep serving until Ctrl-C")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store or f"sqlite:///{Path(tmp) / 'orders.db'}"
        asyncio.run(main(url, args.port, args.serve))
