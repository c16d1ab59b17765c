"""Moving an unfinished run between stores: it resumes on the target with
its steps, mailbox, waits and child runs; the source keeps it as moved and
refuses it; bad input leaves both stores as they were."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from tests.conftest import _fresh_url, opened_store

import stalwart as sw
from stalwart.core.errors import MoveError, StaleLeaseError, StoreError
from stalwart.core.ledger import RunRecord, StoredStep
from stalwart.core.redact import mask_url
from stalwart.stores.base import Store
from stalwart.timetravel import MOVING, move_run, moved_to

PASSWORD_URL_PART = "s3cret"
ROOT = Path(__file__).resolve().parents[2]


@sw.policy
async def double(x: int) -> int:
    return 2 * x


@sw.policy
async def ask(ctx: sw.Context, x: int) -> int:
    first = await ctx.call(double, x)
    answer = await ctx.wait_for("answer")
    kids = await ctx.map(double, [1, 2])
    return first + int(answer) + sum(kids)


@pytest.fixture(params=["sqlite", "postgres"])
def other_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A second fresh store, of each kind: with ``store_url`` every direction."""
    folder = tmp_path / "other"
    folder.mkdir()
    yield from _fresh_url(request.param, folder)


@pytest.fixture
async def target(other_url: str) -> AsyncIterator[Store]:
    async for s in opened_store(other_url):
        yield s


async def _suspended_run(url: str) -> None:
    """Run "A" of ``ask`` on ``url`` until it waits for its answer."""
    async with sw.Runner(url, policies=[ask, double], inline_sleep=0) as runner:
        handle = await runner.start(ask, 5, run_id="A")
        for _ in range(200):
            rec = await runner.store.get_run("A")
            if rec is not None and rec.status == "suspended":
                break
            await asyncio.sleep(0.05)
        assert handle.run_id == "A"


async def test_a_waiting_run_moves_with_its_mailbox_and_finishes_on_the_target(
    store_url: str, other_url: str
) -> None:
    await _suspended_run(store_url)
    async with sw.Runner(store_url, policies=[ask, double]) as runner:
        await runner.signal("A", "answer", 100)  # sent before the move: read on the target
    async for source in opened_store(store_url):
        async for target in opened_store(other_url):
            moved = await move_run(source, target, "A")
            assert moved.runs == ["A"]
            rec = await source.get_run("A")
            assert rec is not None and rec.status == "cancelled"
            assert moved_to(rec) == moved.to
            with pytest.raises(StoreError, match="finished"):
                await source.send_signal("A", "answer", "1")
            with pytest.raises(StaleLeaseError):
                await source.record_step(
                    "A", rec.fence, StoredStep("9", "double", "h", None, "1", None, 1, 0.0, 0.0)
                )
            copy = await target.get_run("A")
            assert copy is not None and copy.status == "pending"
    async with sw.Runner(other_url, policies=[ask, double], poll_interval=0.05) as runner:
        await runner.recover()
        assert await asyncio.wait_for(runner.outcome("A"), 30) == 10 + 100 + 6
    async with sw.Runner(store_url, policies=[ask, double]) as runner:
        rec = await runner.store.get_run("A")
        assert rec is not None and rec.status == "cancelled"  # no worker here took it again


async def test_a_finished_run_is_refused_and_nothing_changes(store: Store, target: Store) -> None:
    await store.create_run(RunRecord("done", "double", "{}"))
    held = await store.claim("done", "worker-elsewhere", 60.0)
    assert held is not None
    await store.finish_run("done", held.fence, "succeeded", "2", None)
    before = await store.get_run("done")
    with pytest.raises(MoveError, match=r"run 'done'.*has finished \(succeeded\)"):
        await move_run(store, target, "done")
    assert await store.get_run("done") == before
    assert await target.get_run("done") is None


