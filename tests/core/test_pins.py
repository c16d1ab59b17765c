"""Engine mechanisms pinned because a mutation pass found them unguarded.

Each test here fails when the mechanism it names is removed from the
engine (``stalwart.core.engine``, ``stalwart.core.recorded``); docs/mutation.md
says how the mutation pass is run:

* S3, first write wins: a step whose record loses to another executor's
  hands its caller the winner's outcome, whichever of the two succeeded.
* S4, errors are data: a failed step's record keeps its arguments, attempts
  and times; a replayed failure is reported as replayed, naming it.
* S13: a recorded error whose args were not plain JSON, or whose class
  cannot be rebuilt from its message, still comes back without a crash.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

import stalwart as sw
from stalwart.core import codec
from stalwart.core.ledger import StepRecord
from stalwart.core.recorded import error_from_json, error_to_json

# -- S3: the losing executor gets the winner's outcome ---------------------------------------
RUNNERS: dict[str, sw.Runner] = {}  # run id -> the runner executing it
RIVALS: dict[str, StepRecord] = {}  # run id -> what "another executor" records first
FAILS: set[str] = set()  # run ids whose own execution of the step raises
EXECUTED: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    for registry in (RUNNERS, RIVALS, FAILS, EXECUTED):
        registry.clear()


@sw.policy
async def contested(ctx: sw.Context, x: int) -> int:
    """Records a rival outcome for its own key before finishing (a second
    executor of the same step, which the store lets in first)."""
    EXECUTED.append(ctx.run_id)
    rival = RIVALS.pop(ctx.run_id, None)
    if rival is not None:
        runner = RUNNERS[ctx.run_id]
        assert runner.store is not None
        fence = (await runner.get_run(ctx.run_id)).fence
        await runner.store.record_step(
            ctx.run_id, fence, dataclasses.replace(rival, key=ctx.step_key)
        )
    if ctx.run_id in FAILS:
        raise ValueError("mine")
    return x * 2


@sw.policy
async def race_root(x: int) -> str:
    try:
        return f"value {await contested(x)}"
    except (KeyError, ValueError) as exc:
        return f"{type(exc).__name__} {exc.args[0]}"


async def _race(url: str, *, fails: bool, output: Any = None, error: Any = None) -> str:
    """The result of a run whose one step loses its record to a rival that
    recorded ``output`` (a value) or ``error`` (an exception)."""
    async with sw.Runner(url, policies=[race_root]) as runner:
        assert await runner.run(race_root, 21, run_id="ref") == "value 42"
        model = next(s for s in await runner.steps("ref") if s.name == contested.name)
        RIVALS["race"] = dataclasses.replace(
            model,
            output=None if output is None else codec.dumps(output),
            error=None if error is None else error_to_json(error),
        )
        RUNNERS["race"] = runner
        if fails:
            FAILS.add("race")
        result: str = await runner.run(race_root, 21, run_id="race")
        # The ledger keeps the winner, so a replay agrees with what the caller saw.
        assert await runner.run(race_root, 21, run_id="race") == result
    assert EXECUTED == ["ref", "race"]
    return result


async def test_a_success_that_loses_the_race_returns_the_winners_value(sqlite_url: str) -> None:
    assert await _race(sqlite_url, fails=False, output=-1) == "value -1"


async def test_a_success_that_loses_to_a_recorded_error_raises_that_error(
    sqlite_url: str,
) -> None:
    assert await _race(sqlite_url, fails=False, error=KeyError("theirs")) == "KeyError theirs"


async def test_a_failure_that_loses_to_a_recorded_success_returns_that_value(
    sqlite_url: str,
) -> None:
    assert await _race(sqlite_url, fails=True, output=-1) == "value -1"


async def test_a_failure_that_loses_to_another_error_raises_the_winners(sqlite_url: str) -> None:
    assert await _race(sqlite_url, fails=True, error=KeyError("theirs")) == "KeyError theirs"


# -- S4: a failed step's record, and its replay ----------------------------------------------
@sw.policy(retries=2, backoff=0)
async def flaky_forever(tag: str, n: int) -> int:
    EXECUTED.append(tag)
    raise ValueError(f"no {tag}")


@sw.policy
async def halve(x: int) -> int:
    EXECUTED.append(f"halve {x}")
    return x // 2


@sw.policy
async def fails_then_waits(ctx: sw.Context) -> str:
    half = await halve(8)
    try:
        await flaky_forever("x", n=3)
    except ValueError as exc:
        seen = str(exc)
    return f"{half} {seen} / {await ctx.wait_for('go')}"


async def test_a_failed_steps_record_keeps_its_arguments_attempts_and_times(
    sqlite_url: str,
) -> None:
    async with sw.Runner(sqlite_url, poll_interval=0.02, policies=[fails_then_waits]) as runner:
        handle = await runner.start(fails_then_waits, run_id="f")
        while (await runner.get_run("f")).status != "suspended":
            await asyncio.sleep(0.01)
        [step] = [s for s in await runner.steps("f") if s.name == flaky_forever.name]
        assert step.output is None and step.error is not None
        assert step.attempts == 3  # what `runs show` prints: tried three times
        assert step.args is not None and codec.loads(step.args)["n"] == 3  # shown by `runs show`
        assert 0 < step.started_at <= step.finished_at

        events = handle.events()
        await runner.signal("f", "go", "on")
        seen = [e async for e in events]
        assert await handle.result(timeout=10) == "4 no x / on"
    assert EXECUTED == ["halve 8", "x", "x", "x"]  # the replay ran nothing again
    # What a hook or a UI is told: the live call with all its arguments, then
    # on replay each recorded outcome, marked as replayed.
    started = [e for e in seen if isinstance(e, sw.CallStarted) and e.name == flaky_forever.name]
    assert [e.arguments for e in started] == [{"*": ["x"], "n": 3}]
    finished = [e for e in seen if isinstance(e, sw.CallFinished) and e.replayed]
    assert finished == [sw.CallFinished("f", "1", halve.name, 4, 0.0, True)]
    failed = [e for e in seen if isinstance(e, sw.CallFailed) and e.replayed]
    assert failed == [sw.CallFailed("f", step.key, flaky_forever.name, "ValueError", "no x", True)]


# -- S13: recorded errors that cannot come back whole ---------------------------------------
def test_a_recorded_error_is_strict_json_even_with_nan_args() -> None:
    """The ledger holds JSON any reader parses (PostgreSQL, jq), never NaN."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in a recorded error")

    text = error_to_json(ValueError(float("nan"), "x"))
    assert json.loads(text, parse_constant=refuse)["type"] == "builtins.ValueError"
    back = error_from_json(text)
    assert type(back) is ValueError and str(back) == "(nan, 'x')"


