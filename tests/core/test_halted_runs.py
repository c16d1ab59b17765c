"""A halted execution keeps its cause (S6, S14): when the ledger refuses one
of a run's writes, the run stops there and fails with the store's reason,
naming the run and the step, whichever write it was (a step's value, a
step's error, a value the engine records such as ``ctx.now()``); and once
halted, every later write of that execution is refused with the same cause,
even when the policy's code swallowed the first refusal (``asyncio.gather``
with ``return_exceptions=True`` does) and goes on.

The refusal is real: a trigger in the run's SQLite file aborts the insert of
one step's row, as a constraint of the database would.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest

import stalwart as sw

WENT_ON: list[str] = []  # what policy code did after a write of its run was refused
MODES: dict[str, str] = {}  # run id -> how the outer step ends


@pytest.fixture(autouse=True)
def _reset() -> None:
    WENT_ON.clear()
    MODES.clear()


def _refuse(url: str, name: str) -> None:
    """Make the database refuse the row of any step named ``name``."""
    db = sqlite3.connect(url.removeprefix("sqlite:///"))
    with db:
        db.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON steps WHEN NEW.name = '{name}' "
            "BEGIN SELECT RAISE(ABORT, 'this database keeps no such step'); END"
        )
    db.close()


@sw.policy
async def refused(x: int) -> int:
    return x


@sw.policy
async def refused_failing(x: int) -> int:
    raise ValueError(f"bad {x}")


@sw.policy
async def one_refused(ctx: sw.Context, kind: str) -> Any:
    try:
        if kind == "value":
            return await refused(1)
        if kind == "error":
            return await refused_failing(1)
        return await ctx.now()
    except Exception as exc:  # a refused write is not the step's error: never caught here
        WENT_ON.append(f"caught {type(exc).__name__}")
        return "went on"


async def _fails_naming(url: str, policy: sw.Policy[..., Any], arg: str, refuse: str) -> str:
    async with sw.Runner(url, policies=[policy]) as runner:
        _refuse(url, refuse)
        with pytest.raises(sw.StoreError) as caught:
            await runner.run(policy, arg, run_id="halted")
        run = await runner.get_run("halted")
        assert run.status == "failed"
        assert run.error is not None and "this database keeps no such step" in run.error
        steps = await runner.steps("halted")
    assert WENT_ON == []
    text = str(caught.value)
    assert "this database keeps no such step" in text and "run 'halted'" in text
    assert steps == []  # nothing after the refused write was recorded
    return text


async def test_a_refused_step_value_fails_the_run_with_the_stores_reason(
    sqlite_url: str,
) -> None:
    text = await _fails_naming(sqlite_url, one_refused, "value", refused.name)
    assert "step 1 " in text


async def test_a_refused_step_error_fails_the_run_with_the_stores_reason(
    sqlite_url: str,
) -> None:
    text = await _fails_naming(sqlite_url, one_refused, "error", refused_failing.name)
    assert "step 1 " in text


async def test_a_refused_runtime_value_fails_the_run_with_the_stores_reason(
    sqlite_url: str,
) -> None:
    text = await _fails_naming(sqlite_url, one_refused, "now", "stalwart.now")
    assert "step 1 " in text


# -- a refusal the policy's code swallowed ----------------------------------------------
@sw.policy
async def outer(ctx: sw.Context) -> str:
    # A refused write raises a BaseException (the run's, not the step's): a
    # gather that returns exceptions hands it back as a value.
    [first] = await asyncio.gather(refused(1), return_exceptions=True)
    WENT_ON.append(type(first).__name__)
    mode = MODES[ctx.run_id]
    if mode == "now":
        try:
            await ctx.now()
        except Exception as exc:
            WENT_ON.append(f"caught {type(exc).__name__}")
        WENT_ON.append("after now")
    if mode == "error":
        raise ValueError("the outer step fails")
    return "the outer step succeeds"


@sw.policy
async def swallowing_root() -> str:
    return await outer()


@pytest.mark.parametrize("mode", ["value", "error", "now"])
async def test_a_swallowed_refusal_still_stops_the_run_with_its_cause(
    sqlite_url: str, mode: str
) -> None:
    MODES["halted"] = mode
    async with sw.Runner(sqlite_url, policies=[swallowing_root]) as runner:
        _refuse(sqlite_url, refused.name)
        with pytest.raises(sw.StoreError) as caught:
            await runner.run(swallowing_root, run_id="halted")
        run = await runner.get_run("halted")
        steps = await runner.steps("halted")
    text = str(caught.value)
    assert "this database keeps no such step" in text and "step 1.1 " in text
    assert run.status == "failed" and run.error is not None and "step 1.1 " in run.error
    # The outer step's own outcome, and ctx.now()'s, were never recorded.
    assert steps == []
    # Its code went on after the gather, but the next write stopped it: no
    # ``except Exception`` can catch that.
    assert WENT_ON == ["Halt"]
