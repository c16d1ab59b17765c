"""Erasing a subject deletes its key: its values become unreadable
everywhere at once, while other subjects' runs go on untouched."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

import stalwart as sw
from stalwart.core import codec
from stalwart.runner import Runner
from stalwart.stores.encryption import EncryptedStore, erase_subject
from stalwart.timetravel import export_runs, write_export

from .app import KEY_1, MARK, POLICIES, keys_text, waiter
from .conftest import database_text, encrypted, suspended


def _show(url: str, run_id: str) -> subprocess.CompletedProcess[str]:
    """``stalwart runs show`` in a process that holds the key."""
    return subprocess.run(
        [sys.executable, "-m", "stalwart", "runs", "show", run_id, "--store", url],
        capture_output=True,
        text=True,
        env={
            "STALWART_KEYS": keys_text(KEY_1),
            "PATH": "/usr/bin:/bin",
            "COLUMNS": "200",
            "PYTHONPATH": ":".join(sys.path),
        },
        timeout=60,
    )


async def test_erasing_one_subject_fails_its_run_precisely_while_another_finishes(
    store_url: str,
) -> None:
    async with Runner(encrypted(store_url), policies=POLICIES) as first:
        await first.start(waiter, f"alice {MARK}", run_id="a", tags={"subject": "alice"})
        await first.start(waiter, "bob", run_id="b", tags={"subject": "bob"})
        await suspended(first, "a")
        await suspended(first, "b")
        store = first.store
        assert isinstance(store, EncryptedStore)
        assert await erase_subject(store, "alice") == 1
    async with Runner(encrypted(store_url), policies=POLICIES, serving=True) as second:
        await second.signal("a", "go", "now")
        await second.signal("b", "go", "now")
        assert await second.outcome("b") == "BOB now"
        with pytest.raises(sw.ValueErased) as erased:
            await second.outcome("a")
        message = str(erased.value)
        assert "run 'a'" in message and "'alice'" in message and "erased" in message
        assert (await second.get_run("a")).status == "failed"


async def test_an_erased_value_reads_as_erased_and_the_run_still_shows(store_url: str) -> None:
    async with Runner(encrypted(store_url), policies=POLICIES) as r:
        await r.start(waiter, MARK, run_id="a", tags={"subject": "alice"})
        await suspended(r, "a")
        store = r.store
        assert isinstance(store, EncryptedStore)
        before = io.StringIO()
        write_export(await export_runs(store.inner, "a"), before)
        await store.erase_subject("alice")
        run = await r.get_run("a")
        assert run.inputs == "enc:erased:alice"
        steps = await r.steps("a")
        shouted = next(s for s in steps if s.name == "shout")
        with pytest.raises(sw.ValueErased, match="step 1 of run 'a'"):
            codec.loads(shouted.output or "", "step 1 of run 'a': output")
        after = io.StringIO()  # an export still works, saying what is gone
        assert write_export(await export_runs(store, "a"), after) == 1
        assert "enc:erased:alice" in after.getvalue() and MARK not in after.getvalue()
    # The export taken before erasure holds ciphertext only, and its key is gone.
    assert MARK not in before.getvalue() and "enc:1:@" in before.getvalue()
    assert MARK not in database_text(store_url) and MARK.upper() not in database_text(store_url)
    shown = _show(store_url, "a")
    assert shown.returncode == 0, shown.stderr
    assert "(erased)" in shown.stdout and "enc:" not in shown.stdout


async def test_a_child_run_takes_its_parents_subject(store_url: str) -> None:
    @sw.policy
    async def parent(ctx: sw.Context, text: str) -> list[str]:
        return list(await ctx.map(waiter_child, [text]))

    @sw.policy
    async def waiter_child(text: str) -> str:
        return text.upper()

    async with Runner(encrypted(store_url), policies=[parent, waiter_child], serving=True) as r:
        await r.start(parent, MARK, run_id="p", tags={"subject": "alice"})
        assert await r.outcome("p") == [MARK.upper()]
        children = [x for x in await r.list_runs() if x.parent_id == "p"]
        assert children, "the parent spawned no child run"
        for child in children:
            assert child.tags is not None and '"subject":"alice"' in child.tags


async def test_a_live_worker_sees_an_erasure_made_elsewhere_within_a_second(
    store_url: str,
) -> None:
    import asyncio

    from stalwart.stores.encryption.subjects import RECHECK

    async with Runner(encrypted(store_url), policies=POLICIES, serving=True) as worker:
        await worker.start(waiter, MARK, run_id="a", tags={"subject": "alice"})
        await suspended(worker, "a")
        assert MARK in (await worker.get_run("a")).inputs  # its key is held here
        elsewhere = encrypted(store_url)  # the CLI, another process
        await elsewhere.open()
        try:
            assert await elsewhere.erase_subject("alice") == 1
        finally:
            await elsewhere.close()
        await asyncio.sleep(RECHECK + 0.1)
        await worker.signal("a", "go", "now")
        with pytest.raises(sw.ValueErased, match="inputs of run 'a'"):
            await worker.outcome("a")
