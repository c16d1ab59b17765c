"""The child processes some workloads start: ``python -m benchmarks.apps KIND ARGS...``.

* ``stalwart-b5 URL COUNTER run|recover N`` and the same for ``dbos-b5 URL
  SCHEMA ...`` and ``langgraph-b5 URL ...``: a 1,000-step run that the parent
  kills with SIGKILL, then its recovery (B5).
* ``stalwart-b6 URL`` and ``dbos-b6 URL SCHEMA``: a worker draining queue
  "b6" until SIGTERM; it prints "ready" once imported and starts on "go" (B6).
"""

from __future__ import annotations

import asyncio
import sys
import time


async def _stalwart_b5(url: str, counter: str, action: str, n: int) -> None:
    import stalwart as sw

    from .workloads import FIRST_LIVE, long_run

    # serving=False: the explicit recover() below is the one claim. (With the
    # background loop recovering too, the two claims can race; see the report.)
    async with sw.Runner(url, policies=[long_run], serving=action == "run") as runner:
        if action == "run":
            await runner.run(long_run, n=n, counter=counter, run_id="b5")
            return
        start = time.perf_counter()
        await runner.recover()
        result = await sw.RunHandle(runner, "b5").result()
        assert result == sum(range(n)), result
        print(f"recovered_in {time.perf_counter() - start}", flush=True)
        print(f"first_live_in {(FIRST_LIVE or [time.perf_counter()])[0] - start}", flush=True)


async def _stalwart_b6(url: str) -> None:
    import stalwart as sw

    from .workloads import small_run

    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    runner = sw.Runner(url, policies=[small_run], queues=["b6"])
    await runner.serve()


def main(argv: list[str]) -> None:
    kind, args = argv[0], argv[1:]
    if kind == "stalwart-b5":
        asyncio.run(_stalwart_b5(args[0], args[1], args[2], int(args[3])))
    elif kind == "stalwart-b6":
        asyncio.run(_stalwart_b6(args[0]))
    elif kind == "dbos-b5":
        from . import dbos_app

        dbos_app.b5_main(args[0], args[1], args[2], args[3], int(args[4]))
    elif kind == "dbos-b6":
        from . import dbos_app

        dbos_app.b6_worker(args[0], args[1])
    elif kind == "langgraph-b5":
        from . import langgraph_app

        langgraph_app.b5_main(args[0], args[1], args[2], int(args[3]))
    else:
        raise SystemExit(f"unknown app {kind!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
