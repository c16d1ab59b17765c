"""S13 and S14 in the core: a recorded value never runs code, and every
failure lands where it belongs (the step's error, or a clear run error)."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import math
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.hostile import Evil, evil_module

import stalwart as sw
from stalwart.core import codec
from stalwart.core.recorded import error_from_json, error_to_json
from stalwart.testing import ScriptedLLM, call


@pytest.fixture
def evil(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Evil:
    monkeypatch.syspath_prepend(str(tmp_path))
    return evil_module(tmp_path)


@pytest.mark.parametrize(
    "tree",
    [
        {"$t": "enum", "c": "{mod}:E", "v": "a"},
        {"$t": "dc", "c": "{mod}:D", "v": {"x": 1}},
        {"$t": "model", "c": "{mod}:D", "v": {"x": 1}},
        [1, {"deep": {"$t": "dc", "c": "{mod}:D", "v": {}}}],
    ],
)
def test_a_class_named_in_a_record_is_never_imported(tree: Any, evil: Evil) -> None:
    text = json.dumps(tree).replace("{mod}", evil.name)
    with pytest.raises(sw.CorruptedRecord, match=r"^output of step 3: .*not declared"):
        codec.loads(text, "output of step 3")
    evil.untouched()


def test_the_documented_exploit_runs_nothing(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    row = json.dumps({"$t": "enum", "c": "os:system", "v": f"touch {target}"})
    with pytest.raises(sw.CorruptedRecord, match="'os:system'"):
        codec.loads(row)
    assert not target.exists()


def test_a_declared_class_in_the_wrong_tag_is_refused() -> None:
    # Color is declared (an enum); a "dc" tag naming it must not build it.
    from ._support import Color

    with pytest.raises(sw.CorruptedRecord, match="not one"):
        codec.loads(json.dumps({"$t": "dc", "c": "core._support:Color", "v": {"value": 1}}))
    red = json.dumps({"$t": "enum", "c": "core._support:Color", "v": Color.RED.value})
    assert codec.loads(red) is Color.RED


class Undeclared(enum.Enum):
    X = 1


def test_an_undeclared_class_is_refused_at_record_time_not_at_recovery() -> None:
    with pytest.raises(sw.SerializationError, match=r"register_type\(Undeclared\)"):
        codec.dumps(Undeclared.X, "result of step 2")


def _fresh_types() -> tuple[type, type]:
    """A Report holding Verdicts, as new module-level classes (the registry
    is per process: a test that runs twice must not find them declared)."""
    tag = uuid.uuid4().hex[:8]
    verdict = dataclasses.make_dataclass(f"Verdict_{tag}", [("ok", bool)])
    report = dataclasses.make_dataclass(f"Report_{tag}", [("title", str), ("verdicts", list)])
    report.__annotations__["verdicts"] = list[verdict]  # type: ignore[valid-type]
    for cls in (verdict, report):
        cls.__module__ = __name__
    globals().update({verdict.__name__: verdict, report.__name__: report})
    return verdict, report


def test_a_policys_hints_declare_its_types_and_their_fields() -> None:
    verdict, report = _fresh_types()

    async def review(draft: str) -> Any:
        return None

    review.__annotations__["return"] = report | None
    pol = sw.policy(review)
    value = report("t", [verdict(True)])
    with pytest.raises(sw.SerializationError):
        codec.dumps(value)
    pol.declare_types()
    assert codec.loads(codec.dumps(value)) == value  # the Verdict came with Report's fields


def test_a_recorded_error_naming_a_module_imports_nothing(evil: Evil) -> None:
    text = json.dumps({"type": f"{evil.name}.Boom", "message": "touch /tmp/x", "args": ["touch"]})
    exc = error_from_json(text)
    assert isinstance(exc, sw.StepError)
    assert exc.error_type == "Boom" and exc.error_message == "touch /tmp/x"
    evil.untouched()


class AppError(Exception):
    pass


class UnregisteredError(Exception):
    pass


sw.register_type(AppError)


def test_errors_come_back_as_themselves_only_when_known() -> None:
    builtin = error_from_json(error_to_json(KeyError("k")))
    assert type(builtin) is KeyError and builtin.args == ("k",)
    assert type(error_from_json(error_to_json(AppError("a", 2)))) is AppError
    assert error_from_json(error_to_json(AppError("a", 2))).args == ("a", 2)
    other = error_from_json(error_to_json(UnregisteredError("u")))
    assert type(other) is sw.StepError and other.error_type == "UnregisteredError"
    own = error_from_json(error_to_json(sw.CancelledRun("gone")))
    assert type(own) is sw.CancelledRun


@pytest.mark.parametrize(
    "row",
    [
        "{not json",
        '{"message": "no type"}',
        '{"type": 3, "message": "x"}',
        '{"type": "builtins.ValueError", "message": "m", "args": "not a list"}',
        '{"type": "builtins.ValueError", "message": "m", "attrs": {"x": [1, {"y": NaN}]}}',
        "[" * 50_000,
    ],
)
def test_a_corrupted_recorded_error_is_a_corrupted_record(row: str) -> None:
    with pytest.raises(sw.CorruptedRecord, match=r"^error of step 2: ") as info:
        error_from_json(row, "error of step 2")
    # Never something a policy's `except ValueError` would take for its own.
    assert not isinstance(info.value, ValueError)


def test_error_args_are_recorded_only_as_plain_json() -> None:
    verdict, _ = _fresh_types()
    data = json.loads(error_to_json(ValueError(verdict(True), "x")))
    assert "args" not in data and data["message"] == str(ValueError(verdict(True), "x"))


# -- values nested too deeply, recursive, or not numbers -----------------------------------
def _deep(n: int) -> Any:
    value: Any = 0
    for _ in range(n):
        value = [value]
    return value


def test_deep_and_recursive_values_give_a_precise_error() -> None:
    with pytest.raises(sw.SerializationError, match=r"^arguments of step 7: .*nested too deeply"):
        codec.encode(_deep(5_000), "arguments of step 7")
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(sw.SerializationError, match=r"^result of step 1: "):
        codec.dumps(loop, "result of step 1")
    with pytest.raises(sw.CorruptedRecord, match=r"^output of step 1: "):
        codec.loads("[" * 100_000 + "]" * 100_000, "output of step 1")


async def test_a_tool_returning_nan_or_a_recursive_list_is_an_error_result_in_memory() -> None:
    loop: list[Any] = []
    loop.append(loop)

    @sw.policy
    async def measure(kind: str) -> Any:
        return math.nan if kind == "nan" else loop

    llm = ScriptedLLM([[call("measure", kind="nan"), call("measure", kind="loop")], "done"])

    @sw.policy
    async def agent(ctx: sw.Context) -> list[sw.Message]:
        return await ctx.call(llm, observations=[sw.Message.user("go")], options=[measure])

    replies = await sw.Runner().run(agent)
    results = [m.action_result for m in replies if m.action_result is not None]
    assert [r.error_type for r in results] == ["SerializationError", "SerializationError"]
    assert "not a JSON number" in (results[0].error_message or "")
    assert "nested too deeply" in (results[1].error_message or "")


async def test_an_option_that_is_not_a_policy_is_named() -> None:
    @sw.policy
    async def fine() -> int:
        return 1

    llm = ScriptedLLM([call("fine")])

    @sw.policy
    async def agent(ctx: sw.Context) -> Any:
        return await ctx.call(llm, observations=[], options=[fine, "web_search"])

    # A name is looked up (the context's bound policies, the runner's): one
    # that names nothing is the program's error, raised at the call, named.
    with pytest.raises(sw.UnknownOption, match=r"options\[1\] names 'web_search'"):
        await sw.Runner().run(agent)
    assert llm.calls == 0  # refused before the model was called


# -- BaseExceptions raised by a step's code ----------------------------------------------
class Custom(BaseException):
    pass


def _raiser(kind: str) -> BaseException:
    return {
        "exit": SystemExit(2),
        "cancel": asyncio.CancelledError(),
        "custom": Custom("mine"),
    }[kind]


@pytest.mark.parametrize("kind", ["exit", "cancel", "custom"])
async def test_a_tools_base_exception_is_its_error_result(kind: str) -> None:
    calls = []

    @sw.policy
    async def tool() -> int:
        calls.append(kind)
        raise _raiser(kind)

    llm = ScriptedLLM([call("tool"), "ok"])

    @sw.policy
    async def agent(ctx: sw.Context) -> list[sw.Message]:
        return await ctx.call(llm, observations=[], options=[tool])

    replies = await sw.Runner().run(agent)
    (result,) = [m.action_result for m in replies if m.action_result is not None]
    assert result.error_type == type(_raiser(kind)).__name__
    assert calls == [kind]


@pytest.mark.parametrize("kind", ["exit", "cancel", "custom"])
async def test_a_steps_base_exception_fails_the_run_not_the_process(kind: str) -> None:
    @sw.policy
    async def step() -> int:
        raise _raiser(kind)

    @sw.policy
    async def run(ctx: sw.Context) -> int:
        return await step()

    with pytest.raises(sw.StepError, match=type(_raiser(kind)).__name__):
        await sw.Runner().run(run)


async def test_cancelling_the_run_is_still_a_cancellation() -> None:
    started = asyncio.Event()

    @sw.policy
    async def slow() -> int:
        started.set()
        await asyncio.sleep(60)
        return 1

    @sw.policy
    async def run(ctx: sw.Context) -> int:
        return await slow()

    runner = sw.Runner()
    handle = await runner.start(run, run_id="c")
    await started.wait()
    await handle.cancel()
    with pytest.raises(sw.CancelledRun):
        await handle.result()
