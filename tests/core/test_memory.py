"""Long-term memory from a policy (``ctx.memory``) and from code
(``sw.Memory``): recorded writes and reads that replay without touching the
memory tables, memory that outlives runs, search by text and by vector,
namespaces apart, a drop that reaches the ledger, and bad input refused with
the field named."""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import AsyncIterator
from typing import Any

import pytest

import stalwart as sw
from stalwart.core.memory import MASKED_ARGS, MAX_VALUE_BYTES
from stalwart.stores import open_store
from stalwart.stores.base import Store
from stalwart.testing import replay_async

USER = ("users", "u-42")
EMBEDDED: list[str] = []


def embed(text: str) -> list[float]:
    """A small deterministic embedding: each word hashed into one of 16
    buckets, normalised. Texts that share words point the same way."""
    EMBEDDED.append(text)
    vec = [0.0] * 16
    for word in text.lower().split():
        vec[hashlib.sha256(word.strip("?.!,").encode()).digest()[0] % 16] += 1.0
    norm = math.sqrt(sum(x * x for x in vec)) or 1.0
    return [x / norm for x in vec]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    EMBEDDED.clear()


@pytest.fixture
async def store(any_store_url: str) -> AsyncIterator[Store]:
    s = open_store(any_store_url)
    await s.open()
    yield s
    await s.close()


@sw.policy
async def note_then_wait(ctx: sw.Context, colour: str) -> dict[str, Any]:
    await ctx.memory.put(USER, "colour", f"favourite colour is {colour}")
    got = await ctx.memory.get(USER, "colour")
    found = await ctx.memory.with_embedder(embed).search(USER, "which colour", by="text")
    await ctx.wait_for("go")
    return {"got": got and got.value, "found": [i.key for i in found]}


async def _until(runner: sw.Runner, run_id: str, status: str) -> None:
    for _ in range(1000):
        if (await runner.get_run(run_id)).status == status:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never became {status}")


async def test_a_resumed_run_replays_its_memory_steps_and_writes_nothing_again(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, poll_interval=0.02, policies=[note_then_wait]) as runner:
        handle = await runner.start(note_then_wait, colour="green", run_id="m")
        await _until(runner, "m", "suspended")
        written = await sw.Memory(runner.store).get(USER, "colour")
        assert written is not None
        # Someone else changes the value while the run sleeps: the resumed
        # run must see what it saw live, and must not write its value again.
        await sw.Memory(runner.store).put(USER, "colour", "favourite colour is red")
        await runner.signal("m", "go")
        result = await handle.result(timeout=10)
        steps = {s.key: s for s in await runner.steps("m")}
        now = await sw.Memory(runner.store).get(USER, "colour")
    assert result == {"got": "favourite colour is green", "found": ["colour"]}
    assert now is not None and now.value == "favourite colour is red"
    assert [steps[k].name for k in ("1", "2", "3")] == [
        "stalwart.memory.put",
        "stalwart.memory.get",
        "stalwart.memory.search",
    ]


@sw.policy
async def remember_and_recall(ctx: sw.Context, fact: str, query: str) -> list[str]:
    memory = ctx.memory.with_embedder(embed)
    await memory.put(USER, f"fact-{fact[:8]}", fact)
    return [str(i.value) for i in await memory.search(USER, query, limit=1)]


