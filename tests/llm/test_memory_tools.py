"""The ``remember``/``recall`` tools and the memory example: an agent keeps
a note in one conversation and finds it in the next, within the namespace
the program set around its call, which the model can neither see nor choose."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import stalwart as sw
from stalwart import llm
from stalwart.testing import ScriptedLLM, call

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "memory_agent.py"


def test_the_model_sees_a_note_and_a_query_never_a_namespace() -> None:
    specs = {s.name: s.parameters for s in llm.tool_specs([llm.remember, llm.recall])}
    assert {name: list(p["properties"]) for name, p in specs.items()} == {
        "remember": ["note"],
        "recall": ["query"],
    }


def test_a_scope_with_an_empty_namespace_is_refused() -> None:
    with (
        pytest.raises(ValueError, match="memory_scope: field 'namespace' is empty"),
        llm.memory_scope(()),
    ):
        pass


def _as_told(observations: list[sw.Message], options: object) -> sw.Message:
    tool, args = json.loads(next(m.text for m in observations if m.role == "user"))
    return call(tool, **args)


model = ScriptedLLM([_as_told, "done"])
agent = llm.Agent(model, tools=[llm.remember, llm.recall], name="assistant")


@sw.policy
async def converse(user: str, tool: str, text: str) -> str:
    # The model is told which tool to call and with what: a scripted test.
    arg = "note" if tool == "remember" else "query"
    with llm.memory_scope(("users", user)):
        answer: str = await agent(question=json.dumps([tool, {arg: text}]))
    return answer


@sw.policy
async def unscoped(text: str) -> str:
    answer: str = await agent(question=json.dumps(["recall", {"query": text}]))
    return answer


async def _tool_outputs(runner: sw.Runner, run_id: str, tool: str) -> list[object]:
    return [json.loads(s.output or "null") for s in await runner.steps(run_id) if s.name == tool]


async def test_a_note_kept_in_one_run_is_recalled_in_the_next_for_that_user_only(
    store_url: str,
) -> None:
    async with sw.Runner(store_url) as runner:
        await runner.run(
            converse, user="ada", tool="remember", text="allergic to peanuts", run_id="keep"
        )
        for user, found in (("ada", ["allergic to peanuts"]), ("bob", [])):
            await runner.run(converse, user=user, tool="recall", text="peanuts", run_id=user)
            assert await _tool_outputs(runner, user, "recall") == [found]
        steps = {s.key: s for s in await runner.steps("keep")}
        (note,) = await sw.Memory(runner.store).recent(("users", "ada"))
    # The note's key comes from the run and the tool's step: a resumed run
    # that writes it again writes it in place.
    tool_key = next(k for k, s in steps.items() if s.name == "remember")
    assert note.key == f"keep/{tool_key}"
    assert steps[f"{tool_key}.1"].name == "stalwart.memory.put"


async def test_a_tool_called_outside_a_scope_says_so(store_url: str) -> None:
    async with sw.Runner(store_url) as runner:
        await runner.run(unscoped, text="peanuts", run_id="u")
        (failed,) = [s for s in await runner.steps("u") if s.name == "recall"]
    assert "has no memory namespace" in (failed.error or "")


def test_the_memory_example_remembers_across_conversations_and_forgets(tmp_path: Path) -> None:
    conversation = [
        (["--user", "ada", "Remember that I am allergic to peanuts"], "Noted"),
        (["--user", "ada", "Which food am I allergic to?"], "I am allergic to peanuts"),
        (["--user", "bob", "Which food am I allergic to?"], "I don't know"),
        (["--user", "ada", "--forget"], "forgot 1 note(s)"),
        (["--user", "ada", "Which food am I allergic to?"], "I don't know"),
    ]
    for args, expected in conversation:
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert expected in done.stdout, (args, done.stdout)
