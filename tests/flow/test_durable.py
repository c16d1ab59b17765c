"""Flows under a runner: the run's result, the journal, resuming, events, mixing with policies.

They run on SQLite files. (On PostgreSQL they pass too, except that the
runner's start() and its background recovery can claim one run twice there,
a core race reported separately; switch `sqlite_url` to `store_url` once it
is fixed.) A "crash" here is a runner shut down while a node hangs (its task is
cancelled and the run handed back, as after a process died); a fresh runner
on the same SQLite file then resumes the run. Executions are counted in a
file, outside the runners' memory. `test_crash.py` does the same with real
processes killed by SIGKILL.
"""

from __future__ import annotations

import asyncio
import collections
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw
from stalwart.core.errors import NonDeterminismError, SerializationError
from stalwart.core.policy import as_policy, current_context
from stalwart.flow import (
    AsyncBatchFlow,
    AsyncFlow,
    AsyncNode,
    AsyncParallelBatchFlow,
    AsyncParallelBatchNode,
    BatchFlow,
    BatchNode,
    Flow,
    Node,
    durable,
)
from stalwart.flow.events import NodeFailed, NodeFinished, NodeStarted, flow_name

# -- counting and hanging, outside the runners' memory ------------------------
COUNTS: dict[str, Path] = {}
HANG: set[str] = set()  # tags whose execution hangs until the run is cancelled
RELEASE = threading.Event()  # frees sync nodes hanging in a worker thread


@pytest.fixture(autouse=True)
def _counter(tmp_path: Path) -> Iterator[None]:
    COUNTS["path"] = tmp_path / "executions.txt"
    COUNTS["path"].touch()
    HANG.clear()
    RELEASE.clear()
    yield
    HANG.clear()
    RELEASE.set()


def count(tag: str) -> None:
    with COUNTS["path"].open("a") as f:
        f.write(tag + "\n")


def counts() -> collections.Counter[str]:
    return collections.Counter(COUNTS["path"].read_text().split())


def hang_sync(tag: str) -> None:
    if tag in HANG:
        RELEASE.wait(10)


async def hang_async(tag: str) -> None:
    if tag in HANG:
        await asyncio.sleep(3600)


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


async def crash_and_resume(
    url: str, flow: Any, shared: Any, hang: str, started: Callable[[], bool]
) -> Any:
    """Run until ``started()``, with ``hang`` hanging; stop; resume in a fresh runner."""
    HANG.add(hang)
    runner = sw.Runner(url)
    handle = await runner.start(flow, shared=shared, run_id="run-1")
    await until(started)
    await runner.close()  # the run is handed back unfinished, like after a crash
    HANG.discard(hang)
    RELEASE.set()
    async with sw.Runner(url) as fresh:
        assert (await fresh.get_run(handle.run_id)).status != "succeeded"
        return await (await fresh.start(flow, shared=shared, run_id="run-1")).result(10)


# -- nodes ----------------------------------------------------------------------
class Step(Node):
    """A sync node: reads `x`, adds its increment, logs its name in post."""

    def __init__(self, name: str, inc: int, action: str | None = None) -> None:
        super().__init__()
        self.name = name
        self.inc = inc
        self.action = action

    def prep(self, shared: dict[str, Any]) -> Any:
        count(f"prep:{self.name}")
        return shared["x"]

    def exec(self, x: int) -> int:
        count(f"exec:{self.name}")
        hang_sync(self.name)
        return x + self.inc

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: int) -> Any:
        shared["x"] = exec_res
        shared.setdefault("log", []).append(self.name)
        return self.action


class AStep(AsyncNode):
    """The async twin of Step."""

    def __init__(self, name: str, inc: int, action: str | None = None) -> None:
        super().__init__()
        self.name = name
        self.inc = inc
        self.action = action

    async def prep_async(self, shared: dict[str, Any]) -> Any:
        count(f"prep:{self.name}")
        seen = {"x": shared["x"], "log": list(shared.get("log", []))}
        shared.setdefault("seen", {})[self.name] = seen
        return shared["x"]

    async def exec_async(self, x: int) -> int:
        count(f"exec:{self.name}")
        await hang_async(self.name)
        return x + self.inc

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: int) -> Any:
        shared["x"] = exec_res
        shared.setdefault("log", []).append(self.name)
        return self.action