async def test_an_unknown_run_is_refused(store: Store, target: Store) -> None:
    with pytest.raises(MoveError, match=r"run 'nope'.*no such run"):
        await move_run(store, target, "nope")


async def test_an_id_the_target_holds_is_refused_before_the_source_is_touched(
    store_url: str, other_url: str
) -> None:
    await _suspended_run(store_url)
    async with sw.Runner(other_url, policies=[double]) as runner:
        await runner.run(double, 1, run_id="A")
    async for source in opened_store(store_url):
        async for target in opened_store(other_url):
            before = await source.get_run("A")
            with pytest.raises(MoveError, match="target already has a run 'A' \\(succeeded\\)"):
                await move_run(source, target, "A")
            assert await source.get_run("A") == before
            rec = await target.get_run("A")
            assert rec is not None and rec.status == "succeeded"


async def test_a_run_a_live_worker_keeps_executing_is_refused_after_the_timeout(
    store: Store, target: Store
) -> None:
    await store.create_run(RunRecord("busy", "double", "{}"))
    held = await store.claim("busy", "worker-elsewhere", 60.0)
    assert held is not None
    with pytest.raises(MoveError, match=r"executing on worker 'worker-elsewhere'.*within 0.2s"):
        await move_run(store, target, "busy", timeout=0.2)
    after = await store.get_run("busy")
    assert after is not None and (after.status, after.owner, after.fence) == (
        "running",
        "worker-elsewhere",
        held.fence,
    )
    assert await target.get_run("busy") is None


async def test_the_moved_mark_names_the_target_without_its_password(
    store: Store, target: Store
) -> None:
    await store.create_run(RunRecord("p", "double", "{}"))
    target.url = target.url.replace("://", f"://mover:{PASSWORD_URL_PART}@", 1)
    moved = await move_run(store, target, "p")
    rec = await store.get_run("p")
    assert rec is not None and rec.error is not None
    assert PASSWORD_URL_PART not in rec.error and PASSWORD_URL_PART not in moved.to
    assert moved_to(rec) == moved.to and "mover:***@" in moved.to


async def test_moving_again_after_the_move_changes_nothing(store: Store, target: Store) -> None:
    await store.create_run(RunRecord("p", "double", "{}"))
    first = await move_run(store, target, "p")
    again = await move_run(store, target, "p")
    assert (first.runs, first.copied) == (again.runs, again.copied)
    rec = await target.get_run("p")
    assert rec is not None and rec.status == "pending" and rec.waiting_for != MOVING


def test_the_move_example_runs_as_written(sqlite_url: str, other_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "examples/move_run.py", "--store", sqlite_url, "--to", other_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "looking up A-17",
        "on the laptop: suspended",
        "moved refund-A-17 (1 run)",
        f"the laptop's copy: cancelled - moved to {mask_url(other_url)}",
        "refunded 42.0 on A-17, approved by dana",
    ]


async def test_a_move_interrupted_after_the_mark_completes_only_to_its_own_target(
    store: Store, target: Store, tmp_path: Path
) -> None:
    await store.create_run(RunRecord("p", "double", "{}"))
    real = target.import_run

    async def refused(dump: object) -> bool:
        raise StoreError("the target went away")

    target.import_run = refused  # type: ignore[method-assign]
    with pytest.raises(StoreError, match="went away"):
        await move_run(store, target, "p")
    target.import_run = real  # type: ignore[method-assign]
    rec = await store.get_run("p")
    assert rec is not None and moved_to(rec) == mask_url(target.url)
    async for elsewhere in opened_store(f"sqlite:///{tmp_path / 'elsewhere.db'}"):
        with pytest.raises(MoveError, match=r"moved to .* already; give that store"):
            await move_run(store, elsewhere, "p")
        assert await elsewhere.get_run("p") is None
    moved = await move_run(store, target, "p")
    assert moved.runs == ["p"]
    copy = await target.get_run("p")
    assert copy is not None and (copy.status, copy.error) == ("pending", None)
