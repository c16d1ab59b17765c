"""The program the chaos trials run in real child processes and kill with SIGKILL.

    python app.py STORE_URL RUN_ID TRIAL_JSON COUNTER run|recover|reference

TRIAL_JSON holds the run's *plan* (made by ``shapes.py`` from a seed) and
how the process runs it (its ``concurrency``; whether the run is started by
the caller or enqueued for the worker loop). A plan is a list of operations
run in order, each folding its result into an accumulator, so every step's
arguments depend on the results before it, and a wrong replayed value shows
in the arguments of later steps and in the result.

Every step body that does work (a leaf, an agent's tool, a flow node's exec,
the step that signals a sibling) first appends ``<pid> <run id>:<identity>``
to COUNTER with a single ``write`` on an ``O_APPEND`` descriptor. One write
of a short line is atomic for a regular file, and SIGKILL cannot undo it (the
page cache outlives the process), so the file counts executions across
crashes; fsync would only add protection against a power loss, which these
trials do not simulate. The identity is the step's key for policies (what
the ledger records), and ``<node>.exec#<item>`` for flow execs (what a
flow's exec record is named), so the test can match executions to records.

This file is run by path and imports nothing from the test package: a
recovering process must find every policy by itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart import llm
from stalwart.flow import (
    AsyncBatchNode,
    AsyncFlow,
    AsyncNode,
    AsyncParallelBatchNode,
    BatchNode,
    Node,
)
from stalwart.testing import ScriptedLLM, call

MODULUS = 1_000_003
INLINE_SLEEP = 0.3  # durable sleeps longer than this suspend the run; shorter ones wait inline
COUNTER_FD = -1
RUNNER: sw.Runner | None = None  # the process's own runner, for the step that signals a sibling


def mix(acc: int, value: int) -> int:
    """Fold a step's result into the accumulator (order matters, so a swap is seen)."""
    return (acc * 31 + value + 7) % MODULUS


def executed(identity: str) -> None:
    """Count one execution, outside the process (see the module docstring)."""
    if COUNTER_FD >= 0:
        os.write(COUNTER_FD, f"{os.getpid()} {identity}\n".encode())


# -- steps ------------------------------------------------------------------------------
@sw.policy
async def leaf(ctx: sw.Context, x: int, pause: float) -> int:
    """The unit of work: long enough in flight for a kill to land inside it."""
    executed(f"{ctx.run_id}:{ctx.step_key}")
    await asyncio.sleep(pause)
    return (x * x + 1) % MODULUS


@sw.policy
async def chain(ctx: sw.Context, x: int, pauses: list[float]) -> int:
    """Sequential steps: the ledger must hold keys 1..k of this step, no hole."""
    for i, pause in enumerate(pauses):
        x = mix(x, await ctx.call(leaf, x + i, pause))
    return x


@sw.policy
async def fan(ctx: sw.Context, x: int, pauses: list[float]) -> int:
    """Concurrent steps (gather): they finish, and are recorded, in any order."""
    results = await asyncio.gather(
        *(ctx.call(leaf, x + i, pause) for i, pause in enumerate(pauses))
    )
    acc = x
    for r in results:
        acc = mix(acc, r)
    return acc


@sw.policy
async def send_signal(ctx: sw.Context, run_id: str, name: str, payload: dict[str, int]) -> bool:
    """One run signalling another; run twice (S3), it leaves an unread duplicate only."""
    executed(f"{ctx.run_id}:{ctx.step_key}")
    assert RUNNER is not None
    await RUNNER.signal(run_id, name, payload)
    return True


# -- an agent with parallel tool calls, on a scripted model --------------------------------
@sw.policy
async def measure(ctx: sw.Context, x: int, pause: float) -> int:
    """Measure x.

    Args:
        x: What to measure.
        pause: How long measuring takes, in seconds.
    """
    executed(f"{ctx.run_id}:{ctx.step_key}")
    await asyncio.sleep(pause)
    return (x * 3 + 1) % MODULUS


@sw.policy
async def weigh(ctx: sw.Context, x: int, pause: float) -> int:
    """Weigh x.

    Args:
        x: What to weigh.
        pause: How long weighing takes, in seconds.
    """
    executed(f"{ctx.run_id}:{ctx.step_key}")
    await asyncio.sleep(pause)
    return (x * 7 + 2) % MODULUS


MAX_TURNS = 4


def _task(observations: Sequence[sw.Message]) -> dict[str, Any]:
    """The agent's task: the JSON the interpreter put in the question."""
    question = next(m for m in observations if m.role == "user")
    task: dict[str, Any] = json.loads(question.text)
    return task


