"""A run's tags: given where runs start, kept by the store, inherited by the
run's children, and found again after a crash."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import opened_store
from tests.crash import kill, spawn, wait_for_files

import stalwart as sw
from stalwart.core.tags import decode_tags
from stalwart.stores.base import Store

APP = Path(__file__).with_name("crash_tags_app.py")
ROOT = Path(__file__).resolve().parents[2]
GOLD = {"customer": "c-42", "tier": "gold"}


@sw.policy
async def echo(x: int) -> int:
    return x


@sw.policy
async def fan_out(ctx: sw.Context, n: int) -> list[int]:
    return list(await ctx.map(echo, range(n)))


async def _tags_of(store: Store, run_id: str) -> dict[str, str]:
    rec = await store.get_run(run_id)
    assert rec is not None, run_id
    return decode_tags(rec.tags)


async def test_every_way_of_starting_a_run_keeps_its_tags(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[echo, fan_out]) as runner:
        assert await runner.run(echo, 1, run_id="ran", tags=GOLD) == 1
        handle = await runner.start(echo, 2, run_id="started", tags={"ticket": "T-1"})
        await handle.result()
        await runner.enqueue(echo, 3, run_id="queued", tags={"ticket": "T-1"}, queue="q")
        await runner.enqueue_many(
            [sw.RunCall(echo, 4, run_id="b1"), sw.RunCall(echo, 5, run_id="b2")],
            queue="q",
            tags={"ticket": "T-2"},
        )
        await runner.run(echo, 6, run_id="plain")
        store = runner.store
        assert await _tags_of(store, "ran") == GOLD
        assert await _tags_of(store, "plain") == {}
        found = await store.list_runs(tags={"ticket": "T-1"})
        assert sorted(r.id for r in found) == ["queued", "started"]
        found = await store.list_runs(tags={"ticket": "T-2"})
        assert sorted(r.id for r in found) == ["b1", "b2"]


async def test_child_runs_inherit_their_parents_tags(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[echo, fan_out]) as runner:
        assert await runner.run(fan_out, 2, run_id="fan", tags=GOLD) == [0, 1]
        found = await runner.store.list_runs(tags={"customer": "c-42"})
    assert sorted(r.id for r in found)[0] == "fan"
    assert len(found) == 3 and all(r.parent_id == "fan" for r in found if r.id != "fan")


async def test_a_run_that_exists_keeps_the_tags_it_was_created_with(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[echo]) as runner:
        await runner.run(echo, 1, run_id="r", tags={"customer": "first"})
        await runner.run(echo, 1, run_id="r", tags={"customer": "second"})
        assert await _tags_of(runner.store, "r") == {"customer": "first"}


@pytest.mark.parametrize(
    ("tags", "named"),
    [
        ({"bad key": "v"}, "'bad key'"),
        ({"k" * 65: "v"}, "tag key"),
        ({"k": ""}, "tags['k']"),
        ({"k": "line\nbreak"}, "tags['k']"),
        ({"k": "v" * 257}, "tags['k']"),
        ({f"k{i}": "v" for i in range(17)}, "at most 16"),
    ],
)
async def test_bad_tags_are_refused_naming_the_tag_before_any_run(
    store_url: str, tags: dict[str, str], named: str
) -> None:
    async with sw.Runner(store_url, policies=[echo]) as runner:
        with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
            await runner.start(echo, 1, run_id="r", tags=tags)
        with pytest.raises(ValueError):
            await runner.enqueue(echo, 1, run_id="q", tags=tags)
        assert await runner.store.list_runs() == []


async def test_a_tag_value_that_is_not_text_is_a_type_error() -> None:
    async with sw.Runner("memory://", policies=[echo]) as runner:
        with pytest.raises(TypeError, match=r"tags\['n'\]: a tag value is a string, not int"):
            await runner.run(echo, 1, tags={"n": 1})  # type: ignore[dict-item]


def test_a_killed_tagged_run_resumes_and_tags_the_children_it_spawns_after(
    store_url: str, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"PYTHONPATH": str(ROOT / "src")}
    first = spawn(APP, store_url, marks, json.dumps(GOLD), env=env)
    try:
        wait_for_files(first, marks / "parked")
    finally:
        kill(first)
    # Started again without tags: the run's tags are the ones it was created with.
    second = spawn(APP, store_url, marks, "-", env=env)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0 and "result [10, 20]" in out, err[-800:]

    async def check() -> None:
        async for store in opened_store(store_url):
            found = await store.list_runs(tags=GOLD)
            assert sorted(r.id for r in found)[0] == "P"
            assert len(found) == 3
            assert {r.parent_id for r in found} == {None, "P"}

    asyncio.run(check())


def test_the_tagged_runs_example_runs_as_written(sqlite_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "examples/tagged_runs.py", "--store", sqlite_url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "triage-acme: succeeded [customer=c-42 tier=gold]",
        "triage-acme~1/0: succeeded [customer=c-42 tier=gold]",
        "triage-acme~1/1: succeeded [customer=c-42 tier=gold]",
        "gold runs: 3",
        "pruned c-7: 1",
        "left: ['triage-acme', 'triage-acme~1/0', 'triage-acme~1/1']",
    ]
