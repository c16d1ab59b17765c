"""Text UTF-8 cannot encode (a lone surrogate: JSON ``"\\ud800"``, which
``json.loads`` accepts) is refused where a value is recorded, naming run,
step and path, so no store ever holds text some surface cannot show."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pydantic
import pytest

import stalwart as sw
from stalwart import Message
from stalwart.core import codec

LONE = json.loads('"\\ud800"')  # as a JSON body brings it
SECRET = "sk-live-0123456789"


@dataclasses.dataclass
class Order:
    ref: str
    notes: list[str]


class Reply(pydantic.BaseModel):
    text: str


sw.register_type(Order)
sw.register_type(Reply)


# -- the codec ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "path"),
    [
        (f"{SECRET}{LONE}", ""),
        ({"shared": {"q": ["fine", f"{SECRET}{LONE}"]}}, "['shared']['q'][1]"),
        ((1, {"x": LONE}), "[1]['x']"),
        (Order("A-1", ["ok", LONE]), ".notes[1]"),
        (Reply(text=LONE), ".text"),
        ([Message.user(f"hi {LONE}")], "[0].parts[0].text"),
        ({"k": frozenset({LONE})}, "['k'][0]"),
        (json.loads('"\\udc00\\ud800"'), ""),  # a low half before a high one is no pair
    ],
)
def test_a_lone_surrogate_is_refused_naming_where_and_never_the_text(value: Any, path: str) -> None:
    with pytest.raises(sw.SerializationError) as caught:
        codec.dumps(value, "inputs of run 'r'")
    message = str(caught.value)
    assert message.startswith(f"inputs of run 'r'{path}: the text holds U+D"), message
    assert "lone surrogate" in message and "UTF-8" in message
    assert SECRET not in message
    message.encode("utf-8")  # the error itself can be recorded and shown


@pytest.mark.parametrize(
    ("value", "path"),
    [({f"a{LONE}": 1}, ""), ({"outer": [{f"b{LONE}": 1}]}, "['outer'][0]")],
)
def test_a_key_holding_one_is_refused_too(value: Any, path: str) -> None:
    with pytest.raises(sw.SerializationError, match=r"the key '.\\ud800' holds U\+D800") as caught:
        codec.dumps(value, "signal 'go'")
    assert str(caught.value).startswith(f"signal 'go'{path}: the key ")


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "café, 日本語, emoji 😀 and 𝄞",
        {"😀": ["🎉" * 50]},
        "a backslash then u d800: \\ud800",  # text, not an escape
        "\\\\ud83d and then 😀",
        json.loads('"\\ud83d\\ude00"'),  # a pair in JSON is one character
    ],
)
def test_text_that_is_characters_round_trips(value: Any) -> None:
    assert codec.loads(codec.dumps(value)) == value


def test_check_json_guards_text_written_from_encodes_tree() -> None:
    value = {"q": [LONE]}
    text = json.dumps(codec.encode(value), separators=(",", ":"))  # no check in encode
    with pytest.raises(sw.SerializationError, match=r"^arguments\['q'\]\[0\]: the text holds"):
        codec.check_json(text, value, "arguments")
    good = {"q": ["😀"]}
    good_text = json.dumps(codec.encode(good))
    assert codec.check_json(good_text, good, "arguments") == good_text


# -- a runner on SQLite and PostgreSQL ----------------------------------------
@sw.policy
async def echo(value: Any) -> Any:
    return value


@sw.policy
async def fine_tool() -> str:
    return "fine"


@sw.policy
async def bad_tool() -> dict[str, Any]:
    return {"answer": [f"looked up {LONE}"]}


@sw.policy
async def uses_a_bad_tool(ctx: sw.Context) -> str:
    first = await ctx.call(fine_tool)
    await ctx.call(bad_tool)
    return first


@sw.policy
async def passes_bad_arguments(ctx: sw.Context) -> Any:
    await ctx.call(fine_tool)
    return await ctx.call(echo, {"made": f"in code {LONE}"})


@sw.policy
async def waits(ctx: sw.Context) -> Any:
    return await ctx.wait_for("go", prompt="ready?")


POLICIES = [echo, fine_tool, bad_tool, uses_a_bad_tool, passes_bad_arguments, waits]


async def assert_every_text_is_utf8(runner: sw.Runner) -> None:
    """What the store holds, every run and step, parses and encodes as UTF-8:
    a surface that shows it (the API, the inspector, the CLI) can."""

    def check(text: str | None, where: str) -> None:
        if text is None:
            return
        text.encode("utf-8")
        try:
            tree = json.loads(text)
        except ValueError:
            return
        json.dumps(tree, ensure_ascii=False).encode("utf-8")  # raises on a lone surrogate

    for run in await runner.list_runs(limit=100):
        for name in ("id", "inputs", "result", "error", "waiting_for"):
            check(getattr(run, name), f"run {run.id} {name}")
        for step in await runner.steps(run.id):
            for name in ("key", "name", "args", "output", "error"):
                check(getattr(step, name), f"run {run.id} step {step.key} {name}")


async def test_a_start_holding_one_records_nothing(store_url: str) -> None:
    async with sw.Runner(store_url, policies=POLICIES) as runner:
        for args, kwargs in [((LONE,), {}), ((), {"value": {"q": LONE}})]:
            with pytest.raises(sw.SerializationError, match=r"^inputs of run 'in-1'"):
                await runner.enqueue(echo, *args, run_id="in-1", **kwargs)
            with pytest.raises(sw.RunNotFound):
                await runner.get_run("in-1")
        assert await runner.list_runs(limit=10) == []


async def test_a_signal_holding_one_is_refused_and_nothing_is_delivered(store_url: str) -> None:
    async with sw.Runner(store_url, policies=POLICIES, poll_interval=0.05) as runner:
        handle = await runner.start(waits, run_id="w-1")
        with pytest.raises(sw.SerializationError, match=r"^signal 'go'\['ok'\]: the text holds"):
            await runner.signal("w-1", "go", {"ok": LONE})
        assert (await runner.get_run("w-1")).status in ("pending", "running", "suspended")
        await runner.signal("w-1", "go", {"ok": "yes"})
        assert await handle.result(timeout=30) == {"ok": "yes"}  # the first signal is this one
        await assert_every_text_is_utf8(runner)


async def test_a_step_result_holding_one_fails_that_step_and_keeps_the_ones_before(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, policies=POLICIES) as runner:
        handle = await runner.start(uses_a_bad_tool, run_id="t-1")
        with pytest.raises(Exception) as caught:
            await handle.result(timeout=30)
        assert "['answer'][0]: the text holds U+D800" in str(caught.value)
        run = await runner.get_run("t-1")
        assert run.status == "failed"
        assert run.error is not None and "bad_tool" in run.error and "U+D800" in run.error
        steps = {s.name: s for s in await runner.steps("t-1")}
        assert steps["fine_tool"].output == '"fine"' and steps["fine_tool"].error is None
        await assert_every_text_is_utf8(runner)


async def test_step_arguments_holding_one_are_refused_before_they_are_recorded(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, policies=POLICIES) as runner:
        handle = await runner.start(passes_bad_arguments, run_id="a-1")
        with pytest.raises(Exception, match=r"\['made'\]: the text holds U\+D800"):
            await handle.result(timeout=30)
        assert (await runner.get_run("a-1")).status == "failed"
        assert [s.name for s in await runner.steps("a-1")][:1] == ["fine_tool"]
        await assert_every_text_is_utf8(runner)


def test_a_failure_whose_message_holds_one_is_recorded_with_the_escapes_text() -> None:
    from stalwart.core.recorded import error_from_json, error_to_json

    name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")  # as os.listdir gives it
    text = error_to_json(FileNotFoundError(f"no file {name}"))
    json.dumps(json.loads(text), ensure_ascii=False).encode("utf-8")  # every surface can show it
    back = error_from_json(text)
    assert isinstance(back, FileNotFoundError) and str(back) == "no file caf\\udce9.txt"
    plain = error_to_json(ValueError("café 😀 \\ud800 as text"))
    assert str(error_from_json(plain)) == "café 😀 \\ud800 as text"  # nothing else changes