async def test_a_recorded_run_replays_without_a_memory_store(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        result = await runner.run(
            remember_and_recall, fact="the office is in Lyon", query="office Lyon", run_id="r"
        )
    assert result == ["the office is in Lyon"]
    embedded = list(EMBEDDED)
    # The replay has no store to reach: every memory step comes from the record.
    report = await replay_async((store_url, "r"), remember_and_recall)
    assert report.ok, str(report)
    assert embedded == EMBEDDED  # and the embedding model was not called again


async def test_memory_outlives_the_run_and_the_runner(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        await runner.run(remember_and_recall, fact="prefers tea", query="tea")
    async with sw.Runner(store_url) as runner:
        found = await runner.run(remember_and_recall, fact="works nights", query="tea prefers")
    assert found == ["prefers tea"]


async def test_search_by_vector_ranks_by_cosine_similarity(store: Store) -> None:
    memory = sw.Memory(store, embed=embed)
    await memory.put(USER, "a", "allergic to peanuts")
    await memory.put(USER, "b", "lives in Lyon near the river")
    await memory.put(USER, "c", "drives a red car")
    found = await memory.search(USER, "lives in Lyon", limit=2)
    assert [i.key for i in found] == ["b", found[1].key]
    assert found[0].score is not None and found[1].score is not None
    assert found[0].score > found[1].score
    assert math.isclose(
        found[0].score, _cos(embed("lives in Lyon"), embed("lives in Lyon near the river"))
    )


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))  # both are unit vectors


async def test_search_by_text_finds_any_word(store: Store) -> None:
    memory = sw.Memory(store)
    await memory.put(USER, "a", {"diet": "vegetarian"}, text="vegetarian, no fish")
    await memory.put(USER, "b", "plays chess on Sundays")
    found = await memory.search(USER, "chess tournament?")
    assert [(i.key, i.value) for i in found] == [("b", "plays chess on Sundays")]
    item = (await memory.search(USER, "fish"))[0]
    assert item.value == {"diet": "vegetarian"} and item.namespace == USER
    assert await memory.search(USER, "?!") == []  # no word: nothing to match


async def test_namespaces_are_apart_through_the_api(store: Store) -> None:
    memory = sw.Memory(store, embed=embed)
    await memory.put(("users", "u-1"), "k", "secret of user one")
    await memory.put(("users", "u-2"), "k", "secret of user two")
    assert [i.value for i in await memory.search(("users", "u-2"), "secret")] == [
        "secret of user two"
    ]
    assert [i.value for i in await memory.recent("users")] == []  # "users" is another namespace
    assert await memory.drop(("users", "u-1")) == 1
    assert await memory.get(("users", "u-1"), "k") is None
    two = await memory.get(("users", "u-2"), "k")
    assert two is not None and two.value == "secret of user two"


async def test_a_vector_search_without_a_model_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="needs an embedding model"):
        await sw.Memory(store).search(USER, "x", by="vector")


async def test_a_drop_masks_what_runs_recorded_of_the_namespace(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        await runner.run(remember_and_recall, fact="born in 1980", query="born", run_id="d")
        assert await sw.Memory(runner.store).drop(USER) == 1
        steps = await runner.steps("d")
    memory_steps = [s for s in steps if s.name.startswith("stalwart.memory.")]
    assert len(memory_steps) == 2
    assert all(s.args == MASKED_ARGS for s in memory_steps)
    assert not any("1980" in (s.args or "") + (s.output or "") for s in memory_steps)
    search = next(s for s in memory_steps if s.name == "stalwart.memory.search")
    assert search.output == "[]"  # a read replays as if the namespace were empty


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda m: m.put((), "k", 1), "'namespace' is empty"),
        (lambda m: m.put(("users", ""), "k", 1), "'namespace[1]' is empty"),
        (lambda m: m.put(("users", 7), "k", 1), "'namespace[1]': a string"),
        (lambda m: m.put({"a": 1}, "k", 1), "'namespace': a string or a tuple"),
        (lambda m: m.put(USER, "", 1), "'key' is empty"),
        (lambda m: m.put(USER, "k\x00", 1), "'key' holds a NUL"),
        (lambda m: m.put(USER, "k", object()), "'value'"),
        (lambda m: m.put(USER, "k", "x" * MAX_VALUE_BYTES), "'value' is 262146 bytes"),
        (lambda m: m.put(USER, "k", 1, text=5), "'text': a string"),
        (lambda m: m.put(USER, "k", 1, text="w " * MAX_VALUE_BYTES), "'text' is 524288"),
        (lambda m: m.search(USER, "q", limit=0), "'limit'"),
        (lambda m: m.search(USER, 3), "'query': a string"),
    ],
)
async def test_bad_input_is_refused_naming_the_field(store: Store, call: Any, field: str) -> None:
    with pytest.raises((TypeError, ValueError, sw.SerializationError)) as caught:
        await call(sw.Memory(store))
    assert field in str(caught.value)
    assert str(caught.value).startswith("memory.")
    assert await sw.Memory(store).recent(USER) == []  # nothing was written


