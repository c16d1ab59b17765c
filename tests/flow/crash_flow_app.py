"""A durable flow app that the crash tests run in a child process and SIGKILL.

    python crash_flow_app.py DB RUN_ID SCENARIO COUNTER [STALL]

Runs (or resumes: same DB, same RUN_ID) one scenario on a SQLite ledger.
Every exec appends its tag to the COUNTER file first, then prints
``started TAG``; it prints ``done TAG`` before it returns. The exec tagged
STALL (for "parallel", every item from STALL on) prints ``stalled TAG`` and
never returns, so the parent can kill the process at a known point. At the
end the app prints ``RESULT`` and the final shared store as JSON.

Scenarios:
- ``chain``: an AsyncFlow of five nodes, sync and async mixed;
- ``batch``: a sync Flow whose BatchNode has 100 items (items one by one);
- ``parallel``: an AsyncFlow whose AsyncParallelBatchNode has 100 items.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import stalwart as sw
from stalwart.flow import AsyncFlow, AsyncNode, AsyncParallelBatchNode, BatchNode, Flow, Node

COUNTER = {"path": "", "stall": ""}


def started(tag: str) -> None:
    if COUNTER["path"]:
        with open(COUNTER["path"], "a") as f:
            f.write(tag + "\n")
    print(f"started {tag}", flush=True)


def stalls(tag: str) -> bool:
    stall = COUNTER["stall"]
    if not stall:
        return False
    if tag.startswith("item:") and stall.startswith("item:"):
        return int(tag[5:]) >= int(stall[5:])
    return tag == stall


def stall_sync(tag: str) -> None:
    if stalls(tag):
        print(f"stalled {tag}", flush=True)
        time.sleep(3600)
    print(f"done {tag}", flush=True)


async def stall_async(tag: str) -> None:
    if stalls(tag):
        print(f"stalled {tag}", flush=True)
        await asyncio.sleep(3600)
    print(f"done {tag}", flush=True)


# -- chain --------------------------------------------------------------------------
class Load(Node):
    def exec(self, prep_res: Any) -> list[str]:
        started("load")
        stall_sync("load")
        return ["alpha beta", "gamma delta epsilon", "zeta"]

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: list[str]) -> str:
        shared["docs"] = exec_res
        shared["trail"] = ["load"]
        return "loaded"


class Clean(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> list[str]:
        return list(shared["docs"])

    async def exec_async(self, docs: list[str]) -> list[str]:
        started("clean")
        await stall_async("clean")
        return [d.upper() for d in docs]

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: Any) -> None:
        shared["docs"] = exec_res
        shared["trail"].append("clean")


class Count(Node):
    def prep(self, shared: dict[str, Any]) -> list[str]:
        return list(shared["docs"])

    def exec(self, docs: list[str]) -> int:
        started("count")
        stall_sync("count")
        return sum(len(d.split()) for d in docs)

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: int) -> None:
        shared["words"] = exec_res
        shared["trail"].append("count")


class Slow(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> int:
        return int(shared["words"])

    async def exec_async(self, words: int) -> str:
        started("slow")
        await stall_async("slow")
        return f"{words} words"

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: str) -> None:
        shared["summary"] = exec_res
        shared["trail"].append("slow")


class Finish(AsyncNode):
    async def exec_async(self, prep_res: Any) -> str:
        started("finish")
        await stall_async("finish")
        return "ok"

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: str) -> None:
        shared["status"] = exec_res
        shared["trail"].append("finish")


def chain() -> AsyncFlow:
    load = Load()
    load - "loaded" >> Clean() >> Count() >> Slow() >> Finish()
    flow = AsyncFlow(start=load)
    flow.name = "crash_chain"  # type: ignore[attr-defined]
    return flow


# -- batches ---------------------------------------------------------------------------
class Hashes(BatchNode):
    def prep(self, shared: dict[str, Any]) -> list[int]:
        return list(range(shared["n"]))

    def exec(self, i: int) -> int:
        started(f"item:{i}")
        time.sleep(0.001)
        stall_sync(f"item:{i}")
        return (i * 2654435761) % 1000003

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: list[int]) -> None:
        shared["hashes"] = exec_res
        shared["total"] = sum(exec_res)


class ParallelHashes(AsyncParallelBatchNode):
    async def prep_async(self, shared: dict[str, Any]) -> list[int]:
        return list(range(shared["n"]))

    async def exec_async(self, i: int) -> int:
        started(f"item:{i}")
        await asyncio.sleep(0.001 * (i * 7 % 13))
        await stall_async(f"item:{i}")
        return (i * 2654435761) % 1000003

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: Any) -> None:
        shared["hashes"] = exec_res
        shared["total"] = sum(exec_res)


def batch() -> Flow:
    flow = Flow(start=Hashes())
    flow.name = "crash_batch"  # type: ignore[attr-defined]
    return flow


def parallel() -> AsyncFlow:
    flow = AsyncFlow(start=ParallelHashes())
    flow.name = "crash_parallel"  # type: ignore[attr-defined]
    return flow


SCENARIOS: dict[str, Any] = {
    "chain": (chain, lambda: {"source": "inline"}),
    "batch": (batch, lambda: {"n": 100}),
    "parallel": (parallel, lambda: {"n": 100}),
}


async def run(db: str, run_id: str, scenario: str) -> Any:
    build, initial = SCENARIOS[scenario]
    async with sw.Runner(f"sqlite:///{db}") as runner:
        handle = await runner.start(build(), shared=initial(), run_id=run_id)
        return await handle.result()


def main(argv: list[str]) -> None:
    db, run_id, scenario, counter = argv[:4]
    COUNTER["path"] = counter
    COUNTER["stall"] = argv[4] if len(argv) > 4 else ""
    result = asyncio.run(run(db, run_id, scenario))
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
