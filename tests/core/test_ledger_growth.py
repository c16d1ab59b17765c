"""An agent's ledger grows with what is new in each step, not with its square.

A model call's arguments are the whole conversation so far; each step
records only what is new in them (``core/stepargs.py``), on SQLite and
PostgreSQL, while replay, the nondeterminism check (S5), export/import and
``runs show`` see the whole arguments as before. Real stores, the scripted
model, a tool returning ~1 KB.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.records import step_record
from typer.testing import CliRunner

import stalwart as sw
from stalwart.cli.app import app
from stalwart.core.engine.identity import ArgsLog, identity_json, step_hash
from stalwart.core.errors import CorruptedRecord
from stalwart.core.stepargs import ArgsTable, StoredStep
from stalwart.testing import ScriptedLLM, call
from stalwart.timetravel import export_runs, import_runs, read_export, write_export

TURNS = 200
PAUSE = 120  # the turn after which the run waits for a signal (and resumes by replay)
executed: list[str] = []  # the tool calls that really ran
change: dict[str, Any] = {}  # set by a test: the loop rewrites an earlier message


@sw.policy
async def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: Which file.
    """
    executed.append(path)
    return f"{path}: " + "x" * 1000


def _script(turns: int) -> ScriptedLLM:
    return ScriptedLLM(
        [call("read_file", path=f"file-{i:04d}.txt") for i in range(turns)] + ["done"]
    )


model = _script(TURNS)


@sw.policy
async def agent_loop(ctx: sw.Context, question: str) -> str:
    """The README quickstart's loop, waiting once for a go-ahead halfway."""
    history = [sw.Message.system("Use tools to answer."), sw.Message.user(question)]
    turn = 0
    while True:
        actions = await ctx.call(model, observations=history, options=[read_file])
        history += actions
        turn += 1
        if turn == change.get("at"):
            history[3] = sw.Message.user("an earlier message, changed")
        if turn == PAUSE:
            await ctx.wait_for("go")
        if not any(m.is_action_call for m in actions):
            return actions[-1].text


@pytest.fixture(autouse=True)
def _fresh() -> None:
    executed.clear()
    change.clear()
    model.calls = 0


async def _paused(runner: sw.Runner, run_id: str) -> Any:
    handle = await runner.start(agent_loop, question="read them all", run_id=run_id)
    for _ in range(400):
        if (await runner.get_run(run_id)).status == "suspended":
            return handle
        await asyncio.sleep(0.05)
    raise AssertionError("the run never reached its wait")


def _stored_bytes(steps: list[StoredStep]) -> int:
    return sum(len(s.args or "") + len(s.output or "") + len(s.error or "") for s in steps)


async def test_a_long_agent_loop_stores_what_is_new_and_replays_nothing(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.05, policies=[agent_loop]) as runner:
        handle = await _paused(runner, "long")
        await runner.signal("long", "go", True)
        assert await handle.result(timeout=60) == "done"
        dump = (await export_runs(runner.store, "long"))[0]
        steps = await runner.steps("long")
    # Resumed by replay after the wait: no tool and no model call ran twice.
    assert len(executed) == len(set(executed)) == TURNS
    assert model.calls == TURNS + 1
    content = TURNS * 1020  # what the tool returned
    stored = _stored_bytes(dump.steps)
    assert stored <= 2 * content, f"{stored} bytes stored for {content} bytes of tool output"
    # ... while a reader sees each model call's whole conversation.
    last = [s for s in steps if s.name == model.name][-1]
    seen = json.loads(last.args or "")["observations"]
    assert len(seen) == 2 + 2 * TURNS
    assert "file-0000.txt: xxx" in json.dumps(seen[3])
    assert step_hash(last.args or "") == last.args_hash


async def test_sqlite_file_holds_the_compact_rows(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url, poll_interval=0.05, policies=[agent_loop]) as runner:
        handle = await _paused(runner, "small")
        await runner.signal("small", "go", True)
        await handle.result(timeout=60)
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    args, output = db.execute("SELECT sum(length(args)), sum(length(output)) FROM steps").fetchone()
    spilled = db.execute("SELECT count(*) FROM payloads").fetchone()[0]
    db.close()
    assert spilled == 0
    assert args + output <= 2 * TURNS * 1020


async def test_a_changed_earlier_message_on_replay_is_nondeterminism(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url, poll_interval=0.05, policies=[agent_loop]) as runner:
        handle = await _paused(runner, "changed")
        change["at"] = 40  # on replay, turn 40 rewrites message 3: step 41 differs
        await runner.signal("changed", "go", True)
        with pytest.raises(sw.NonDeterminismError) as caught:
            await handle.result(timeout=60)
    text = str(caught.value)
    assert "step 41 of run changed does not match its record" in text
    recorded, now = text.split("\n")[1:3]
    assert "an earlier message, changed" in now and "an earlier message" not in recorded
    assert "file-0000.txt" in recorded and "file-0039.txt" in now  # both sides whole
    assert len(executed) == PAUSE  # nothing ran again


