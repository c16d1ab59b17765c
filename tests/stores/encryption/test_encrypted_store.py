"""Every recorded value is ciphertext in the database; those with the key
read it back, those without are told "encrypted", never shown garbage."""

from __future__ import annotations

import asyncio

import pytest

import stalwart as sw
from stalwart.core import codec
from stalwart.core.sealed import sealed_state
from stalwart.runner import Runner
from stalwart.stores import open_store
from stalwart.stores.encryption import EncryptedStore

from .app import KEY_1, KEY_2, MARK, POLICIES, everything, listener, shout, waiter
from .conftest import database_text, encrypted, suspended


async def _everything(runner: Runner, run_id: str = "r") -> dict[str, str]:
    await runner.start(listener, run_id=f"{run_id}-listener")
    await runner.start(everything, MARK, run_id=run_id)
    await suspended(runner, run_id)
    await runner.signal(run_id, "answer", f"answer {MARK}")
    out: dict[str, str] = await runner.outcome(run_id)
    return out


async def test_no_byte_of_the_database_holds_a_recorded_value(
    runner: Runner, store_url: str
) -> None:
    out = await _everything(runner)
    assert out == {
        "loud": MARK.upper(),
        "big": str(len(MARK) * 2000),
        "answer": f"answer {MARK}",
        "secret": MARK,
    }
    assert await runner.outcome("r-listener") == f"heard mail {MARK}"
    steps = {s.name: s for s in await runner.steps("r")}
    assert codec.loads(steps["shout"].output or "") in (MARK.upper(), (MARK * 2000).upper())
    memory = await sw.Memory(runner.store).get(("notes",), "secret")  # type: ignore[arg-type]
    assert memory is not None and memory.value == {"note": MARK}
    await runner.close()

    text = database_text(store_url)
    assert "enc:1:k1:" in text
    for marked in (MARK, MARK.upper(), MARK.lower()):
        assert marked not in text


async def test_what_lists_and_schedules_runs_stays_readable(runner: Runner, store_url: str) -> None:
    await runner.start(waiter, MARK, run_id="w", tags={"team": "blue"})
    await suspended(runner, "w")
    await runner.close()
    plain = open_store(store_url, keys=False)
    await plain.open()
    try:
        (run,) = await plain.list_runs(tags={"team": "blue"})
        assert (run.id, run.policy, run.status) == ("w", "waiter", "suspended")
        assert sealed_state(run.inputs) == "encrypted"
        steps = await plain.load_stored_steps("w")
        assert {s.name for s in steps.values()} >= {"shout"}
    finally:
        await plain.close()


async def test_a_reader_without_the_key_is_told_each_value_is_encrypted(
    runner: Runner, store_url: str
) -> None:
    await runner.start(waiter, MARK, run_id="w")
    await suspended(runner, "w")
    await runner.close()
    plain = open_store(store_url, keys=False)
    await plain.open()
    try:
        steps = await plain.load_stored_steps("w")
        (shouted,) = [s for s in steps.values() if s.name == "shout"]
        with pytest.raises(sw.ValueEncrypted, match=r"step 1 of run 'w'.*encrypted \(key 'k1'\)"):
            codec.loads(shouted.output or "", "step 1 of run 'w', field output")
    finally:
        await plain.close()


@pytest.mark.parametrize("subject", [None, "ada"], ids=["master key", "subject key"])
async def test_a_run_resumed_without_its_key_fails_naming_run_and_field(
    store_url: str, subject: str | None
) -> None:
    tags = None if subject is None else {"subject": subject}
    async with Runner(encrypted(store_url, KEY_1), policies=POLICIES) as first:
        await first.start(waiter, MARK, run_id="w", tags=tags)
        await suspended(first, "w")
    # The right id, the wrong key: it opens neither the values nor the
    # subject's key it wrapped.
    stranger = ("k1", b"\x33" * 32)
    async with Runner(encrypted(store_url, stranger), policies=POLICIES, serving=True) as second:
        await second.signal("w", "go", "now")
        with pytest.raises(sw.ValueEncrypted, match=r"inputs of run 'w': the value is encrypted"):
            await second.outcome("w")
        assert (await second.get_run("w")).status == "failed"
        # The runner is not crashed: it runs a new run to the end.
        await second.start(waiter, "fresh", run_id="after", tags=tags)
        await second.signal("after", "go", "yes")
        assert await second.outcome("after") == "FRESH yes"


async def test_a_value_copied_to_another_run_or_step_does_not_open(runner: Runner) -> None:
    import dataclasses

    from stalwart.stores.base import RunDump

    await runner.start(waiter, MARK, run_id="w")
    await suspended(runner, "w")
    store = runner.store
    assert isinstance(store, EncryptedStore)
    dump = await store.inner.export_run("w")
    assert dump is not None
    (shouted,) = [s for s in dump.steps if s.name == "shout"]
    copied = dataclasses.replace(shouted, key="9")  # the same ciphertext at another key
    await store.inner.import_run(
        RunDump(dataclasses.replace(dump.run, id="copy"), [*dump.steps, copied], [])
    )
    mine = await store.load_stored_steps("w")
    assert codec.loads(mine[shouted.key].output or "") == MARK.upper()
    theirs = await store.load_stored_steps("copy")
    for key in (shouted.key, "9"):
        with pytest.raises(sw.ValueEncrypted, match=f"step {key} of run 'copy'"):
            codec.loads(theirs[key].output or "", f"step {key} of run 'copy': output")