def _turn_reply(turn: int) -> Any:
    """The model's reply on ``turn``: parallel tool calls, then the total of their results.

    Call ids are fixed, not random: a later model call's arguments hold them,
    and the test compares those arguments with the uncrashed run's.
    """

    def reply(observations: list[sw.Message], options: Sequence[Any]) -> Any:
        task = _task(observations)
        if turn < task["turns"]:
            tools = ("measure", "weigh")
            return [
                call(
                    tools[(turn + i) % 2],
                    _id=f"c{turn}_{i}",
                    x=task["x"] + 10 * turn + i,
                    pause=task["pauses"][turn][i],
                )
                for i in range(len(task["pauses"][turn]))
            ]
        acc = task["x"]
        for m in observations:
            if m.action_result is not None:
                acc = mix(acc, int(m.action_result.value))
        return f"total {acc}"

    return reply


model = ScriptedLLM([_turn_reply(t) for t in range(MAX_TURNS + 1)], name="chaos_model")
agent = llm.Agent(
    model,
    instructions="Use the tools as the task says, then give the total.",
    tools=[measure, weigh],
    name="chaos_agent",
    max_rounds=MAX_TURNS + 1,
)


# -- a PocketFlow-style flow with batch nodes ----------------------------------------------
class Split(AsyncNode):
    """Makes the batch and picks the parallel or the one-by-one batch node."""

    async def prep_async(self, shared: dict[str, Any]) -> list[list[Any]]:
        return [[shared["run"], i, shared["x"] + i] for i in range(len(shared["pauses"]))]

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: Any) -> str:
        shared["items"] = prep_res
        return "parallel" if shared["parallel"] else "serial"


async def _work(node: str, item: list[Any], pause: float) -> int:
    run, i, x = item
    executed(f"{run}:{node}.exec#{i}")
    return int(await leaf(x, pause))  # a step of the exec step (awaited policy)


class ParallelWork(AsyncParallelBatchNode):
    """Items at once, recorded in any order."""

    async def prep_async(self, shared: dict[str, Any]) -> list[Any]:
        return [[*item, shared["pauses"][item[1]]] for item in shared["items"]]

    async def exec_async(self, item: list[Any]) -> int:
        return await _work("ParallelWork", item[:3], item[3])

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: Any) -> None:
        shared["worked"] = exec_res


class SerialWork(AsyncBatchNode):
    """Items one by one."""

    async def prep_async(self, shared: dict[str, Any]) -> list[Any]:
        return [[*item, shared["pauses"][item[1]]] for item in shared["items"]]

    async def exec_async(self, item: list[Any]) -> int:
        return await _work("SerialWork", item[:3], item[3])

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: Any) -> None:
        shared["worked"] = exec_res


class Square(BatchNode):
    """A sync batch node inside the async flow (runs on the loop, as in PocketFlow)."""

    def prep(self, shared: dict[str, Any]) -> list[list[Any]]:
        return [[shared["run"], i, v] for i, v in enumerate(shared["worked"])]

    def exec(self, item: list[Any]) -> int:
        run, i, v = item
        executed(f"{run}:Square.exec#{i}")
        return (int(v) ** 2) % MODULUS

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: list[int]) -> None:
        shared["squares"] = exec_res


class Total(Node):
    def prep(self, shared: dict[str, Any]) -> list[int]:
        return list(shared["squares"])

    def exec(self, squares: list[int]) -> int:
        acc = 0
        for s in squares:
            acc = mix(acc, s)
        return acc

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: int) -> None:
        shared["total"] = exec_res


def _build_flow() -> AsyncFlow:
    split, square = Split(), Square()
    split - "parallel" >> ParallelWork() >> square
    split - "serial" >> SerialWork() >> square
    square >> Total()
    flow = AsyncFlow(start=split)
    flow.name = "chaos_flow"  # type: ignore[attr-defined]
    return flow


chaos_flow = _build_flow()


# -- the interpreter -------------------------------------------------------------------------
async def _child_op(ctx: sw.Context, op: dict[str, Any], acc: int) -> int:
    if op["op"] == "map":
        items = [{"plan": sub, "x": acc + j} for j, sub in enumerate(op["children"])]
        for r in await ctx.map(chaos_child, items):
            acc = mix(acc, r)
        return acc
    if op["op"] == "spawn":
        child = await ctx.spawn(chaos_child, {"plan": op["children"][0], "x": acc})
        return mix(acc, await child.result())
    return await _relay(ctx, op, acc)


async def _relay(ctx: sw.Context, op: dict[str, Any], acc: int) -> int:
    """A child run waits for a signal that this run, or a sibling run, sends it."""
    waiter = await ctx.spawn(relay_waiter, {"name": op["name"], "pause": op["pause"]})
    if not op["sibling"]:
        await ctx.call(send_signal, waiter.run_id, op["name"], {"k": acc})
        return mix(acc, await waiter.result())
    sender = await ctx.spawn(relay_sender, {"to": waiter.run_id, "name": op["name"], "k": acc})
    acc = mix(acc, await waiter.result())
    return mix(acc, await sender.result())