class Squares(BatchNode):
    def prep(self, shared: dict[str, Any]) -> list[int]:
        return list(range(shared["n"]))

    def exec(self, i: int) -> int:
        count(f"item:{i}")
        hang_sync(f"item:{i}")
        return i * i

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: list[int]) -> None:
        shared["squares"] = exec_res


class ParallelSquares(AsyncParallelBatchNode):
    async def prep_async(self, shared: dict[str, Any]) -> list[int]:
        return list(range(shared["n"]))

    async def exec_async(self, i: int) -> int:
        count(f"item:{i}")
        await asyncio.sleep(0.001 * (i % 5))
        await hang_async(f"item:{i}" if i >= 6 else "-")
        return i * i

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: list[int]) -> None:
        shared["squares"] = exec_res


def chain() -> Flow:
    a, b, c, d = Step("a", 1, "on"), Step("b", 10), Step("c", 100), Step("d", 1000)
    a - "on" >> b >> c >> d
    return Flow(start=a)


def achain() -> AsyncFlow:
    # Mixed on purpose: sync nodes inside an AsyncFlow run on the loop's thread.
    a, b, c, d = AStep("a", 1, "on"), Step("b", 10), AStep("c", 100), AStep("d", 1000)
    a - "on" >> b >> c >> d
    return AsyncFlow(start=a)


# -- a flow is a policy -----------------------------------------------------------
async def test_a_flow_run_returns_the_shared_store_and_updates_the_callers_dict() -> None:
    shared = {"x": 0}
    result = await sw.Runner().run(chain(), shared=shared)
    assert result is shared
    assert shared == {"x": 1111, "log": ["a", "b", "c", "d"]}
    assert await sw.Runner().run(Flow(start=Step("a", 1)), shared={"x": 1}) == {
        "x": 2,
        "log": ["a"],
    }


async def test_shared_defaults_to_a_new_dict() -> None:
    class Hello(Node):
        def post(self, shared: dict[str, Any], prep_res: Any, exec_res: Any) -> None:
            shared["hello"] = "world"

    assert await sw.Runner().run(Flow(start=Hello())) == {"hello": "world"}


