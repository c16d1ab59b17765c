"""A worker process for the schedule tests: ``python sched_worker.py URL CLOCK [die]``.

Serves until SIGTERM with a clock read from the file CLOCK (the test moves
time by rewriting it). With ``die``, the worker kills itself with SIGKILL
right after it created a tick's run and before it recorded the next tick:
the one window where a crash could make a tick run twice or never.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))

from tests.schedules._policies import other, report

import stalwart as sw


def main() -> None:
    url, clock_file = sys.argv[1], Path(sys.argv[2])
    die = len(sys.argv) > 3 and sys.argv[3] == "die"
    store = sw.stores.open_store(url)
    if die:

        async def advance_then_die(*args: Any, **kwargs: Any) -> bool:
            os.kill(os.getpid(), signal.SIGKILL)
            raise AssertionError("unreachable")

        store.advance_schedule = advance_then_die  # type: ignore[method-assign]
    runner = sw.Runner(
        store,
        policies=[report, other],
        poll_interval=0.02,
    )
    sw.Schedules(runner, clock=lambda: float(clock_file.read_text()))
    print("serving", flush=True)
    asyncio.run(runner.serve())


if __name__ == "__main__":
    main()