async def _op(ctx: sw.Context, op: dict[str, Any], acc: int) -> int:
    """One operation of a plan; each is a whole number of steps of this run's root."""
    kind = op["op"]
    if kind == "step":
        return mix(acc, await ctx.call(leaf, acc, op["pause"]))
    if kind == "chain":
        return mix(acc, await ctx.call(chain, acc, op["pauses"]))
    if kind == "fan":
        return mix(acc, await ctx.call(fan, acc, op["pauses"]))
    if kind == "sleep":
        await ctx.sleep(op["seconds"])
        return mix(acc, 1)
    if kind == "wait":
        payload = await ctx.wait_for(op["name"])
        return mix(acc, int(payload["k"]))
    if kind == "flow":
        shared = {"run": ctx.run_id, "x": acc, "pauses": op["pauses"], "parallel": op["parallel"]}
        out = await ctx.call(chaos_flow, shared=shared)
        return mix(acc, int(out["total"]))
    if kind == "agent":
        task = {"x": acc, "turns": len(op["pauses"]), "pauses": op["pauses"]}
        answer = await ctx.call(agent, question=json.dumps(task))
        return mix(acc, int(str(answer).split()[-1]))
    return await _child_op(ctx, op, acc)


async def interpret(ctx: sw.Context, ops: list[dict[str, Any]], acc: int) -> int:
    for op in ops:
        acc = await _op(ctx, op, acc)
    return acc


@sw.policy
async def chaos_root(ctx: sw.Context, plan: dict[str, Any]) -> int:
    """A trial's run: the plan's operations, in order."""
    return await interpret(ctx, plan["ops"], plan["x"])


@sw.policy
async def chaos_child(ctx: sw.Context, item: dict[str, Any]) -> int:
    """A child run (``ctx.map``/``ctx.spawn``): a smaller plan of its own."""
    return await interpret(ctx, item["plan"], item["x"])


@sw.policy
async def relay_waiter(ctx: sw.Context, item: dict[str, Any]) -> int:
    """A child run that waits for a signal from its parent or a sibling."""
    payload = await ctx.wait_for(item["name"])
    return int(await ctx.call(leaf, int(payload["k"]), item["pause"]))


@sw.policy
async def relay_sender(ctx: sw.Context, item: dict[str, Any]) -> int:
    """A child run that signals its sibling."""
    await ctx.call(send_signal, item["to"], item["name"], {"k": item["k"]})
    return int(item["k"])


POLICIES = [chaos_root, chaos_child, relay_waiter, relay_sender]


# -- main ------------------------------------------------------------------------------------
def root_signals(plan: dict[str, Any]) -> list[tuple[str, dict[str, int]]]:
    """The signals the root run waits for, with the payload the sender gives each."""
    return [(op["name"], {"k": op["k"]}) for op in plan["ops"] if op["op"] == "wait"]


async def begin(runner: sw.Runner, run_id: str, plan: dict[str, Any], enqueue: bool) -> None:
    """Start the run here, or put it on the queue for this process's worker loop to claim."""
    if enqueue:
        await runner.enqueue(chaos_root, plan=plan, run_id=run_id)
    else:
        await runner.start(chaos_root, plan=plan, run_id=run_id)


async def main(url: str, run_id: str, trial: dict[str, Any], action: str) -> None:
    global RUNNER
    plan = trial["plan"]
    runner = sw.Runner(
        url,
        policies=POLICIES,
        inline_sleep=INLINE_SLEEP,
        poll_interval=0.05,
        concurrency=trial["concurrency"],
        serving=True,  # a worker: it resumes what a killed process left, and enqueued runs
    )
    RUNNER = runner
    async with runner:
        print("READY", flush=True)
        if action == "recover":
            await runner.recover()
            try:
                await runner.get_run(run_id)
            except sw.RunNotFound:  # the first process died before its start was recorded:
                await begin(runner, run_id, plan, trial["enqueue"])  # its client retries
        else:
            await begin(runner, run_id, plan, trial["enqueue"])
        if action == "reference":  # the uncrashed run gets its signals at once
            for name, payload in root_signals(plan):
                await runner.signal(run_id, name, payload)
        result = await sw.RunHandle(runner, run_id).result(timeout=120)
        print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    store_url, root_id, plan_path, counter, mode = sys.argv[1:6]
    COUNTER_FD = os.open(counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    with open(plan_path) as f:
        trial_settings = json.load(f)
    asyncio.run(main(store_url, root_id, trial_settings, mode))