async def test_a_durable_run_returns_the_final_store(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        sync = await runner.run(chain(), shared={"x": 0})
        mixed = await runner.run(achain(), shared={"x": 0})
    assert sync == {"x": 1111, "log": ["a", "b", "c", "d"]}
    assert mixed["x"] == 1111 and mixed["log"] == ["a", "b", "c", "d"]


def test_flows_are_named_after_their_name_class_or_start_node() -> None:
    class Pipeline(Flow):
        pass

    named = Flow(start=Step("a", 1))
    named.name = "ingest"  # type: ignore[attr-defined]
    assert flow_name(named) == "ingest"
    assert flow_name(Pipeline(start=Step("a", 1))) == "Pipeline"
    assert flow_name(AsyncFlow(start=AStep("decide", 1))) == "AsyncFlow-decide"
    flow = chain()
    assert as_policy(flow) is as_policy(flow)  # built once
    assert as_policy(flow).name == "Flow-a"


async def test_sync_flows_run_off_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    class Where(Node):
        def exec(self, prep_res: Any) -> None:
            threads.append(threading.get_ident())

    await sw.Runner().run(Flow(start=Where()))
    assert threads and threads[0] != loop_thread


async def test_no_hook_in_memory_unless_someone_streams(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorders: list[Any] = []

    class Recorder(durable.FlowRecorder):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            recorders.append(self)

    monkeypatch.setattr(durable, "FlowRecorder", Recorder)
    await sw.Runner().run(achain(), shared={"x": 0})
    assert recorders == []  # in memory, nobody watching: the flow runs as is
    [_ async for _ in sw.Runner().stream(achain(), shared={"x": 0})]
    assert len(recorders) == 1 and not recorders[0].durable  # events only
    await sw.Runner(sqlite_url).run(achain(), shared={"x": 0})
    assert len(recorders) == 2 and recorders[1].durable


# -- the journal ------------------------------------------------------------------
async def test_each_exec_and_post_is_recorded_under_deterministic_keys(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        await runner.run(achain(), shared={"x": 0}, run_id="r")
        steps = {s.key: s for s in await runner.steps("r")}
    assert list(steps) == [
        "1.prep",
        "1.walk.1.exec",
        "1.walk.1.post",
        "1.walk.2.exec",
        "1.walk.2.post",
        "1.walk.3.exec",
        "1.walk.3.post",
        "1.walk.4.exec",
        "1.walk.4.post",
        "1.post",
    ]
    assert steps["1.walk.1.exec"].name == "a.exec"
    assert steps["1.walk.2.post"].name == "stalwart.flow.post"
    assert steps["1.walk.2.post"].kind == "flow.post"


async def test_batch_items_are_recorded_one_by_one(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        result = await runner.run(AsyncFlow(start=ParallelSquares()), shared={"n": 8}, run_id="r")
        keys = [s.key for s in await runner.steps("r")]
    assert result["squares"] == [i * i for i in range(8)]
    assert sorted(k for k in keys if "#" in k) == sorted(f"1.walk.1.exec#{i}" for i in range(8))


async def test_only_changed_keys_are_recorded_after_a_node(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        await runner.run(chain(), shared={"x": 0, "big": "unchanged " * 100}, run_id="r")
        posts = [s for s in await runner.steps("r") if s.kind == "flow.post"]
    assert all("unchanged" not in (s.output or "") for s in posts)


# -- resuming -------------------------------------------------------------------------
async def test_resume_skips_finished_nodes_and_restores_the_store(sqlite_url: str) -> None:
    result = await crash_and_resume(
        sqlite_url, achain(), {"x": 0}, "c", lambda: counts()["exec:c"] == 1
    )
    assert result["x"] == 1111
    assert result["log"] == ["a", "b", "c", "d"]  # posts of finished nodes not applied twice
    n = counts()
    assert n["exec:a"] == n["exec:b"] == n["exec:d"] == 1  # finished execs never ran again
    assert n["prep:a"] == n["prep:b"] == 1  # nor any of a finished node
    assert n["exec:c"] == 2 and n["prep:c"] == 2  # the node that was running runs again
    # c's prep saw the store as it was after b, the last finished node.
    assert result["seen"]["c"] == {"x": 11, "log": ["a", "b"]}


async def test_resume_a_sync_flow(sqlite_url: str) -> None:
    result = await crash_and_resume(
        sqlite_url, chain(), {"x": 0}, "c", lambda: counts()["exec:c"] == 1
    )
    assert result == {"x": 1111, "log": ["a", "b", "c", "d"]}
    n = counts()
    assert (n["exec:a"], n["exec:b"], n["exec:c"], n["exec:d"]) == (1, 1, 2, 1)


async def test_resume_mid_batch_reruns_only_the_item_in_flight(sqlite_url: str) -> None:
    flow = Flow(start=Squares())
    result = await crash_and_resume(
        sqlite_url, flow, {"n": 10}, "item:6", lambda: counts()["item:6"] == 1
    )
    assert result["squares"] == [i * i for i in range(10)]
    n = counts()
    assert [n[f"item:{i}"] for i in range(10)] == [1, 1, 1, 1, 1, 1, 2, 1, 1, 1]


async def test_resume_mid_parallel_batch_reruns_only_items_in_flight(sqlite_url: str) -> None:
    flow = AsyncFlow(start=ParallelSquares())
    HANG.update(f"item:{i}" for i in range(6, 10))
    runner = sw.Runner(sqlite_url)
    await runner.start(flow, shared={"n": 10}, run_id="r")
    await until(lambda: len(counts()) == 10)
    await until(lambda: sum(1 for k in _keys(sqlite_url) if "#" in k) == 6)
    await runner.close()
    HANG.clear()
    async with sw.Runner(sqlite_url) as fresh:
        result = await (await fresh.start(flow, shared={"n": 10}, run_id="r")).result(10)
    assert result["squares"] == [i * i for i in range(10)]
    n = counts()
    assert [n[f"item:{i}"] for i in range(10)] == [1] * 6 + [2] * 4


def walks_done(url: str) -> list[str]:
    return [k for k in _keys(url) if re.fullmatch(r"1\.walk#\d\.1\.post", k)]


def _keys(url: str) -> list[str]:
    import sqlite3

    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        return [r[0] for r in db.execute("SELECT key FROM steps")]


class Pages(BatchFlow):
    def prep(self, shared: dict[str, Any]) -> list[dict[str, Any]]:
        count("prep:pages")
        return [{"page": p} for p in range(5)]


class Render(Node):
    def prep(self, shared: dict[str, Any]) -> int:
        return int(self.params["page"])

    def exec(self, page: int) -> str:
        count(f"render:{page}")
        hang_sync(f"render:{page}")
        return f"<p>{page}</p>"

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: str) -> None:
        shared.setdefault("html", []).append(exec_res)


class APages(AsyncParallelBatchFlow):
    async def prep_async(self, shared: dict[str, Any]) -> list[dict[str, Any]]:
        count("prep:pages")
        return [{"page": p} for p in range(5)]


class ARender(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> int:
        return int(self.params["page"])

    async def exec_async(self, page: int) -> str:
        count(f"render:{page}")
        await hang_async(f"render:{page}")
        return f"<p>{page}</p>"

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: str) -> None:
        shared.setdefault("html", {})[str(prep_res)] = exec_res


async def test_resume_a_batch_flow_mid_walk(sqlite_url: str) -> None:
    result = await crash_and_resume(
        sqlite_url, Pages(start=Render()), {}, "render:3", lambda: counts()["render:3"] == 1
    )
    assert result["html"] == [f"<p>{p}</p>" for p in range(5)]
    n = counts()
    assert n["prep:pages"] == 1  # the walks to make were recorded
    assert [n[f"render:{p}"] for p in range(5)] == [1, 1, 1, 2, 1]


async def test_resume_a_parallel_batch_flow(sqlite_url: str) -> None:
    result = await crash_and_resume(
        sqlite_url,
        APages(start=ARender()),
        {},
        "render:3",
        lambda: len(counts()) == 6 and len(walks_done(sqlite_url)) == 4,
    )
    assert result["html"] == {str(p): f"<p>{p}</p>" for p in range(5)}
    n = counts()
    assert [n[f"render:{p}"] for p in range(5)] == [1, 1, 1, 2, 1]


class ASeqPages(AsyncBatchFlow):
    async def prep_async(self, shared: dict[str, Any]) -> list[dict[str, Any]]:
        count("prep:pages")
        return [{"page": p} for p in range(5)]


@pytest.mark.parametrize("pages", [APages, ASeqPages])
async def test_resume_an_async_batch_flow(sqlite_url: str, pages: type[AsyncBatchFlow]) -> None:
    result = await crash_and_resume(
        sqlite_url,
        pages(start=ARender()),
        {},
        "render:3",
        lambda: (
            counts()["render:3"] == 1
            and len(walks_done(sqlite_url)) == (4 if pages is APages else 3)
        ),
    )
    assert result["html"] == {str(p): f"<p>{p}</p>" for p in range(5)}
    n = counts()
    assert n["prep:pages"] == 1
    assert [n[f"render:{p}"] for p in range(5)] == [1, 1, 1, 2, 1]


@pytest.mark.parametrize("node", [Step, AStep])
async def test_a_failed_exec_is_recorded_with_what_finished_before(
    sqlite_url: str, node: type[Node]
) -> None:
    class Broken(node):  # type: ignore[valid-type, misc]
        def exec(self, prep_res: Any) -> Any:
            raise ValueError("broken")

        async def exec_async(self, prep_res: Any) -> Any:
            raise ValueError("broken")

    first = AStep("first", 1)
    first >> Broken("broken", 1)
    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(ValueError, match="broken"):
            await runner.run(AsyncFlow(start=first), shared={"x": 0}, run_id="r")
        steps = {s.key: s for s in await runner.steps("r")}
    assert steps["1.walk.1.post"].output is not None
    assert "broken" in (steps["1.walk.2.exec"].error or "")  # errors are data (S4)


async def test_resume_inside_a_nested_flow(sqlite_url: str) -> None:
    inner_a, inner_b = AStep("inner_a", 10), AStep("inner_b", 100)
    inner_a >> inner_b
    inner = AsyncFlow(start=inner_a)
    first, last = AStep("first", 1), AStep("last", 1000)
    first >> inner >> last
    result = await crash_and_resume(
        sqlite_url,
        AsyncFlow(start=first),
        {"x": 0},
        "inner_b",
        lambda: counts()["exec:inner_b"] == 1,
    )
    assert result["x"] == 1111
    assert result["log"] == ["first", "inner_a", "inner_b", "last"]
    n = counts()
    assert (n["exec:first"], n["exec:inner_a"], n["exec:inner_b"], n["exec:last"]) == (1, 1, 2, 1)


async def test_a_finished_run_replays_without_running_anything(sqlite_url: str) -> None:
    # The run finished but its outcome was lost: replay answers every node.
    async with sw.Runner(sqlite_url) as runner:
        first = await runner.run(achain(), shared={"x": 0}, run_id="r")
        import sqlite3

        with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as db:
            db.execute("UPDATE runs SET status='pending', result=NULL, owner=NULL")
    before = counts()
    async with sw.Runner(sqlite_url) as runner:
        again = await (await runner.start(achain(), shared={"x": 0}, run_id="r")).result(5)
    assert again == first
    assert counts() == before


async def test_retries_inside_an_exec_are_one_step(sqlite_url: str) -> None:
    class Flaky(Node):
        def exec(self, prep_res: Any) -> str:
            count(f"attempt:{self.cur_retry}")
            if self.cur_retry < 2:
                raise ValueError("not yet")
            return "ok"

        def post(self, shared: dict[str, Any], prep_res: Any, exec_res: str) -> None:
            shared["result"] = exec_res

    async with sw.Runner(sqlite_url) as runner:
        result = await runner.run(Flow(start=Flaky(max_retries=3)), run_id="r")
        execs = [s for s in await runner.steps("r") if s.name == "Flaky.exec"]
    assert result == {"result": "ok"}
    assert len(execs) == 1
    assert counts() == collections.Counter({"attempt:0": 1, "attempt:1": 1, "attempt:2": 1})


class Slow(Node):
    """A sync node whose exec takes a quarter of a second."""

    def exec(self, prep_res: Any) -> str:
        time.sleep(0.25)
        return "done"


@pytest.mark.parametrize("flow_class", [Flow, AsyncFlow], ids=["thread", "loop"])
async def test_a_sync_exec_is_recorded_with_the_time_it_took(
    sqlite_url: str, flow_class: type[Flow]
) -> None:
    # A sync exec runs before its step is recorded: the record's start is the
    # exec's own start, on a sync flow's thread and on the loop's thread alike.
    async with sw.Runner(sqlite_url) as runner:
        await runner.run(flow_class(start=Slow()), run_id="r")
        (step,) = [s for s in await runner.steps("r") if s.name == "Slow.exec"]
    assert step.finished_at - step.started_at >= 0.25


async def test_a_changed_graph_fails_loudly_on_resume(sqlite_url: str) -> None:
    HANG.add("b")
    runner = sw.Runner(sqlite_url)
    a, b = AStep("a", 1), AStep("b", 1)
    a >> b
    flow = AsyncFlow(start=a)
    flow.name = "evolving"  # type: ignore[attr-defined]
    await runner.start(flow, shared={"x": 0}, run_id="r")
    await until(lambda: counts()["exec:b"] == 1)
    await runner.close()
    HANG.clear()
    other = AsyncFlow(start=AStep("z", 1))
    other.name = "evolving"  # type: ignore[attr-defined]
    async with sw.Runner(sqlite_url) as fresh:
        handle = await fresh.start(other, shared={"x": 0}, run_id="r")
        with pytest.raises(
            NonDeterminismError, match=r"1\.walk\.1.*\n.*flow node a\n.*flow node z"
        ):
            await handle.result(5)


# -- the shared store -------------------------------------------------------------------
async def test_an_unrecordable_value_in_the_store_names_the_key(sqlite_url: str) -> None:
    class Connect(Node):
        def post(self, shared: dict[str, Any], prep_res: Any, exec_res: Any) -> None:
            shared["ok"] = 1
            shared["connection"] = threading.Lock()

    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(SerializationError, match=r"shared\['connection'\] after node Connect"):
            await runner.run(Flow(start=Connect()))
    # In memory nothing is recorded, so anything goes.
    assert "connection" in await sw.Runner().run(Flow(start=Connect()))


async def test_a_flow_run_inside_a_policy_checks_the_store_at_once(sqlite_url: str) -> None:
    @sw.policy
    async def with_queue() -> Any:
        return await AsyncFlow(start=AStep("a", 1)).run_async({"x": 0, "q": asyncio.Queue()})

    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(SerializationError, match=r"shared\['q'\] at the start"):
            await runner.run(with_queue)


@dataclass
class Notes:
    x: int = 0
    log: list[str] = field(default_factory=list)


sw.register_type(Notes)  # a flow's store type: no hint names it, so declare it


async def test_an_object_with_attributes_can_be_the_store(sqlite_url: str) -> None:
    a = Tally("a")
    a >> Tally("b")
    result = await crash_and_resume(
        sqlite_url, Flow(start=a), Notes(), "b", lambda: counts()["exec:b"] == 1
    )
    assert result == Notes(x=2, log=["a", "b"])
    assert counts()["exec:a"] == 1


class Tally(Node):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def exec(self, prep_res: Any) -> None:
        count(f"exec:{self.name}")
        hang_sync(self.name)

    def post(self, shared: Notes, prep_res: Any, exec_res: Any) -> None:
        shared.x += 1
        shared.log.append(self.name)


# -- events --------------------------------------------------------------------------------
async def test_streams_show_nodes_starting_finishing_and_their_actions(sqlite_url: str) -> None:
    for url in (None, sqlite_url):
        seen: list[Any] = []
        async for event in sw.Runner(url).stream(achain(), shared={"x": 0}):
            if isinstance(event, sw.Emitted):
                seen.append(event.value)
        started = [e.node for e in seen if isinstance(e, NodeStarted)]
        finished = [(e.node, e.action) for e in seen if isinstance(e, NodeFinished)]
        assert started == ["AsyncFlow-a", "a", "b", "c", "d"]
        assert finished == [
            ("a", "on"),
            ("b", None),
            ("c", None),
            ("d", None),
            ("AsyncFlow-a", None),
        ]


async def test_a_failing_node_is_streamed(sqlite_url: str) -> None:
    class Boom(AsyncNode):
        async def exec_async(self, prep_res: Any) -> None:
            raise RuntimeError("boom")

    events = [e async for e in sw.Runner(sqlite_url).stream(AsyncFlow(start=Boom()))]
    failed = [e.value for e in events if isinstance(e, sw.Emitted)]
    assert NodeFailed("Boom", "1.walk.1", "RuntimeError", "boom") in failed
    assert isinstance(events[-1], sw.RunFinished) and events[-1].status == "failed"


async def test_replayed_nodes_are_streamed_as_replayed(sqlite_url: str) -> None:
    HANG.add("c")
    runner = sw.Runner(sqlite_url)
    await runner.start(achain(), shared={"x": 0}, run_id="r")
    await until(lambda: counts()["exec:c"] == 1)
    await runner.close()
    HANG.clear()
    seen = []
    async for event in sw.Runner(sqlite_url).stream(achain(), shared={"x": 0}, run_id="r"):
        if isinstance(event, sw.Emitted) and isinstance(event.value, NodeFinished):
            seen.append((event.value.node, event.value.replayed))
    assert seen == [("a", True), ("b", True), ("c", False), ("d", False), ("AsyncFlow-a", False)]


# -- flows and policies mix ------------------------------------------------------------
@sw.policy
async def shout(text: str) -> str:
    """A policy that nodes call."""
    count(f"shout:{text}")
    return text.upper()


class Caller(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> list[str]:
        return [await shout(text="prep"), *shared["words"]]

    async def exec_async(self, words: list[str]) -> list[str]:
        # Concurrent calls keep their keys: they are numbered when made.
        return list(await asyncio.gather(*[shout(text=w) for w in words]))

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: list[str]) -> str:
        shared["loud"] = exec_res
        return "done"


async def test_nodes_call_policies_as_child_steps(sqlite_url: str) -> None:
    first, last = Caller(), AStep("last", 1)
    first - "done" >> last
    flow = AsyncFlow(start=first)
    result = await crash_and_resume(
        sqlite_url, flow, {"words": ["a", "b"], "x": 0}, "last", lambda: counts()["exec:last"] == 1
    )
    assert result["loud"] == ["PREP", "A", "B"]
    assert counts()["shout:a"] == counts()["shout:b"] == counts()["shout:prep"] == 1
    async with sw.Runner(sqlite_url) as runner:
        steps = {s.key: s.name for s in await runner.steps("run-1")}
    assert steps["1.walk.1.prep.1"] == "shout"
    assert steps["1.walk.1.exec.1"] == steps["1.walk.1.exec.2"] == "shout"


async def test_nodes_call_policies_in_memory_too() -> None:
    result = await sw.Runner().run(AsyncFlow(start=Caller()), shared={"words": ["x"]})
    assert result["loud"] == ["PREP", "X"]


def inner_flow() -> AsyncFlow:
    a, b = AStep("inner_a", 1), AStep("inner_b", 10)
    a >> b
    flow = AsyncFlow(start=a)
    flow.name = "inner"  # type: ignore[attr-defined]
    return flow


@sw.policy
async def calls_a_flow(ctx: sw.Context, x: int) -> dict[str, Any]:
    """Runs a flow as a child step: gets its final store back."""
    store = await ctx.call(inner_flow(), shared={"x": x})
    count("after:call")
    return {"x": store["x"], "log": store["log"]}


@sw.policy
async def runs_a_flow(x: int) -> dict[str, Any]:
    """Runs a flow the PocketFlow way: run_async updates the store, returns the action."""
    shared = {"x": x}
    action = await inner_flow().run_async(shared)
    count("after:run_async")
    return {"x": shared["x"], "log": shared["log"], "action": action}


@pytest.mark.parametrize("outer", [calls_a_flow, runs_a_flow])
async def test_a_policy_runs_a_flow_durably(sqlite_url: str, outer: Any) -> None:
    HANG.add("inner_b")
    runner = sw.Runner(sqlite_url)
    await runner.start(outer, x=5, run_id="r")
    await until(lambda: counts()["exec:inner_b"] == 1)
    await runner.close()
    HANG.clear()
    async with sw.Runner(sqlite_url) as fresh:
        result = await (await fresh.start(outer, x=5, run_id="r")).result(5)
    assert result["x"] == 16 and result["log"] == ["inner_a", "inner_b"]
    n = counts()
    assert n["exec:inner_a"] == 1 and n["exec:inner_b"] == 2
    assert await sw.Runner().run(outer, x=5) == result  # and in memory


async def test_a_flow_inside_a_node_is_journaled_with_the_node(sqlite_url: str) -> None:
    class Delegate(AsyncNode):
        async def exec_async(self, prep_res: Any) -> Any:
            shared = {"x": 0}
            await inner_flow().run_async(shared)
            return shared["x"]

        async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: Any) -> None:
            shared["inner"] = exec_res

    async with sw.Runner(sqlite_url) as runner:
        result = await runner.run(AsyncFlow(start=Delegate()), run_id="r")
        keys = [s.key for s in await runner.steps("r")]
    assert result == {"inner": 11}
    assert "1.walk.1.exec.1.1.walk.2.exec" in keys  # the inner flow, under the node's exec


# -- waiting inside a node -------------------------------------------------------------------
class Approve(AsyncNode):
    async def exec_async(self, prep_res: Any) -> Any:
        count("exec:approve")
        ctx = current_context()
        assert ctx is not None
        return await ctx.wait_for("approval")

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: Any) -> None:
        shared["approved"] = exec_res


async def test_a_node_waits_for_a_signal_durably(sqlite_url: str) -> None:
    first = AStep("first", 1)
    first >> Approve()
    flow = AsyncFlow(start=first)
    flow.name = "approval"  # type: ignore[attr-defined]
    async with sw.Runner(sqlite_url, poll_interval=0.02, policies=[flow]) as runner:
        handle = await runner.start(flow, shared={"x": 0}, run_id="r")
        await until(lambda: counts()["exec:approve"] == 1)
        await asyncio.sleep(0.05)
        assert await handle.status() == "suspended"
        await runner.signal("r", "approval", True)
        result = await handle.result(5)
    assert result["approved"] is True and result["x"] == 1
    assert counts()["exec:first"] == 1
