"""Runs are pinned to the code version they started on; serving runners of
other versions leave them, take them once the gate cleared them, and send
new runs to the latest version; a run nobody live can continue is stranded."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

import stalwart as sw
from stalwart.conversations import conversation_policies
from stalwart.deploy import check_deploy
from stalwart.runner.routing import fleet_of
from stalwart.stores import open_store
from stalwart.stores.base import Store


@sw.policy
async def double(x: int) -> int:
    return 2 * x


@sw.policy(name="job")
async def job_v1(ctx: sw.Context, x: int) -> str:
    a = await double(x)
    return f"v1:{a}:{await ctx.wait_for('go')}"


@sw.policy(name="job")
async def job_v2(ctx: sw.Context, x: int) -> str:
    a = await double(x)
    return f"v2:{a}:{await ctx.wait_for('go')}"


def _serving(url: str, job: object, version: str) -> sw.Runner:
    return sw.Runner(
        url, policies=[job], code_version=version, serving=True, poll_interval=0.02, lease=2
    )


async def _until(runner: sw.Runner, run_id: str, status: str) -> sw.RunRecord:
    deadline = time.monotonic() + 20
    while (rec := await runner.get_run(run_id)).status != status:
        assert time.monotonic() < deadline, f"run {run_id} is {rec.status}, not {status}"
        await asyncio.sleep(0.02)
    return rec


async def test_a_run_stays_with_its_version_until_the_gate_clears_it(store_url: str) -> None:
    async with _serving(store_url, job_v1, "v1") as v1:
        await v1.enqueue(job_v1, 1, run_id="a")
        assert (await _until(v1, "a", "suspended")).code_version == "v1"
    async with _serving(store_url, job_v2, "v2") as v2:
        await v2.signal("a", "go", "yes")
        await v2.recover()  # a claim pass of the v2 runner: it leaves the v1 run
        rec = await v2.get_run("a")
        assert (rec.status, rec.code_version) == ("pending", "v1")
        fleet = await fleet_of(v2.store)
        assert fleet is not None
        assert [w.version for w in fleet.takers(rec)] == []
        why = fleet.stranded(rec, grace=0)
        assert why is not None and "no live worker can continue code version v1" in why
        assert fleet.stranded(rec) is None  # not yet: a v1 worker may come back
        cleared = await v2.store.clear_run("a", ["v2"])
        assert cleared is not None and cleared.cleared == "v2"
        assert await sw.RunHandle(v2, "a").result(timeout=20) == "v2:2:yes"
        assert (await v2.get_run("a")).code_version == "v2"


async def test_new_runs_go_to_the_latest_version(store_url: str) -> None:
    store = open_store(store_url)
    await store.open()
    try:
        await store.set_latest("v2")  # before the runners' first beat: each knows it
    finally:
        await store.close()
    async with (
        _serving(store_url, job_v1, "v1") as v1,
        _serving(store_url, job_v2, "v2") as v2,
        sw.Runner(store_url, serving=False) as client,
    ):
        await v1.enqueue(job_v1, 5, run_id="theirs")  # even its own new run
        await client.enqueue(job_v1, 6, run_id="new")
        for run_id in ("theirs", "new"):
            rec = await _until(v2, run_id, "suspended")
            assert rec.code_version == "v2"  # started by the v2 runner, pinned to it
            await client.signal(run_id, "go", "ok")
        assert await sw.RunHandle(client, "theirs").result(timeout=20) == "v2:10:ok"
        assert await sw.RunHandle(client, "new").result(timeout=20) == "v2:12:ok"


async def test_a_retired_versions_runs_are_stranded_at_once(store_url: str) -> None:
    async with _serving(store_url, job_v1, "v1") as v1:
        await v1.enqueue(job_v1, 1, run_id="left")
        await _until(v1, "left", "suspended")
    store = open_store(store_url)
    await store.open()
    try:
        await store.retire_version("v1")
        fleet = await fleet_of(store)
        assert fleet is not None
        rec = await store.get_run("left")
        assert rec is not None
        why = fleet.stranded(rec)
        assert why is not None and "retired version v1" in why
        pinned = await store.pin_run("left", "v2")
        assert pinned is not None and pinned.code_version == "v2"
        assert fleet.stranded(pinned) is None  # v2 has no worker yet: not for a while
    finally:
        await store.close()


async def test_a_store_without_serving_workers_strands_nothing(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[job_v1]) as runner:
        await runner.start(job_v1, 1, run_id="embedded")
        rec = await _until(runner, "embedded", "suspended")
        fleet = await fleet_of(runner.store)
        assert fleet is not None and fleet.workers == []
        assert fleet.stranded(rec, grace=0) is None


@pytest.mark.parametrize("bad", ["", "two words", "tab\there"])
async def test_a_clearance_refuses_a_version_that_would_not_read_back(
    store_url: str, bad: str
) -> None:
    async with sw.Runner(store_url, policies=[job_v1]) as runner:
        await runner.enqueue(job_v1, 1, run_id="r")
        with pytest.raises(ValueError, match="without spaces"):
            await runner.store.clear_run("r", [bad])


@sw.policy(name="twice")
async def twice_v1(ctx: sw.Context, x: int) -> int:
    await ctx.wait_for("go")
    a = await double(x)
    await ctx.wait_for("again")
    return a


@sw.policy(name="twice")
async def twice_v2(ctx: sw.Context, x: int) -> int:
    await ctx.wait_for("go")
    a = await double(x + 1)  # the new code leaves the record only after "go"
    await ctx.wait_for("again")
    return a


async def test_a_clearance_ends_when_the_runs_own_version_continues_it(store_url: str) -> None:
    async with _serving(store_url, twice_v1, "v1") as v1:
        await v1.enqueue(twice_v1, 1, run_id="c")
        await _until(v1, "c", "suspended")
        report = await check_deploy(v1.store, [twice_v2], clear=True, version="v2")
        assert [r.cleared_for for r in report.runs if r.run_id == "c"] == ["v2"]
        await v1.signal("c", "go", 1)  # v1 goes on: a step the gate never saw
        deadline = time.monotonic() + 20
        while len(await v1.store.load_steps("c")) < 2:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        rec = await _until(v1, "c", "suspended")
        assert (rec.code_version, rec.cleared) == ("v1", None)
    async with _serving(store_url, twice_v2, "v2") as v2:
        await v2.signal("c", "again", 1)
        await v2.recover()  # v2 would diverge at double(2): it leaves the run
        rec = await v2.get_run("c")
        assert (rec.status, rec.code_version) == ("pending", "v1")


async def test_a_run_pinned_to_a_digest_version_goes_to_that_versions_workers(
    store_url: str,
) -> None:
    def digested(job: object) -> sw.Runner:
        return sw.Runner(store_url, policies=[job], serving=True, poll_interval=0.02, lease=2)

    async with digested(job_v1) as v1:
        await v1.enqueue(job_v1, 1, run_id="d")
        await _until(v1, "d", "suspended")
    async with digested(job_v2) as v2:
        await v2.recover()  # its first beat: the store knows its version
        version = v2.app_version  # what `stalwart versions list` shows
        assert await v2.store.pin_run("d", version) is not None
        await v2.signal("d", "go", "yes")
        assert await sw.RunHandle(v2, "d").result(timeout=20) == "v2:2:yes"


_step_may_end = asyncio.Event()


@sw.policy
async def slow() -> int:
    await _step_may_end.wait()
    return 1


@sw.policy(name="held")
async def held_v1(ctx: sw.Context, x: int) -> int:
    await slow()
    a = await double(x)
    await ctx.wait_for("go")
    return a


@sw.policy(name="held")
async def held_v2(ctx: sw.Context, x: int) -> int:
    await slow()
    a = await double(x + 1)  # leaves the record only after the step in flight
    await ctx.wait_for("go")
    return a


async def test_the_gate_clears_no_run_a_live_worker_is_executing(store_url: str) -> None:
    global _step_may_end
    _step_may_end = asyncio.Event()  # one per event loop
    async with _serving(store_url, held_v1, "v1") as v1:
        await v1.enqueue(held_v1, 1, run_id="h")
        await _until(v1, "h", "running")
        report = await check_deploy(v1.store, [held_v2], clear=True, version="v2")
        (found,) = [r for r in report.runs if r.run_id == "h"]
        assert (found.verdict, found.cleared_for) == ("compatible", None)
        assert "executing" in found.why
        _step_may_end.set()  # v1 records slow() and double(1): steps the gate never saw
        rec = await _until(v1, "h", "suspended")
        assert rec.cleared is None


async def test_a_clearance_for_a_run_a_worker_took_since_it_was_read_is_refused(
    store_url: str,
) -> None:
    async with _serving(store_url, twice_v1, "v1") as v1:
        await v1.enqueue(twice_v1, 1, run_id="f")
        read = await _until(v1, "f", "suspended")
        await v1.signal("f", "go", 1)  # taken again: it records double(1)
        deadline = time.monotonic() + 20
        while (now := await v1.get_run("f")).fence == read.fence or now.status != "suspended":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        assert await v1.store.clear_run("f", ["v2"], fence=read.fence) is None
        assert (await v1.get_run("f")).cleared is None
        took = await v1.store.clear_run("f", ["v2"], fence=now.fence)
        assert took is not None and took.cleared == "v2"  # untouched since its read


async def test_a_backlog_another_version_cannot_continue_never_starves_a_worker(
    store_url: str,
) -> None:
    store = open_store(store_url)
    await store.open()
    try:
        old = time.time() - 60
        backlog = [  # woken runs of v1, queued ahead, more than a claim pass reads
            sw.RunRecord(
                f"old{i}", "double", '{"x": 1}', fence=1, code_version="v1", created_at=old
            )
            for i in range(300)
        ]
        await store.create_runs(backlog)
    finally:
        await store.close()
    async with sw.Runner(
        store_url, policies=[double], code_version="v2", serving=True, poll_interval=0.02
    ) as v2:
        handle = await v2.enqueue(double, 21, run_id="new")
        assert await handle.result(timeout=20) == 42
        assert (await v2.get_run("old0")).status == "pending"  # v1's, left for v1


async def test_starting_a_run_of_another_version_again_leaves_it_to_that_version(
    store_url: str,
) -> None:
    async with _serving(store_url, job_v1, "v1") as v1:
        await v1.start(job_v1, 1, run_id="s")
        await _until(v1, "s", "suspended")
    async with _serving(store_url, job_v2, "v2") as v2:
        await v2.signal("s", "go", "yes")  # woken, with no v1 worker left to take it
        await v2.start(job_v2, 1, run_id="s")  # the same run id: the same run, v1's
        await asyncio.sleep(0.3)
        rec = await v2.get_run("s")
        assert (rec.status, rec.code_version) == ("pending", "v1")


@sw.policy
async def echo(question: str, history: list[sw.Message] | None = None) -> str:
    return f"{question} after {len(history or [])}"


async def test_a_conversation_of_another_version_is_left_to_that_versions_workers(
    store_url: str,
) -> None:
    async with _serving(store_url, echo, "v1") as v1:
        assert await sw.Conversation(v1, echo, "talk").send("q1") == "q1 after 0"
        assert (await _until(v1, "talk", "suspended")).code_version == "v1"
    async with _serving(store_url, echo, "v2") as v2:
        talk = sw.Conversation(v2, echo, "talk")
        handle = await talk.put("q2")  # the turn is v2's own; it wakes the v1 conversation
        await _until(v2, "talk", "pending")
        await talk.open()  # executes the conversation here only if v2 may continue it
        rec = await v2.get_run("talk")
        assert (rec.status, rec.code_version) == ("pending", "v1")
        back = sw.Runner(
            store_url,
            policies=conversation_policies(echo),
            code_version="v1",
            serving=True,
            poll_interval=0.02,
            lease=2,
        )
        async with back:  # a v1 worker comes back and answers
            assert await handle.result(timeout=20) == "q2 after 2"
        assert (await v2.get_run("talk")).code_version == "v1"


async def _registered(store: Store, version: str) -> None:
    """Until a worker of ``version`` has beat: it has learned the versions."""
    deadline = time.monotonic() + 20
    while not [w for w in await store.list_workers() if w.version == version]:
        assert time.monotonic() < deadline, f"no worker of {version} ever beat"
        await asyncio.sleep(0.02)


async def test_a_version_named_the_latest_elsewhere_takes_new_runs_before_its_next_beat(
    store_url: str,
) -> None:
    operator = open_store(store_url)  # another connection, as `stalwart versions` is
    await operator.open()
    try:
        await operator.set_latest("v1")
        async with sw.Runner(
            store_url,
            policies=[job_v2],
            code_version="v2",
            serving=True,
            poll_interval=0.02,
            lease=120,  # its next beat is 40 s away: the wake-up must tell it
        ) as v2:
            await _registered(operator, "v2")  # at its first beat: it knows v1 is the latest
            handle = await v2.enqueue(job_v2, 1, run_id="n")
            await v2.recover()
            assert (await v2.get_run("n")).status == "pending"  # a new run: v1's to start
            await operator.set_latest("v2")
            rec = await _until(v2, "n", "suspended")
            assert rec.code_version == "v2"
            await v2.signal("n", "go", "yes")
            assert await handle.result(timeout=20) == "v2:2:yes"
    finally:
        await operator.close()


async def test_a_worker_of_a_version_retired_elsewhere_stops_before_its_next_beat(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    operator = open_store(store_url)
    await operator.open()
    try:
        with caplog.at_level(logging.WARNING, logger="stalwart"):
            async with sw.Runner(
                store_url,
                policies=[job_v1],
                code_version="v1",
                serving=True,
                poll_interval=0.02,
                lease=120,  # its next beat is 40 s away
            ) as v1:
                await _registered(operator, "v1")
                await operator.retire_version("v1")
                deadline = time.monotonic() + 20
                while not [r for r in caplog.records if _event(r) == "version.retired"]:
                    assert time.monotonic() < deadline, "the worker never learned it is retired"
                    await asyncio.sleep(0.02)
                await v1.enqueue(job_v1, 1, run_id="late")
                await v1.recover()  # a claim pass: a retired worker takes nothing
                assert (await v1.get_run("late")).status == "pending"
    finally:
        await operator.close()


def _event(record: logging.LogRecord) -> str | None:
    return getattr(record, "event", None)