@sw.policy
async def bad_write(ctx: sw.Context) -> None:
    await ctx.memory.put([], "k", 1)


async def test_bad_input_in_a_run_names_the_run_and_the_step(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        with pytest.raises(Exception, match=r"run 'b', step 1: memory.put: field 'namespace'"):
            await runner.run(bad_write, run_id="b")


async def test_in_memory_runs_keep_memory_in_the_process() -> None:
    async with sw.Runner() as runner:
        await runner.run(remember_and_recall, fact="likes sailing", query="sailing")
        found = await sw.Memory(runner.store).search(USER, "sailing")
    assert [i.value for i in found] == ["likes sailing"]


async def test_a_run_resumed_after_a_drop_replays_its_masked_steps_as_empty(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, poll_interval=0.02, policies=[note_then_wait]) as runner:
        handle = await runner.start(note_then_wait, colour="green", run_id="z")
        await _until(runner, "z", "suspended")
        assert await sw.Memory(runner.store).drop(USER) == 1
        await runner.signal("z", "go")
        result = await handle.result(timeout=10)
        rows = await sw.Memory(runner.store).recent(USER)
    # Nothing executed again (no write of the deleted value came back); the
    # reads replayed as if the namespace had been empty.
    assert rows == []
    assert result == {"got": None, "found": []}


# A namespace whose names, as JSON, are longer than what a step record
# refers to instead of copying: each memory step on it after the first
# would record the namespace as a reference to the one before.
LONG = ("tenants", "acme-corporation-international", "users", "alice.smith@example.com")
VALUES = ["v" * 40, "w" * 40]  # a list value long enough to be referred to


@sw.policy
async def several_on_a_long_namespace(ctx: sw.Context) -> None:
    await ctx.memory.put(LONG, "k1", "secret one 1980")
    await ctx.memory.put(LONG, "k2", "secret two 1981")
    await ctx.memory.get(LONG, "k2")
    await ctx.memory.put(USER, "list", VALUES)
    await ctx.memory.put(LONG, "k3", [*VALUES, "secret three 1982"])


async def test_a_drop_masks_every_record_of_a_long_namespace_and_the_run_stays_readable(
    store_url: str,
) -> None:
    async with sw.Runner(store_url) as runner:
        await runner.run(several_on_a_long_namespace, run_id="long")
        assert await sw.Memory(runner.store).drop(USER) == 1
        await runner.steps("long")  # a later step that held the same list reads whole
        assert await sw.Memory(runner.store).drop(LONG) == 3
        steps = await runner.steps("long")
    on_long = [s for s in steps if s.name.startswith("stalwart.memory.") and s.key != "4"]
    assert len(on_long) == 4
    assert all(s.args == MASKED_ARGS for s in on_long)
    recorded = "".join((s.args or "") + (s.output or "") for s in steps)
    assert "secret" not in recorded


@sw.policy
async def read_drop_then_wait(ctx: sw.Context) -> str:
    await ctx.memory.put(USER, "email", "a@example.com")
    got = await ctx.memory.get(USER, "email")
    await ctx.memory.drop(USER)  # the user asked to be forgotten
    await ctx.wait_for("confirm")
    return f"goodbye sent to {got.value if got is not None else None}"


async def test_a_run_that_drops_a_namespace_it_read_resumes_with_what_it_read(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, poll_interval=0.02, policies=[read_drop_then_wait]) as runner:
        handle = await runner.start(read_drop_then_wait, run_id="self-drop")
        await _until(runner, "self-drop", "suspended")
        await runner.signal("self-drop", "confirm")
        assert await handle.result(timeout=10) == "goodbye sent to a@example.com"
