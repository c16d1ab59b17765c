"""A human approves in one process; the agent resumes at once in another.

    python examples/approval_wakeup.py
    python examples/approval_wakeup.py --store postgresql://postgres@127.0.0.1:5432/test

A worker process serves the store. This process enqueues an expense run,
which waits for a human's approval (suspended: no worker holds it), then
approves it with a signal, as a web handler would. The worker learns of the
enqueue and of the signal from the store (LISTEN/NOTIFY on PostgreSQL, a
short poll of SQLite's change counter) and resumes the run within
milliseconds. Its ``poll_interval`` is 30 s here, so that nothing else
could explain a quick resume.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import stalwart as sw


@sw.policy
async def expense(ctx: sw.Context, amount: float, what: str) -> str:
    """Ask a human, then book the expense (or not)."""
    decision = await ctx.wait_for("approval", prompt=f"approve {amount:.2f} for {what}?")
    return f"{what}: {decision}"


async def serve(store: str) -> None:
    """The worker: it polls every 30 s, but wakes as soon as the store says so."""
    worker = sw.Runner(store, policies=[expense], poll_interval=30)
    serving = asyncio.create_task(worker.serve())
    await asyncio.sleep(0.3)  # serving, and listening
    print("serving", flush=True)
    await serving


async def approve(store: str) -> None:
    """The app: enqueue, wait for the question, answer it."""
    async with sw.Runner(store, policies=[expense], poll_interval=30) as app:
        handle = await app.enqueue(expense, amount=42.0, what="train ticket")
        # The run executes in the worker: look at the store until it asks.
        while (await app.get_run(handle.run_id)).status != "suspended":  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        print("waiting for approval")
        sent = time.perf_counter()
        await app.signal(handle.run_id, "approval", "approved")
        result = await handle.result(timeout=20)
        print(result)
        print(f"resumed and finished {time.perf_counter() - sent:.3f} s after the signal")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="a store URL (default: a fresh SQLite file)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.store))
        return
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or f"sqlite:///{Path(tmp) / 'expenses.db'}"
        worker = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--store", store],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert worker.stdout is not None and worker.stdout.readline().strip() == "serving"
            asyncio.run(approve(store))
        finally:
            worker.terminate()
            worker.wait(timeout=30)


if __name__ == "__main__":
    main()