async def test_old_keys_still_open_what_they_sealed_and_new_values_take_the_newest(
    store_url: str,
) -> None:
    async with Runner(encrypted(store_url, KEY_1), policies=POLICIES) as first:
        await first.start(waiter, MARK, run_id="w")
        await suspended(first, "w")
    async with Runner(
        encrypted(store_url, KEY_1, KEY_2), policies=POLICIES, serving=True
    ) as second:
        await second.signal("w", "go", "now")
        assert await second.outcome("w") == f"{MARK.upper()} now"
    text = database_text(store_url)
    assert "enc:1:k1:" in text and "enc:1:k2:" in text


async def test_a_schedules_inputs_are_sealed_and_read_back(runner: Runner, store_url: str) -> None:
    from stalwart.schedules import Schedules

    schedules = Schedules(runner)
    await schedules.define(waiter, every=3600, name="nightly", secret=MARK)
    (listed,) = await schedules.all()
    assert MARK in listed.inputs
    assert MARK in (await schedules.get("nightly")).inputs
    await runner.close()
    assert MARK not in database_text(store_url)


async def test_a_fork_of_an_encrypted_run_replays_its_values_under_its_own_id(
    store_url: str,
) -> None:
    from stalwart.timetravel import fork

    from .app import loud

    async with Runner(encrypted(store_url), policies=POLICIES) as r:
        assert await r.run(loud, MARK, run_id="orig", tags={"subject": "ada"}) == f"{MARK.upper()}!"
        (step,) = await r.steps("orig")
        handle = await fork(r, "orig", at=step.key, new_run_id="copy")
        assert await handle.result() == f"{MARK.upper()}!"
        copied = next(s for s in await r.steps("copy") if s.name == "shout")
        assert copied.output == f'"{MARK.upper()}"'
    assert MARK not in database_text(store_url)


@sw.policy
async def generations(ctx: sw.Context, secret: str, generation: int = 1) -> str:
    """Records a step, then continues as new once: its first generation is archived."""
    loud = await shout(f"{secret} {generation}")
    if generation == 1:
        await ctx.engine.mailbox.continue_as_new((secret,), {"generation": 2})
    return str(loud)


async def test_an_archived_generation_still_reads_back(store_url: str) -> None:
    async with Runner(encrypted(store_url), policies=[*POLICIES, generations]) as r:
        assert await r.run(generations, MARK, run_id="g") == f"{MARK.upper()} 2"
        archived = [x for x in await r.list_runs() if x.id.startswith("g~")]
        assert archived, "no generation was archived"
        steps = await r.steps(archived[0].id)
        assert any(s.output == f'"{MARK.upper()} 1"' for s in steps)
    assert MARK not in database_text(store_url)


@sw.policy
async def asks_twice(ctx: sw.Context) -> list[str]:
    return [await ctx.wait_for("input"), await ctx.wait_for("input")]


async def test_a_signal_resent_with_its_uid_is_delivered_once_encrypted(store_url: str) -> None:
    async with Runner(encrypted(store_url), policies=[asks_twice]) as runner:
        handle = await runner.start(asks_twice, run_id="uid-twice")
        await suspended(runner, "uid-twice")
        await runner.signal("uid-twice", "input", "first", uid="answer-1")
        for _ in range(1000):  # until it waits for its second answer
            if len(await runner.steps("uid-twice")) >= 2:
                break
            await asyncio.sleep(0.01)
        await suspended(runner, "uid-twice")
        await runner.signal("uid-twice", "input", "first", uid="answer-1")  # a retry
        await runner.signal("uid-twice", "input", "second", uid="answer-2")
        assert await handle.result(timeout=30) == ["first", "second"]


# Store methods written in terms of others, so the wrapper's own overrides
# serve them; and reseal, which the encrypted store calls on the inner store.
DERIVED_OR_INNER = {"iter_runs", "load_step", "load_steps", "step_page", "steps_by_key", "reseal"}


def test_every_store_method_crosses_the_seam() -> None:
    """A Store method the wrapper does not define would run the base class's
    default on the wrapper (refusing, or reading nothing) instead of reaching
    the store it wraps: each new one must be passed on, opened or sealed."""
    import inspect

    from stalwart.stores.base import Store

    missing = [
        name
        for name, _ in inspect.getmembers(Store, predicate=inspect.isfunction)
        if not name.startswith("_")
        and name not in EncryptedStore.__dict__
        and name not in DERIVED_OR_INNER
    ]
    assert missing == []


async def test_memory_text_search_reads_sealed_memories(runner: Runner, store_url: str) -> None:
    memory = sw.Memory(runner.store)  # type: ignore[arg-type]
    await memory.put(("notes",), "a", {"n": 1}, text=f"peanuts and cashews {MARK}")
    await memory.put(("notes",), "b", {"n": 2}, text="only peanuts")
    await memory.put(("notes",), "c", {"n": 3}, text="a submarine")
    await memory.put(("other",), "d", {"n": 4}, text="peanuts cashews elsewhere")
    found = await memory.search(("notes",), "cashews peanuts", limit=5)
    assert [item.key for item in found] == ["a", "b"]
    assert await memory.search(("notes",), "walrus") == []
    await runner.close()
    text = database_text(store_url)
    assert "cashews" not in text and MARK not in text
