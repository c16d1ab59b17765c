"""A message's payload cannot be changed in place (S5).

The ledger records only what is new in each step and trusts a message a
step has seen to be unchanged at the next (``core/engine/identity.py``). A
change made in place to a dict inside a message (``msg.action_result.value
["k"] = 1``) would have changed what the model saw next without the ledger
recording it, and a resumed run changing it differently would not have been
caught. Now a message's dicts, lists and sets are read-only copies made when
it is built: the change raises, with what to do instead, and a new message
built with ``msg.replace(...)`` is recorded and checked as any other.

Real SQLite files and runners, the scripted model; no mocks.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import pickle
import sqlite3
from typing import Any

import pydantic
import pytest

import stalwart as sw
from stalwart.core import codec
from stalwart.core.message import (
    ActionCall,
    ReadOnlyDict,
    ReadOnlyList,
    ReadOnlySet,
    freeze,
    thaw,
)
from stalwart.testing import ScriptedLLM, call

# -- the containers ---------------------------------------------------------------


def _result() -> sw.Message:
    value = {"rows": [{"id": 1, "tags": {"a"}}, {"id": 2, "tags": {"b"}}], "pair": ({"x": 1}, 2)}
    return sw.Message.result(sw.Message.call("search", {"q": "cats", "filters": [1, 2]}), value)


def _mutations(msg: sw.Message) -> list[tuple[str, Any]]:
    value = msg.action_result.value  # type: ignore[union-attr]
    rows, tags = value["rows"], value["rows"][0]["tags"]
    return [
        ("ReadOnlyDict.__setitem__", lambda: value.__setitem__("k", 1)),
        ("ReadOnlyDict.__delitem__", lambda: value.__delitem__("rows")),
        ("ReadOnlyDict.update", lambda: value.update(k=1)),
        ("ReadOnlyDict.setdefault", lambda: value.setdefault("k", 1)),
        ("ReadOnlyDict.pop", lambda: value.pop("rows")),
        ("ReadOnlyDict.popitem", lambda: value.popitem()),
        ("ReadOnlyDict.clear", lambda: value.clear()),
        ("ReadOnlyDict.__ior__", lambda: value.__ior__({"k": 1})),
        ("ReadOnlyList.append", lambda: rows.append(3)),
        ("ReadOnlyList.extend", lambda: rows.extend([3])),
        ("ReadOnlyList.insert", lambda: rows.insert(0, 3)),
        ("ReadOnlyList.__setitem__", lambda: rows.__setitem__(0, 3)),
        ("ReadOnlyList.__delitem__", lambda: rows.__delitem__(0)),
        ("ReadOnlyList.pop", lambda: rows.pop()),
        ("ReadOnlyList.remove", lambda: rows.remove(rows[0])),
        ("ReadOnlyList.clear", lambda: rows.clear()),
        ("ReadOnlyList.sort", lambda: rows.sort(key=id)),
        ("ReadOnlyList.reverse", lambda: rows.reverse()),
        ("ReadOnlyList.__iadd__", lambda: rows.__iadd__([3])),
        ("ReadOnlyList.__imul__", lambda: rows.__imul__(2)),
        ("ReadOnlySet.add", lambda: tags.add("z")),
        ("ReadOnlySet.discard", lambda: tags.discard("a")),
        ("ReadOnlySet.update", lambda: tags.update({"z"})),
        ("ReadOnlySet.__ior__", lambda: tags.__ior__({"z"})),
        ("ReadOnlyDict.__setitem__", lambda: value["pair"][0].__setitem__("x", 2)),
        ("ReadOnlyList.append", lambda: _call().action_call.arguments["filters"].append(3)),  # type: ignore[union-attr]
        ("ReadOnlyDict.__setitem__", lambda: _meta().meta.__setitem__("k", 1)),  # type: ignore[union-attr]
    ]


def _call() -> sw.Message:
    return sw.Message.call("search", {"q": "cats", "filters": [1, 2]})


def _meta() -> sw.Message:
    m = sw.Message.assistant("hi")
    return sw.Message(m.role, m.actor, m.parts, meta={"usage": {"input_tokens": 3}})


def test_every_change_to_a_payload_raises_a_type_error_saying_what_to_do() -> None:
    msg = _result()
    before = msg.to_json()
    for method, change in _mutations(msg):
        with pytest.raises(TypeError) as caught:
            change()
        text = str(caught.value)
        assert text.startswith(f"{method}(): "), text
        assert "read-only" in text and "build a new message" in text and "msg.replace(" in text
    assert msg.to_json() == before  # nothing changed


def test_payloads_read_as_the_builtins_they_copy() -> None:
    msg = _result()
    value = msg.action_result.value  # type: ignore[union-attr]
    assert isinstance(value, dict) and type(value) is ReadOnlyDict
    assert isinstance(value["rows"], list) and type(value["rows"]) is ReadOnlyList
    assert (
        isinstance(value["rows"][0]["tags"], set) and type(value["rows"][0]["tags"]) is ReadOnlySet
    )
    assert type(value["pair"]) is tuple and type(value["pair"][0]) is ReadOnlyDict
    assert value == {
        "rows": [{"id": 1, "tags": {"a"}}, {"id": 2, "tags": {"b"}}],
        "pair": ({"x": 1}, 2),
    }
    assert msg.action_result.value["rows"][1]["id"] == 2  # type: ignore[union-attr]
    assert json.loads(json.dumps(value["rows"][0]["id"])) == 1
    args = _call().action_call.arguments  # type: ignore[union-attr]
    assert json.dumps(args) == '{"q": "cats", "filters": [1, 2]}'
    assert sorted(args) == ["filters", "q"] and args.get("q") == "cats" and len(args) == 2
    # Operations that make a new container give an ordinary one, to change.
    assert type(args.copy()) is dict and type(args | {"k": 1}) is dict
    assert type(args["filters"] + [3]) is list and type(args["filters"][:1]) is list
    plain = thaw(value)
    assert plain == value and type(plain) is dict and type(plain["rows"][0]["tags"]) is set
    plain["rows"].append({"id": 3})  # a deep copy of its own
    assert len(value["rows"]) == 2


def test_the_callers_dict_is_copied_not_kept() -> None:
    arguments: dict[str, Any] = {"q": "cats", "filters": [1, 2]}
    msg = sw.Message.call("search", arguments)
    arguments["q"] = "dogs"
    arguments["filters"].append(3)
    assert msg.action_call.arguments == {"q": "cats", "filters": [1, 2]}  # type: ignore[union-attr]


def test_other_objects_are_kept_as_they_are() -> None:
    class Row(pydantic.BaseModel):
        id: int

    row, other = Row(id=1), sw.Message.user("hi")
    msg = sw.Message.result("c1", {"row": row, "msg": other, "rows": [row]}, name="t")
    value = msg.action_result.value  # type: ignore[union-attr]
    assert value["row"] is row and value["msg"] is other and value["rows"][0] is row
    text = "already immutable"
    assert sw.Message.result("c1", text, name="t").action_result.value is text  # type: ignore[union-attr]
    frozen = freeze({"a": [1]})
    assert freeze(frozen) is frozen  # nothing to copy twice
    assert freeze((1, "a")) == (1, "a")


def test_a_payload_that_contains_itself_is_refused() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match="result of 't': the value is nested too deeply"):
        sw.Message.result("c1", loop, name="t")


def test_parts_and_media_are_immutable_too() -> None:
    data = bytearray(b"\x89PNG")
    msg = sw.Message("user", "user", [sw.Text("look"), sw.Media("image/png", data=data)])  # type: ignore[arg-type]
    data[0] = 0
    assert type(msg.parts) is tuple and msg.media[0].data == b"\x89PNG"
    assert type(msg.media[0].data) is bytes


def test_json_codec_pydantic_and_equality_keep_working() -> None:
    msg = _result()
    back = sw.Message.from_json(msg.to_json())
    assert back == msg and type(back.action_result.value["rows"]) is ReadOnlyList  # type: ignore[union-attr]
    history = [sw.Message.user("q"), _call(), msg]
    assert codec.loads(codec.dumps(history)) == history
    assert codec.dumps(history) == codec.dumps(codec.loads(codec.dumps(history)))

    class Args(pydantic.BaseModel):
        q: str
        filters: list[int]

    parsed = Args.model_validate(_call().action_call.arguments)  # type: ignore[union-attr]
    assert parsed.filters == [1, 2]
    assert pydantic.TypeAdapter(dict[str, Any]).validate_python(freeze({"a": [1]})) == {"a": [1]}


def test_copy_deepcopy_pickle_and_replace() -> None:
    msg = _result()
    for twin in (copy.copy(msg), copy.deepcopy(msg), pickle.loads(pickle.dumps(msg))):
        assert twin == msg and twin.id == msg.id
        value = twin.action_result.value  # type: ignore[union-attr]
        assert type(value) is ReadOnlyDict and type(value["rows"][0]["tags"]) is ReadOnlySet
        with pytest.raises(TypeError, match="read-only"):
            value["rows"].append(1)
    value = msg.action_result.value  # type: ignore[union-attr]
    assert copy.copy(value) is value
    assert copy.deepcopy(value) == value and copy.deepcopy(value) is not value
    changed = msg.replace(value={**value, "k": 1})
    assert changed.action_result.value["k"] == 1 and "k" not in value  # type: ignore[union-attr]
    assert type(changed.action_result.value) is ReadOnlyDict  # type: ignore[union-attr]
    assert changed.action_result.call_id == msg.action_result.call_id  # type: ignore[union-attr]
    args = _call().replace(arguments={"q": "dogs"}).action_call.arguments  # type: ignore[union-attr]
    assert args == {"q": "dogs"} and type(args) is ReadOnlyDict
    swapped = dataclasses.replace(msg, meta={"note": ["x"]})
    assert type(swapped.meta["note"]) is ReadOnlyList  # type: ignore[index]
    bare = dataclasses.replace(_call().action_call, arguments={"q": ["x"]})  # type: ignore[type-var]
    assert isinstance(bare, ActionCall) and type(bare.arguments["q"]) is ReadOnlyList
    with pytest.raises(ValueError, match="is not an action result"):
        _call().replace(value=1)
    with pytest.raises(ValueError, match="is not an action call"):
        msg.replace(arguments={})


# -- the ledger (S5) ---------------------------------------------------------------

change: dict[str, Any] = {}  # how the loop rewrites the first tool result, set by a test
executed: list[int] = []


@sw.policy
async def lookup(n: int) -> dict[str, Any]:
    """Look a record up.

    Args:
        n: Which record.
    """
    executed.append(n)
    return {"n": n, "text": "y" * 300}


model = ScriptedLLM([call("lookup", n=i) for i in range(4)] + ["done"])


@sw.policy
async def agent_loop(ctx: sw.Context, question: str) -> str:
    """The quickstart's loop; after turn 1 it changes the first tool result,
    after turn 2 it waits for a go-ahead (and resumes by replay), unless the
    change is made in place (which once ran on, unnoticed, to "done")."""
    history = [sw.Message.system("Use tools."), sw.Message.user(question)]
    turn = 0
    while True:
        actions = await ctx.call(model, observations=history, options=[lookup])
        history += actions
        turn += 1
        if turn == 1 and change.get("how") == "in place":
            history[3].action_result.value["k"] = change["k"]  # type: ignore[union-attr]
        elif turn == 1 and change.get("how") == "new message":
            first = history[3]
            history[3] = first.replace(value={**first.action_result.value, "k": change["k"]})  # type: ignore[union-attr]
        if turn == 2 and change.get("how") != "in place":
            await ctx.wait_for("go")
        if not any(m.is_action_call for m in actions):
            return actions[-1].text


@pytest.fixture(autouse=True)
def _fresh() -> None:
    change.clear()
    executed.clear()
    model.calls = 0


async def _paused(runner: sw.Runner, run_id: str) -> Any:
    handle = await runner.start(agent_loop, question="look them up", run_id=run_id)
    for _ in range(400):
        if (await runner.get_run(run_id)).status == "suspended":
            return handle
        await asyncio.sleep(0.05)
    raise AssertionError("the run never reached its wait")


async def test_changing_a_seen_message_in_place_raises_before_the_ledger_can_miss_it(
    sqlite_url: str,
) -> None:
    """The reviewer's scenario: the change used to reach the next model call
    unrecorded (its record trusted the message it had seen); now it fails
    the run where it was made, naming what to do instead."""
    change.update(how="in place", k=1)
    async with sw.Runner(sqlite_url, poll_interval=0.05, policies=[agent_loop]) as runner:
        handle = await runner.start(agent_loop, question="look them up", run_id="in-place")
        with pytest.raises(TypeError) as caught:
            await handle.result(timeout=30)
        steps = await runner.steps("in-place")
    assert "ReadOnlyDict.__setitem__()" in str(caught.value)
    assert "build a new message" in str(caught.value)
    assert [s.name for s in steps if s.name == model.name] == [model.name]  # no second call


async def test_a_new_message_is_recorded_and_a_different_one_on_resume_is_caught(
    sqlite_url: str,
) -> None:
    change.update(how="new message", k=1)
    async with sw.Runner(sqlite_url, poll_interval=0.05, policies=[agent_loop]) as runner:
        handle = await _paused(runner, "replaced")
        second = [s for s in await runner.steps("replaced") if s.name == model.name][1]
        seen = json.loads(second.args or "")["observations"]
        assert seen[3]["v"]["result"]["value"]["k"] == 1  # the change is in the record
        change["k"] = 2  # the resumed run changes it differently
        await runner.signal("replaced", "go", True)
        with pytest.raises(sw.NonDeterminismError) as caught:
            await handle.result(timeout=30)
    assert f"step {second.key} of run replaced does not match its record" in str(caught.value)
    assert executed == [0, 1]  # nothing ran twice


async def test_a_dict_result_is_still_recorded_by_reference(sqlite_url: str) -> None:
    """A result message holds a read-only copy of what the tool returned; the
    model call's record still refers to the tool step's output instead of
    copying it (found by its JSON now that the object differs)."""
    async with sw.Runner(sqlite_url, poll_interval=0.05, policies=[agent_loop]) as runner:
        handle = await _paused(runner, "by-ref")
        await runner.signal("by-ref", "go", True)
        assert await handle.result(timeout=30) == "done"
        steps = await runner.steps("by-ref")
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    stored = [a for (a,) in db.execute("SELECT args FROM steps WHERE name = ?", (model.name,))]
    db.close()
    assert sum('"$t":"out"' in (a or "") for a in stored) == 4
    assert "y" * 300 not in "".join(a or "" for a in stored)
    last = [s for s in steps if s.name == model.name][-1]
    first_result = json.loads(last.args or "")["observations"][3]["v"]["result"]
    assert first_result["value"]["text"] == "y" * 300


@sw.policy
async def tag(labels: Any) -> list[str]:
    """Add a label.

    Args:
        labels: The labels so far.
    """
    labels.append("tagged")  # its own arguments, to change as it likes
    return list(labels)


async def test_an_option_gets_arguments_it_may_change(sqlite_url: str) -> None:
    tagger = ScriptedLLM([call("tag", labels=["a"]), "done"])

    @sw.policy
    async def tagging(ctx: sw.Context) -> list[Any]:
        reply = await ctx.call(tagger, observations=[sw.Message.user("tag")], options=[tag])
        return [reply[0].action_call.arguments["labels"], reply[1].action_result.value]  # type: ignore[union-attr]

    async with sw.Runner(sqlite_url, policies=[tagging]) as runner:
        handle = await runner.start(tagging, run_id="tag")
        assert await handle.result(timeout=30) == [["a"], ["a", "tagged"]]