async def test_a_ledger_of_whole_arguments_still_replays(sqlite_url: str) -> None:
    """Rows as the previous version wrote them (every step's whole arguments)
    replay as before: the hash is that of the whole arguments either way."""
    async with sw.Runner(sqlite_url, poll_interval=0.05, policies=[agent_loop]) as runner:
        handle = await _paused(runner, "old")
        whole = {s.key: s.args for s in await runner.steps("old") if s.args is not None}
        db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
        with db:
            db.executemany(
                "UPDATE steps SET args = ? WHERE run_id = 'old' AND key = ?",
                [(a, k) for k, a in whole.items()],
            )
        assert not any('"$t":"ext"' in (a or "") for (a,) in db.execute("SELECT args FROM steps"))
        db.close()
        await runner.signal("old", "go", True)
        assert await handle.result(timeout=60) == "done"
    assert len(executed) == len(set(executed)) == TURNS


@pytest.mark.slow
async def test_export_import_show_round_trip(store_url: str, tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'source.db'}"
    async with sw.Runner(source, poll_interval=0.05, policies=[agent_loop]) as runner:
        handle = await _paused(runner, "moved")
        await runner.signal("moved", "go", True)
        await handle.result(timeout=60)
        with open(tmp_path / "run.jsonl", "w", encoding="utf-8") as f:
            write_export(await export_runs(runner.store, "moved"), f)
        before = {s.key: s.args for s in await runner.steps("moved")}
    assert (tmp_path / "run.jsonl").stat().st_size <= 3 * TURNS * 1020  # compact in the file
    async with sw.Runner(store_url) as target:
        assert await import_runs(target.store, read_export(tmp_path / "run.jsonl")) == ["moved"]
        after = {s.key: s.args for s in await target.steps("moved")}
    assert after == before
    if store_url.startswith("sqlite"):
        cli = CliRunner(env={"NO_COLOR": "1", "STALWART_STORE": None})
        show = ["runs", "show", "moved", "--json", "--store", store_url]
        shown = await asyncio.to_thread(cli.invoke, app, show)  # the CLI runs its own loop
        assert shown.exit_code == 0, shown.output
        data = json.loads(shown.output)
        model_steps = [s for s in data["steps"] if s["name"] == model.name]
        assert len(model_steps[-1]["args"]["observations"]) == 2 + 2 * TURNS


async def test_a_forged_reference_is_a_corrupted_record(sqlite_url: str, tmp_path: Path) -> None:
    async with sw.Runner(sqlite_url, poll_interval=0.05, policies=[agent_loop]) as runner:
        await _paused(runner, "forged")
        db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
        with db:  # step 50 now says it extends step 90 (later), step 60 a step that is not
            for key, ref in (("50", "90"), ("60", "nowhere")):
                (args,) = db.execute(
                    "SELECT args FROM steps WHERE run_id = 'forged' AND key = ?", (key,)
                ).fetchone()
                forged = args.replace('"k":"' + str(int(key) - 1) + '"', f'"k":"{ref}"')
                assert forged != args
                db.execute(
                    "UPDATE steps SET args = ? WHERE run_id = 'forged' AND key = ?", (forged, key)
                )
        db.close()
        store = runner.store
        with pytest.raises(  # refused by the read itself, never later by an attribute
            CorruptedRecord,
            match=r"run 'forged', step 50, argument "
            r"'observations': it extends step '90', which does not come before",
        ):
            await runner.steps("forged")
        with pytest.raises(CorruptedRecord, match=r"step 60, .*'nowhere', which the run lacks"):
            await store.load_step("forged", "60")
        step_49 = await store.load_step("forged", "49")  # the rest reads as before
        assert step_49 is not None and step_49.args is not None
        with open(tmp_path / "forged.jsonl", "w", encoding="utf-8") as f:
            write_export(await export_runs(runner.store, "forged"), f)
        await runner.cancel("forged")
    with pytest.raises(CorruptedRecord, match=r"forged.jsonl: run 'forged', step 50"):
        read_export(tmp_path / "forged.jsonl")


def test_the_hash_is_that_of_the_whole_arguments() -> None:
    """Whatever is recorded, the identity hash is the whole JSON's (S5),
    through growth, an item changed in place, a rebuilt history and
    positional lists; and the compact record reads back whole."""
    log, steps = ArgsLog(), {}
    history: list[Any] = [sw.Message.system("s"), {"role": "user", "text": "q" * 100}]
    for turn in range(1, 40):
        key = str(turn)
        if turn % 5 == 0:
            history = [
                sw.Message.from_dict(m.to_dict()) if isinstance(m, sw.Message) else m
                for m in history
            ]  # rebuilt: equal, not the same objects
        if turn % 7 == 0:
            history[1]["text"] += "!"  # a dict changed in place: compared by its JSON
        args: tuple[Any, ...] = (history, 3) if turn % 3 == 0 else ()
        kwargs = {} if args else {"observations": history, "n": {"a": [1, 2.5]}}
        stored, digest, _ = log.identify(args, kwargs, key)
        whole = identity_json(args, kwargs, key)
        assert digest == step_hash(whole)
        steps[key] = step_record(key, "null", name="m", args_hash=digest, args=stored)
        log.commit(key)
        assert ArgsTable("r", steps).full(key) == whole
        history = [*history, sw.Message.assistant("a" * (turn * 10))]
    assert '"$t":"ext"' in (steps["38"].args or "")