def test_a_step_error_passed_up_keeps_the_original_type_name() -> None:
    """A parent step failing with a child's rebuilt StepError records the
    child's type and message, not "StepError"."""
    back = error_from_json(error_to_json(sw.StepError("QuotaExceeded", "over quota")))
    assert isinstance(back, sw.StepError)
    assert (back.error_type, back.error_message) == ("QuotaExceeded", "over quota")


def test_an_unknown_builtin_name_is_a_step_error() -> None:
    text = json.dumps({"type": "builtins.NoSuchError", "message": "m"})
    back = error_from_json(text)
    assert isinstance(back, sw.StepError) and back.error_type == "NoSuchError"


class Outer:
    class Refused(Exception):
        """A declared exception nested in a class: recorded as Outer.Refused."""


sw.register_type(Outer.Refused)


def test_a_declared_nested_exception_comes_back_as_itself() -> None:
    back = error_from_json(error_to_json(Outer.Refused("no")))
    assert type(back) is Outer.Refused and back.args == ("no",)


def test_an_error_whose_args_were_not_json_comes_back_with_its_message() -> None:
    text = error_to_json(ValueError({"field": "name"}))
    back = error_from_json(text)
    assert type(back) is ValueError
    assert str(back) == "{'field': 'name'}"


class Coded(Exception):
    """A declared error whose message needs private state its constructor
    sets, which no record keeps."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self._code = code

    def __str__(self) -> str:
        return f"failed with code {self._code}"


sw.register_type(Coded)


def test_a_declared_error_that_cannot_be_rebuilt_is_a_step_error_naming_it() -> None:
    back = error_from_json(error_to_json(Coded(7)))
    assert isinstance(back, sw.StepError)
    assert back.error_type == "Coded" and back.error_message == "failed with code 7"
