"""What the ledger holds for a refused exclusive call, and what it does not.

A lock refusal (``ExclusiveReentry``, ``ExclusiveDeadlock``) is recorded at
the key the call has, holding the very result the model read, so a resumed
run answers with it (S2). A call that is not refused writes nothing more,
and a duplicate call id, read from the recorded reply itself, is not
recorded. Real SQLite files, a real runner.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.crash import executions, kill, spawn

import stalwart as sw
from stalwart import Message
from stalwart.core import codec
from stalwart.core.errors import NonDeterminismError
from stalwart.testing import ScriptedLLM, call

from ._support import result_texts


@sw.policy(exclusive=True)
async def el_delegate(ctx: sw.Context, depth: int = 0) -> list[str]:
    """Holds its own lock; asks for itself once more."""
    if depth:
        return ["inner ran"]
    llm: Any = ScriptedLLM([[call("el_delegate", depth=1)]], name="el_delegate_model")
    out = await ctx.call(llm, observations=[Message.user("go")], options=[el_delegate])
    return result_texts(out)


@sw.policy(exclusive="pen")
async def el_write(text: str) -> str:
    """Writes with the pen.

    Args:
        text: What to write.
    """
    return f"wrote {text}"


@sw.policy
async def el_reenter(ctx: sw.Context) -> list[Message]:
    llm: Any = ScriptedLLM([[call("el_delegate")]], name="el_reenter_model")
    out: list[Message] = await ctx.call(
        llm, observations=[Message.user("go")], options=[el_delegate]
    )
    return out


@sw.policy
async def el_plain(ctx: sw.Context) -> list[str]:
    llm: Any = ScriptedLLM(
        [
            [
                call("el_write", text="a"),
                call("el_write", text="b"),
                call("el_write", "x", text="c"),
                call("el_write", "x", text="d"),
            ]
        ],
        name="el_plain_model",
    )
    out = await ctx.call(llm, observations=[Message.user("go")], options=[el_write])
    return result_texts(out)


async def test_a_reentry_refusal_is_recorded_at_the_calls_key(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        out = await (await runner.start(el_reenter, run_id="re")).result(30)
        steps = {s.key: s for s in await runner.steps("re")}
    [outer] = [m.action_result for m in out if m.action_result is not None]
    [text] = outer.value
    assert text.startswith("ExclusiveReentry: 'el_delegate' is exclusive (its own lock)")
    [refusal] = [s for s in steps.values() if s.name == "stalwart.refused:el_delegate"]
    # The inner call's own key (the outer call 1#1, its model 1#1.1, its call #1).
    assert refusal.key == "1#1.1#1"
    assert refusal.error is None
    # The refused call is recorded with the arguments the model gave it, as a
    # reader (the inspector, an export) shows them.
    assert codec.loads(refusal.args or "null") == {"depth": 1}
    recorded = codec.loads(refusal.output or "null")
    assert isinstance(recorded, Message) and recorded.action_result is not None
    assert f"{recorded.action_result.error_type}: {recorded.action_result.error_message}" == text


async def test_calls_not_refused_and_duplicate_ids_record_no_refusal(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        texts = await (await runner.start(el_plain, run_id="p")).result(30)
        names = [s.name for s in await runner.steps("p")]
    assert texts[:3] == ["wrote a", "wrote b", "wrote c"]
    assert texts[3].startswith("DuplicateCallId: call id 'x' of 'el_write' (step 1#4)")
    assert not [n for n in names if n.startswith("stalwart.refused")], names
    assert names.count("el_write") == 3


# A refused exclusive call, killed before the reply that read the refusal
# was recorded, then resumed (S2).
#
# Whether two exclusive calls cross their locks depends on timing. The refusal
# is recorded as the call's step, so the resumed run, where nothing crosses,
# replays the refusal: the call does not run, and the reply holds the same
# error the killed process saw. A real process, SIGKILL, a real SQLite file.


APP = str(Path(__file__).with_name("refusal_app.py"))


def _spawn(url: str, workdir: Path, action: str) -> subprocess.Popen[str]:
    return spawn(APP, url, workdir, action, "crossed")


def test_a_refused_call_replays_its_refusal_after_a_kill(tmp_path: Path, sqlite_url: str) -> None:
    url = sqlite_url
    first = _spawn(url, tmp_path, "run")
    assert first.stdout is not None
    line = first.stdout.readline()
    kill(first)
    assert line.startswith("refused "), first.stderr.read() if first.stderr else line
    refused = json.loads(line[len("refused ") :])
    assert refused.startswith("ExclusiveDeadlock: 'el_needs_a' (step "), refused
    assert (
        executions(tmp_path / "ran.txt") == []
    )  # nothing ran: X waits for b, Y's call was refused

    second = _spawn(url, tmp_path, "recover")
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err
    result = next(
        json.loads(x[len("result ") :]) for x in out.splitlines() if x.startswith("result ")
    )

    # The refused call did not run on resume, though nothing crossed there;
    # the reply shows the refusal the killed process saw. X's call ran, once.
    assert executions(tmp_path / "ran.txt") == ["el_needs_b"]
    assert result == ["needs_b ran", refused]


# The recorded refusal of an exclusive call, replayed.
#
# A refused call (``ExclusiveReentry``, ``ExclusiveDeadlock``) is recorded at
# the call's key as ``stalwart.refused:<option>``, holding the result message
# the model read. These tests replay such runs on real SQLite files (a durable
# sleep suspends the run, and the runner resumes it by replay) and check what
# a resumed run answers, what a changed program gets, and how the readers
# (``runs show``, export and import) present the record.


# How many times the unrecorded model below really ran: its call ids differ
# on every execution, as a real model's (or a uuid's) do.
_TURNS = {"n": 0}


@sw.policy(record=False)
async def rr_unrecorded_model(observations: list[Message], options: list[Any]) -> list[Message]:
    """A model whose replies are not recorded: it answers again on replay."""
    _TURNS["n"] += 1
    return [call("rr_tool", _id=f"call-{_TURNS['n']}", depth=1)]


@sw.policy(exclusive=True)
async def rr_tool(ctx: sw.Context, depth: int = 0) -> dict[str, Any]:
    """Holds its own lock and asks for itself again through a model."""
    if depth:
        return {"ran": True}
    out = await ctx.call(rr_unrecorded_model, observations=[Message.user("go")], options=[rr_tool])
    await ctx.wait_for("go")  # suspends the run: the rest is a replay
    [asked] = [m.action_call for m in out if m.action_call is not None]
    [answer] = [m.action_result for m in out if m.action_result is not None]
    return {"asked": asked.id, "answered": answer.call_id, "error": answer.error_type}


@sw.policy
async def rr_root(ctx: sw.Context) -> dict[str, Any]:
    llm: Any = ScriptedLLM([[call("rr_tool", _id="outer")]], name="rr_root_model")
    out = await ctx.call(llm, observations=[Message.user("go")], options=[rr_tool])
    [res] = [m.action_result for m in out if m.action_result is not None]
    assert not res.is_error, res.error_message
    value: dict[str, Any] = res.value
    return value


async def test_a_replayed_refusal_answers_the_call_it_is_given(sqlite_url: str) -> None:
    _TURNS["n"] = 0
    async with sw.Runner(sqlite_url) as runner:
        handle = await runner.start(rr_root, run_id="ids")
        await _until_waiting(runner, "ids")
        await runner.signal("ids", "go")
        got = await handle.result(30)
        names = [s.name for s in await runner.steps("ids")]
    assert "stalwart.refused:rr_tool" in names  # the refusal was recorded, then replayed
    assert _TURNS["n"] == 2  # the model answered twice: live, then on replay
    assert got["error"] == "ExclusiveReentry"
    assert got["answered"] == got["asked"]


@sw.policy(record=False)
async def rr_unrecorded_args(observations: list[Message], options: list[Any]) -> list[Message]:
    """An unrecorded model whose arguments differ on every execution."""
    _TURNS["n"] += 1
    return [call("rr_tool2", _id="same-id", depth=1, note=f"turn {_TURNS['n']}")]


@sw.policy(exclusive=True)
async def rr_tool2(ctx: sw.Context, depth: int = 0, note: str = "") -> str:
    """Holds its own lock and asks for itself again, with other arguments each time."""
    if depth:
        return "inner ran"
    out = await ctx.call(rr_unrecorded_args, observations=[Message.user("go")], options=[rr_tool2])
    await ctx.wait_for("go")
    [answer] = [m.action_result for m in out if m.action_result is not None]
    return str(answer.error_type)


@sw.policy
async def rr_root2(ctx: sw.Context) -> str:
    llm: Any = ScriptedLLM([[call("rr_tool2")]], name="rr_root2_model")
    out = await ctx.call(llm, observations=[Message.user("go")], options=[rr_tool2])
    [res] = [m.action_result for m in out if m.action_result is not None]
    if res.is_error:
        raise RuntimeError(f"{res.error_type}: {res.error_message}")
    return str(res.value)


async def test_a_refusal_replayed_for_other_arguments_is_nondeterminism(sqlite_url: str) -> None:
    _TURNS["n"] = 0
    async with sw.Runner(sqlite_url) as runner:
        handle = await runner.start(rr_root2, run_id="args")
        await _until_waiting(runner, "args")
        assert "stalwart.refused:rr_tool2" in [s.name for s in await runner.steps("args")]
        await runner.signal("args", "go")
        with pytest.raises(NonDeterminismError, match="run args"):
            await handle.result(30)


# -- replay with another option: nondeterminism, named -------------------------

_OFFER: dict[str, Any] = {}


@sw.policy(exclusive=True)
async def rr_lock_a(ctx: sw.Context, depth: int = 0) -> str:
    """Holds its own lock, asks for the option ``_OFFER`` names."""
    if depth:
        return "inner ran"
    llm: Any = ScriptedLLM([[call("rr_lock_a", depth=1)]], name="rr_inner_model")
    if _OFFER.get("unrecorded"):
        llm = rr_asks_offer
    out = await ctx.call(llm, observations=[Message.user("go")], options=_OFFER["options"])
    await ctx.wait_for("go")
    return str([m.action_result.error_type for m in out if m.action_result is not None])


@sw.policy(record=False)
async def rr_asks_offer(observations: list[Message], options: list[Any]) -> list[Message]:
    """An unrecorded model asking for the option ``_OFFER`` names."""
    return [call(_OFFER["name"], depth=1)]


@sw.policy
async def rr_other(depth: int = 0) -> str:
    """Not exclusive."""
    return "other ran"


@sw.policy
async def rr_swap_root(ctx: sw.Context) -> str:
    llm: Any = ScriptedLLM([[call("rr_lock_a")]], name="rr_swap_model")
    out = await ctx.call(llm, observations=[Message.user("go")], options=[rr_lock_a])
    [res] = [m.action_result for m in out if m.action_result is not None]
    if res.is_error:
        raise RuntimeError(f"{res.error_type}: {res.error_message}")
    return str(res.value)


@pytest.mark.parametrize("change", ["options", "unrecorded reply"])
async def test_a_refusal_replayed_for_a_changed_program_is_nondeterminism(
    sqlite_url: str, change: str
) -> None:
    """A program changed under a recorded refusal fails loudly (S5), naming
    run and step, instead of answering with the old refusal or running the
    call: another option set changes the model's step; an unrecorded model
    asking for another option meets the refusal of the first."""
    url = sqlite_url
    _OFFER.update(name="rr_lock_a", options=[rr_lock_a, rr_other])
    _OFFER["unrecorded"] = change == "unrecorded reply"
    async with sw.Runner(url) as runner:
        handle = await runner.start(rr_swap_root, run_id="swap")
        await _until_waiting(runner, "swap")
        names = [s.name for s in await runner.steps("swap")]
        assert "stalwart.refused:rr_lock_a" in names
        if change == "options":
            _OFFER["options"] = [rr_lock_a]
        else:
            _OFFER["name"] = "rr_other"
        await runner.signal("swap", "go")
        with pytest.raises(NonDeterminismError) as info:
            await handle.result(30)
    text = str(info.value)
    assert "run swap" in text and "1#1.1" in text, text


async def _until_waiting(runner: sw.Runner, run_id: str) -> None:
    for _ in range(3000):
        if (await runner.get_run(run_id)).status == "suspended":
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never suspended")


# -- the readers: export, import, a replay test, runs show -------------------------


def test_a_run_with_a_refusal_exports_imports_and_replays_clean(tmp_path: Path) -> None:
    """The refusal is an ordinary record to time travel: it moves between
    stores byte for byte, a replay test of the same code finds no
    divergence, and ``runs show`` names it for what it is."""
    from typer.testing import CliRunner

    from stalwart.cli.app import app
    from stalwart.testing import replay
    from stalwart.timetravel.export import export_runs, import_runs, read_export, write_export

    src, dst = f"sqlite:///{tmp_path / 'src.db'}", f"sqlite:///{tmp_path / 'dst.db'}"
    dump = tmp_path / "run.jsonl"

    async def record_and_move() -> list[Any]:
        async with sw.Runner(src) as runner:
            await (await runner.start(el_reenter, run_id="tt")).result(30)
            dumps = await export_runs(runner.store, "tt")
        with open(dump, "w", encoding="utf-8") as f:
            write_export(dumps, f)
        async with sw.Runner(dst) as runner:
            assert await import_runs(runner.store, read_export(dump)) == ["tt"]
            return await runner.steps("tt")

    steps = asyncio.run(record_and_move())
    [refusal] = [s for s in steps if s.name == "stalwart.refused:el_delegate"]
    assert refusal.key == "1#1.1#1"
    report = replay(dump, el_reenter)
    assert report.divergences == [], report
    env = {"STALWART_STORE": None, "COLUMNS": "200", "NO_COLOR": "1"}
    shown = CliRunner(env=env).invoke(app, ["runs", "show", "tt", "--store", dst])
    assert shown.exit_code == 0, shown.output
    assert "refused:el_delegate" in shown.output
    assert "ExclusiveReentry" in shown.output
