"""Key rotation: new values under the newest key at once, old ones moved by
``stalwart store reencrypt`` beside live workers, resumable after SIGKILL."""

from __future__ import annotations

import asyncio
import re

from tests.crash import kill, spawn, wait_for_line

import stalwart as sw
from stalwart.runner import Runner
from stalwart.stores.encryption import reencrypt

from .app import KEY_1, KEY_2, MARK, POLICIES, keys_text, loud, waiter
from .conftest import database_text, encrypted, suspended


def _labels(url: str) -> set[str]:
    return set(re.findall(r"enc:1:([A-Za-z0-9_.@-]+):", database_text(url)))


async def test_a_pass_beside_a_live_worker_moves_every_value_and_loses_none(
    store_url: str,
) -> None:
    ids = [f"w{i}" for i in range(12)]
    async with Runner(encrypted(store_url, KEY_1), policies=POLICIES) as old:
        for i, run_id in enumerate(ids):
            subject = {"subject": "alice"} if i % 3 == 0 else None
            await old.start(waiter, f"{MARK}-{i}", run_id=run_id, tags=subject)
        for run_id in ids:
            await suspended(old, run_id)
        await sw.Memory(old.store).put(("notes",), "n1", {"note": MARK})  # type: ignore[arg-type]
    rotated = encrypted(store_url, KEY_1, KEY_2)
    async with Runner(rotated, policies=POLICIES, serving=True) as worker:
        other = encrypted(store_url, KEY_1, KEY_2)  # the command's own store, as another process
        await other.open()
        try:

            async def signal_all() -> None:
                for run_id in ids:
                    await worker.signal(run_id, "go", "now")
                    await asyncio.sleep(0.01)

            _, progress = await asyncio.gather(signal_all(), reencrypt(other))
            again = await reencrypt(other)  # what the live worker raced is moved now
        finally:
            await other.close()
        outcomes = [await worker.outcome(run_id) for run_id in ids]
    assert outcomes == [f"{MARK.upper()}-{i} now" for i in range(12)]
    assert (
        progress.values > 0 and progress.subjects == 1 and progress.memories == 2
    )  # a value and its text
    assert again.unopened == 0
    labels = _labels(store_url)
    assert "k1" not in labels and "k2" in labels
    # The old key can go: every value opens under the new one alone.
    async with Runner(encrypted(store_url, KEY_2), policies=POLICIES) as new:
        assert [await new.outcome(run_id) for run_id in ids] == outcomes
        steps = await new.steps("w0")
        assert any(s.output == f'"{MARK.upper()}-0"' for s in steps)
        note = await sw.Memory(new.store).get(("notes",), "n1")  # type: ignore[arg-type]
        assert note is not None and note.value == {"note": MARK}


async def test_a_pass_killed_midway_is_resumed_and_nothing_is_lost(store_url: str) -> None:
    count = 400
    async with Runner(encrypted(store_url, KEY_1), policies=POLICIES) as old:
        for i in range(count):
            await old.start(loud, f"{MARK}-{i}", run_id=f"s{i:04}")
        for i in range(count):
            await old.outcome(f"s{i:04}")
    env = {"STALWART_KEYS": keys_text(KEY_1, KEY_2), "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    first = spawn("-m", "stalwart", "store", "reencrypt", "--store", store_url, env=env)
    wait_for_line(first, "100 run(s) read")
    kill(first)
    assert _labels(store_url) == {"k1", "k2"}  # killed midway: some moved, some not
    second = spawn("-m", "stalwart", "store", "reencrypt", "--store", store_url, env=env)
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert "done:" in out
    assert _labels(store_url) == {"k2"}
    async with Runner(encrypted(store_url, KEY_2), policies=POLICIES) as new:
        for i in range(count):
            assert await new.outcome(f"s{i:04}") == f"{MARK}-{i}".upper() + "!"
        (step,) = await new.steps("s0007")
        assert (step.args, step.output) == (f'{{"*":["{MARK}-7"]}}', f'"{MARK}-7"'.upper())
