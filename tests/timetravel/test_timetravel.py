"""Time travel on real stores: export and import, fork, replay tests.

Each test runs on a SQLite file and on the PostgreSQL server (``store_url``).
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw
from stalwart import llm
from stalwart.flow import Flow, Node
from stalwart.stores import open_store
from stalwart.testing import ScriptedLLM, call, replay_async
from stalwart.timetravel import (
    Replace,
    export_runs,
    fork,
    import_runs,
    lineage,
    read_export,
    write_export,
)

RAN: list[tuple[str, Any]] = []


@sw.policy
async def fetch(n: int) -> str:
    RAN.append(("fetch", n))
    return f"page {n}"


@sw.policy
async def summarize(text: str) -> str:
    RAN.append(("summarize", text))
    return text.upper()


@sw.policy
async def pipeline(ctx: sw.Context, topic: str) -> list[str]:
    a = await ctx.call(fetch, 1)
    b = await ctx.call(fetch, 2)
    c = await ctx.call(summarize, f"{topic}: {a} + {b}")
    return [a, b, c]


@pytest.fixture(autouse=True)
def _clean() -> None:
    RAN.clear()


async def _steps(runner: sw.Runner, run_id: str) -> dict[str, sw.StepRecord]:
    return {s.key: s for s in await runner.steps(run_id)}


# -- export and import ------------------------------------------------------------------

BIG = "x" * 40_000  # beyond SPILL_BYTES: kept in the payloads table


@sw.policy
async def big_child(n: int) -> str:
    return BIG + str(n)


@sw.policy
async def parent(ctx: sw.Context, n: int) -> list[str]:
    child = await ctx.spawn(big_child, n)
    got = await ctx.wait_for("go", timeout=30)
    return [await child.result(), got]


async def test_export_import_round_trip_between_stores(store_url: str, tmp_path: Path) -> None:
    async with sw.Runner(store_url, policies=[parent, big_child], poll_interval=0.02) as runner:
        handle = await runner.start(parent, 7, run_id="p1")
        await runner.signal("p1", "go", {"ok": True})
        assert (await handle.result(timeout=20))[1] == {"ok": True}
        dumps = await export_runs(runner.store, "p1", children=True)
    assert [d.run.id for d in dumps] == ["p1", "p1~1/0"]
    assert any(s.output and BIG in s.output for s in dumps[1].steps) or BIG in (
        dumps[1].run.result or ""
    )
    out = io.StringIO()
    write_export(dumps, out)
    text = out.getvalue()
    assert json.loads(text.splitlines()[0])["version"] == 1
    # into the other kind of store, and back out: the same records
    other = f"sqlite:///{tmp_path / 'other.db'}"
    store = open_store(other)
    await store.open()
    try:
        assert await import_runs(store, read_export(io.StringIO(text))) == ["p1", "p1~1/0"]
        assert await import_runs(store, read_export(io.StringIO(text))) == []  # kept once
        again = await export_runs(store, "p1", children=True)
    finally:
        await store.close()
    for a, b in zip(dumps, again, strict=True):
        assert a.run == b.run
        assert a.steps == b.steps
        assert [(s.name, s.payload, s.consumed_by) for s in a.signals] == [
            (s.name, s.payload, s.consumed_by) for s in b.signals
        ]
    # and a run imported into the test's store from SQLite comes back whole
    store = open_store(store_url)
    await store.open()
    try:
        renamed = read_export(io.StringIO(text.replace('"p1', '"q1')))
        assert await import_runs(store, renamed) == ["q1", "q1~1/0"]
        q = await export_runs(store, "q1", children=True)
        assert q[1].run.result == dumps[1].run.result and BIG in (q[1].run.result or "")
    finally:
        await store.close()


def test_a_bad_export_line_is_named() -> None:
    head = '{"format":"stalwart.runs","version":1}\n'
    with pytest.raises(sw.CorruptedRecord, match=r":2: field 'run' is not an object"):
        read_export(io.StringIO(head + '{"type":"run","run":3}\n'))
    with pytest.raises(sw.CorruptedRecord, match="version 9"):
        read_export(io.StringIO('{"format":"stalwart.runs","version":9}\n'))


# -- fork -------------------------------------------------------------------------------


async def test_fork_replays_the_prefix_and_runs_live_from_the_step(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[pipeline]) as runner:
        assert await runner.run(pipeline, "t", run_id="orig") == [
            "page 1",
            "page 2",
            "T: PAGE 1 + PAGE 2",
        ]
        before_fork = await _steps(runner, "orig")
        RAN.clear()
        handle = await fork(
            runner, "orig", at="2", new_run_id="orig-b", replace=Replace(result="edited")
        )
        assert await handle.result(timeout=20) == ["page 1", "edited", "T: PAGE 1 + EDITED"]
        # steps 1 and 2 were replayed, not executed; step 3 ran live with the new value
        assert RAN == [("summarize", "t: page 1 + edited")]
        assert await _steps(runner, "orig") == before_fork  # the original is untouched
        forked = await _steps(runner, "orig-b")
        origin = lineage(forked)
        assert origin is not None and (origin.run_id, origin.at) == ("orig", "2")
        assert origin.replaced == ["result"]


async def test_fork_with_other_inputs_or_step_arguments(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[pipeline]) as runner:
        await runner.run(pipeline, "t", run_id="o2")
        RAN.clear()
        h = await fork(runner, "o2", new_run_id="o2-in", replace=Replace(inputs={"topic": "new"}))
        assert (await h.result(timeout=20))[2] == "NEW: PAGE 1 + PAGE 2"
        assert len(RAN) == 3  # nothing replayed
        RAN.clear()
        # step 2 called again at fork time with n=5; the run replays it and goes on
        h = await fork(
            runner, "o2", at="2", new_run_id="o2-args", replace=Replace(args={"n": 5}, policy=fetch)
        )
        assert await h.result(timeout=20) == ["page 1", "page 5", "T: PAGE 1 + PAGE 5"]
        assert RAN == [("fetch", 5), ("summarize", "t: page 1 + page 5")]
        assert (await runner.get_run("o2")).status == "succeeded"


async def test_fork_on_the_memory_store_is_refused() -> None:
    async with sw.Runner(policies=[pipeline]) as runner:
        await runner.run(pipeline, "t", run_id="m")
        with pytest.raises(sw.StoreError, match="durable store"):
            await fork(runner, "m", at="2")


# -- an agent (stalwart.llm with the scripted model) ---------------------------------------


@sw.policy
async def lookup(city: str) -> str:
    RAN.append(("lookup", city))
    return f"{city}: 18 C"


def _agent(answer: str = "Paris is warm.") -> llm.Agent:
    model = ScriptedLLM([call("lookup", city="Paris"), answer], name="planner")
    return llm.Agent(model, instructions="Use tools.", tools=[lookup], name="weather")


async def test_fork_an_agent_at_the_tool_call_with_an_edited_result(store_url: str) -> None:
    agent = _agent()
    async with sw.Runner(store_url, policies=[agent]) as runner:
        assert await runner.run(agent, "Weather?", run_id="a1") == "Paris is warm."
        keys = sorted(await _steps(runner, "a1"))
        tool_key = next(k for k in keys if "#" in k)
        RAN.clear()
        h = await fork(
            runner, "a1", at=tool_key, new_run_id="a1-b", replace=Replace(result="Paris: -5 C")
        )
        assert await h.result(timeout=20) == "Paris is warm."
        assert RAN == []  # the tool did not run: its edited result was replayed
        forked = await _steps(runner, "a1-b")
        last_model = forked[sorted(k for k in forked if k.count(".") == 0 and k != "0")[-1]]
        assert "-5 C" in (last_model.args or "")  # the model saw the edited result


async def test_replay_an_agent_recording_and_a_changed_agent(store_url: str) -> None:
    agent = _agent()
    async with sw.Runner(store_url, policies=[agent]) as runner:
        await runner.run(agent, "Weather?", run_id="a2")
    report = await replay_async((store_url, "a2"), _agent())
    assert report, report
    RAN.clear()
    # The model is not called on replay (its replies are the record), so a
    # changed script changes nothing; changed instructions change its input.
    changed = llm.Agent(
        ScriptedLLM([call("lookup", city="Paris"), "x"], name="planner"),
        instructions="Use tools, in French.",
        tools=[lookup],
        name="weather",
    )
    report = await replay_async((store_url, "a2"), changed)
    assert not report
    assert RAN == []  # nothing ran live
    first = report.divergences[0]
    assert (first.kind, first.key) == ("arguments", "1")
    assert "in French" in str(report) and "planner" in str(report)


# -- replay of function policies ----------------------------------------------------------------


@sw.policy
async def pipeline_v2(ctx: sw.Context, topic: str) -> list[str]:
    a = await ctx.call(fetch, 1)
    b = await ctx.call(fetch, 3)  # changed
    c = await ctx.call(summarize, f"{topic}: {a} + {b}")
    return [a, b, c]


@sw.policy
async def pipeline_swapped(ctx: sw.Context, topic: str) -> list[str]:
    b = await ctx.call(fetch, 2)
    a = await ctx.call(fetch, 1)
    c = await ctx.call(summarize, f"{topic}: {a} + {b}")
    return [a, b, c]


@sw.policy
async def pipeline_short(ctx: sw.Context, topic: str) -> list[str]:
    a = await ctx.call(fetch, 1)
    b = await ctx.call(fetch, 2)
    return [a, b]


@sw.policy
async def pipeline_longer(ctx: sw.Context, topic: str) -> list[str]:
    out = await pipeline.fn(ctx, topic)  # type: ignore[misc]
    out.append(await ctx.call(fetch, 9))
    return out


@sw.policy
async def pipeline_patched(ctx: sw.Context, topic: str) -> list[str]:
    a = await ctx.call(fetch, 1)
    if await ctx.patched("fetch-three"):
        b = await ctx.call(fetch, 3)
    else:
        b = await ctx.call(fetch, 2)
    c = await ctx.call(summarize, f"{topic}: {a} + {b}")
    return [a, b, c]


async def test_replay_reports_each_kind_of_divergence(store_url: str, tmp_path: Path) -> None:
    async with sw.Runner(store_url, policies=[pipeline]) as runner:
        await runner.run(pipeline, "t", run_id="r1")
        path = tmp_path / "r1.jsonl"
        with open(path, "w") as f:
            write_export(await export_runs(runner.store, "r1"), f)
    RAN.clear()
    assert await replay_async(path, pipeline)
    args = await replay_async(path, pipeline_v2)
    assert [(d.kind, d.key) for d in args.divergences] == [("arguments", "2")]
    assert 'fetch({"*":[2]})' in str(args) and 'fetch({"*":[3]})' in str(args)
    with pytest.raises(AssertionError, match="DIVERGES at step 2"):
        args.check()
    order = await replay_async((store_url, "r1"), pipeline_swapped)
    assert order.divergences[0].kind == "order" and order.divergences[0].key == "1"
    short = await replay_async(path, pipeline_short)
    assert (short.divergences[0].kind, short.divergences[0].key) == ("missing", "3")
    longer = await replay_async(path, pipeline_longer)
    assert [(d.kind, d.key) for d in longer.divergences] == [("extra", "4")]
    assert RAN == []  # nothing executed live, in any of them
    # an old recording replays through the patched code's old branch
    assert await replay_async(path, pipeline_patched)


# -- a flow -----------------------------------------------------------------------------------


class Load(Node):
    def exec(self, prep_res: Any) -> str:
        RAN.append(("load", None))
        return "data"

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> str:
        shared["loaded"] = exec_res
        return "default"


class Shout(Node):
    def prep(self, shared: Any) -> str:
        return str(shared["loaded"])

    def exec(self, prep_res: Any) -> str:
        RAN.append(("shout", prep_res))
        return prep_res.upper()

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> str:
        shared["out"] = exec_res
        return "default"


def _flow(second: type[Node] = Shout) -> Flow:
    first = Load()
    first >> second()
    f = Flow(start=first)
    f.name = "shouter"
    return f


async def test_fork_and_replay_a_flow(store_url: str) -> None:
    flow = _flow()
    async with sw.Runner(store_url, policies=[flow]) as runner:
        shared = await runner.run(flow, shared={}, run_id="f1")
        assert shared["out"] == "DATA"
        keys = sorted(await _steps(runner, "f1"))
        exec_key = next(k for k in keys if k.endswith(".exec") and ".2." in k + ".")
        RAN.clear()
        h = await fork(
            runner, "f1", at=exec_key, new_run_id="f1-b", replace=Replace(result="edited")
        )
        assert (await h.result(timeout=20))["out"] == "edited"
        assert RAN == []
    RAN.clear()
    assert await replay_async((store_url, "f1"), _flow())

    class Whisper(Shout):
        def exec(self, prep_res: Any) -> str:
            return prep_res.lower()

    report = await replay_async((store_url, "f1"), _flow(Whisper))
    assert not report and "Whisper" in str(report) and "Shout" in str(report)
    assert RAN == []  # no exec ran live: the recorded ones answered


async def test_the_memory_store_exports_and_imports_its_runs() -> None:
    async with sw.Runner(policies=[pipeline]) as runner:
        await runner.run(pipeline, "t", run_id="m1")
        [dump] = await export_runs(runner.store, "m1")
    assert dump.run.status == "succeeded" and dump.steps == []  # memory records no steps
    other = open_store(None)
    assert await import_runs(other, [dump]) == ["m1"]
    assert (await other.get_run("m1")) == dump.run


@sw.policy
async def ask_approval(ctx: sw.Context, order: str) -> str:
    """Ask a person.

    Args:
        order: The order.
    """
    approved = await ctx.wait_for("approve", prompt=f"refund {order}?")
    return "approved" if approved else "refused"


async def test_replay_of_a_run_waiting_inside_a_tool_call_ends_where_it_waits(
    store_url: str,
) -> None:
    # The tool call has no record of its own (it has not returned), but the
    # steps inside it do: a resumed run enters it again, and so does a replay.
    model = ScriptedLLM(
        [[call("ask_approval", order="A-1")], [sw.Message.assistant("Done.")]], name="m"
    )
    clerk = llm.Agent(model, instructions="You refund.", tools=[ask_approval], name="clerk")
    async with sw.Runner(store_url, policies=[clerk, ask_approval]) as runner:
        await runner.start(clerk, question="refund A-1?", run_id="clerk-1")
        for _ in range(500):
            if (await runner.get_run("clerk-1")).status == "suspended":
                break
            await asyncio.sleep(0.02)
    report = await replay_async((store_url, "clerk-1"), clerk)
    assert report.ok, str(report)
    assert report.ended_at is not None and report.ended_at.startswith("1#1")
