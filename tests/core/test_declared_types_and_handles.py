"""What the core promises of declared types, options, sync steps and run
handles."""

from __future__ import annotations

import asyncio
import gc
import importlib
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw

# -- S11/S13: every type a policy's hints name is declared ---------------------------------------
_APP = """
from __future__ import annotations

import dataclasses

import stalwart as sw

POLICIES = []
"""
_ONE = """

@dataclasses.dataclass
class Item{i}:
    n: int


@sw.policy
async def items_{i}() -> list[Item{i}]:
    return [Item{i}({i})]


POLICIES.append(items_{i})
"""


async def test_every_type_in_many_policies_hints_is_declared(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S11: "a value that cannot be recorded fails at record time"; a value
    whose type the policy's hints name must be recordable. ``declared._walk``
    remembers the annotations it walked by ``id()``; under ``from __future__
    import annotations`` each ``list[ItemN]`` is a fresh object, freed after
    the walk, and the next one often reuses its address: it is skipped, its
    class is never declared, and recording its value raises
    SerializationError ("nothing declares it") depending on memory layout. The
    same program, restarted, can then fail to read back what it recorded."""
    name = f"many_policies_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(_APP + "".join(_ONE.format(i=i) for i in range(100)))
    monkeypatch.syspath_prepend(str(tmp_path))
    app: Any = importlib.import_module(name)
    try:
        async with sw.Runner(sqlite_url) as runner:
            refused = []
            for i, pol in enumerate(app.POLICIES):
                try:
                    await runner.run(pol, run_id=f"items-{i}")
                except sw.SerializationError:
                    refused.append(pol.name)
        assert refused == [], f"{len(refused)} of 100 policies cannot record their own return type"
    finally:
        sys.modules.pop(name, None)


# -- S13: one name, one policy, among offered options too ----------------------------------------
def _lookup_in(db: str) -> sw.Policy[..., str]:
    @sw.policy
    async def lookup(key: str) -> str:
        """Look a key up."""
        return f"{db}:{key}"

    return lookup


@sw.policy
async def model_asks_for_lookup(history: list[sw.Message], options: list[Any]) -> sw.Message:
    return sw.Message.call("lookup", {"key": "k"}, id="c1")


@sw.policy
async def offers_two_namesakes(ctx: sw.Context) -> Any:
    options = [_lookup_in("users"), _lookup_in("orders")]
    return await model_asks_for_lookup([sw.Message.user("find k")], options=options)


async def test_two_options_under_one_name_are_refused() -> None:
    """S13: "one name means one policy". Two offered options named "lookup"
    (a factory's closures) are not refused: the model's call silently goes to
    the last one. ``llm.Agent`` refuses duplicate tool names; raw options
    dispatch must too."""
    with pytest.raises(ValueError, match="lookup"):
        await sw.Runner().run(offers_two_namesakes)


# -- S14: a sync step's failure is its error, never a hang ---------------------------------------
@sw.policy
def first_row(rows: list[int]) -> int:
    return next(iter(rows))  # StopIteration on an empty list: a classic


@sw.policy
async def reads_first_row(ctx: sw.Context) -> str:
    try:
        await first_row([])
    except Exception as exc:
        return f"caught {type(exc).__name__}"
    return "no error"


async def test_a_sync_step_raising_stop_iteration_fails_instead_of_hanging() -> None:
    """S14: any exception a step's code raises is that step's error. A sync
    policy runs in ``asyncio.to_thread``; StopIteration cannot be set on an
    asyncio future, so the loop's callback raises TypeError, the future never
    completes and the run hangs for ever (holding its lease, heartbeats and
    all, on a durable store)."""
    result = await asyncio.wait_for(sw.Runner().run(reads_first_row, run_id="rows"), 2)
    assert result.startswith("caught ")


# -- a handle that is never streamed holds no values ---------------------------------
class Blob:
    """A large value a step returns (a document, an image)."""


REFS: list[weakref.ref[Blob]] = []


@sw.policy
async def makes_blob(i: int) -> Blob:
    blob = Blob()
    REFS.append(weakref.ref(blob))
    return blob


@sw.policy
async def many_blobs(ctx: sw.Context, n: int) -> int:
    for i in range(n):
        await makes_blob(i)  # used and dropped
    return n


async def test_a_handle_only_awaited_for_its_result_keeps_no_step_values_alive() -> None:
    """Buffering every event since ``start()`` for a first ``events()`` call
    that may never come keeps every step's arguments and result alive as long
    as the handle lives (a service keeping handles to poll their status holds
    all its runs' outputs), and turns on the event path for every step."""
    REFS.clear()
    runner = sw.Runner()
    handle = await runner.start(many_blobs, 5, run_id="blobs")
    assert await handle.result() == 5
    gc.collect()
    alive = sum(ref() is not None for ref in REFS)
    assert alive == 0, f"{alive} step results kept alive by a handle nobody streams"
