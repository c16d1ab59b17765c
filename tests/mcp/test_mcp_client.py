"""stalwart.mcp.connect against a real stdio server written with the SDK."""

# The tests poll marker files the servers write and start real processes, on purpose.
# ruff: noqa: ASYNC220, ASYNC221, ASYNC240

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

import stalwart as sw
from stalwart import mcp
from stalwart.testing import ScriptedLLM, call

HERE = Path(__file__).parent
SERVER = [sys.executable, str(HERE / "calc_server.py")]
pytestmark = pytest.mark.timeout(60)


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "CALC_COUNT": str(tmp / "count"), **extra}


def counts(tmp: Path) -> dict[str, int]:
    path = tmp / "count"
    lines = path.read_text().split() if path.exists() else []
    return {name: lines.count(name) for name in set(lines)}


def agent_for(model: ScriptedLLM, env: dict[str, str], allow: list[str] | None = None) -> sw.Policy:
    @sw.policy(name=f"agent_{model.name}")
    async def agent(ctx: sw.Context, question: str) -> list[sw.Message]:
        history = [sw.Message.user(question)]
        async with mcp.connect(SERVER, name="calc", env=env, allow=allow) as tools:
            while True:
                actions = await ctx.call(model, observations=history, options=tools)
                history += actions
                if not any(m.is_action_call for m in actions):
                    return history

    return agent


async def test_tools_are_options_with_the_servers_schema(tmp_path: Path) -> None:
    async with mcp.connect(SERVER, name="calc", env=_env(tmp_path)) as tools:
        add = tools.tool("add")
        assert add.name == "add"
        assert add.description.startswith("Add two integers")
        assert add.parameters["properties"]["a"]["type"] == "integer"
        assert add.parameters["required"] == ["a", "b"]
        assert add.spec.parameters == add.parameters  # what a provider sends the model
        assert {t.name for t in tools} == {"add", "slow", "fails", "rich", "die"}
    async with mcp.connect(SERVER, env=_env(tmp_path), allow=["add"], prefix="calc_") as only:
        assert [t.name for t in only] == ["calc_add"]
    with pytest.raises(ValueError, match="does not offer: nope"):
        await mcp.connect(SERVER, env=_env(tmp_path), allow=["nope"])


async def test_calls_validation_errors_and_content_reach_the_model(tmp_path: Path) -> None:
    model = ScriptedLLM(
        [
            [
                call("add", a=2, b=3),
                call("add", a="two", b=3),  # refused by the server's schema: never sent
                call("fails", reason="no"),  # isError from the server
                call("rich"),
                call("subtract", a=1, b=1),  # not offered
            ],
            "done",
        ],
        name="m1",
    )
    history = await sw.Runner().run(agent_for(model, _env(tmp_path)), question="q")
    results = [m for m in history if m.is_action_result]
    assert results[0].text == "5" and not results[0].is_error
    assert results[1].is_error and results[1].action_result.error_type == "InvalidArguments"
    assert "a: 'two' is not of type 'integer'" in results[1].text
    assert results[2].is_error and results[2].action_result.error_type == "ToolError"
    assert "cannot: no" in results[2].text
    rich = results[3].action_result.value
    assert isinstance(rich, sw.Message)
    assert [type(p).__name__ for p in rich.parts] == ["Text", "Media", "Text", "Media", "Media"]
    assert rich.parts[1] == sw.Media("image/png", data=b"\x89PNG fake")
    assert rich.parts[2] == sw.Text("the notes")
    assert rich.parts[3] == sw.Media("application/octet-stream", data=b"\x00\x01")
    assert rich.parts[4].url == "https://example.com/r"
    assert rich.meta["mcp"]["structured_content"] == {"ok": True}
    assert [r["uri"] for r in rich.meta["mcp"]["resources"]] == [
        "file:///notes.txt",
        "file:///data.bin",
        "https://example.com/r",
    ]
    assert results[4].action_result.error_type == "UnknownOption"
    assert counts(tmp_path) == {"add": 1, "fails": 1, "rich": 1}


async def test_a_server_that_dies_is_an_error_result_then_reconnected(tmp_path: Path) -> None:
    model = ScriptedLLM([call("die"), call("add", a=1, b=1), "done"], name="m2")
    history = await sw.Runner().run(agent_for(model, _env(tmp_path)), question="q")
    results = [m for m in history if m.is_action_result]
    assert results[0].action_result.error_type == "ServerUnavailable"
    assert "went away during the call of 'die'" in results[0].text
    assert results[1].text == "2"  # a new server process answered
    assert counts(tmp_path) == {"die": 1, "add": 1}


async def test_a_finished_run_replays_from_the_ledger_even_if_the_server_changed(
    tmp_path: Path,
    sqlite_url: str,
) -> None:
    db = sqlite_url
    model = ScriptedLLM([call("slow", text="x"), call("add", a=1, b=2), "done"], name="m3")
    env = _env(tmp_path)
    agent = agent_for(model, env)
    runner = sw.Runner(db)
    first = await runner.run(agent, question="q", run_id="changed")
    await runner.close()
    assert first[-1].text == "done"
    # The server changes add's schema; a run recorded before replays in full
    # (no server call at all), and a new live call of add fails clearly.
    env["CALC_VARIANT"] = "changed"
    runner = sw.Runner(db)
    again = await runner.run(agent, question="q", run_id="changed")
    assert [m.text for m in again] == [m.text for m in first]
    assert counts(tmp_path) == {"slow": 1, "add": 1}
    steps = await runner.steps("changed")
    assert [s.name for s in steps].count("mcp_list_tools") == 1
    await runner.close()


async def test_a_server_restarted_with_another_schema_fails_only_that_tools_calls(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)

    def restart_changed(observations: list[sw.Message], options: object) -> list[sw.Message]:
        env["CALC_VARIANT"] = "changed"  # the server comes back with another add
        return [call("add", a=1, b=2), call("slow", text="x")]

    model = ScriptedLLM([call("die"), restart_changed, "done"], name="m4")
    history = await sw.Runner().run(agent_for(model, env), question="q")
    results = [m for m in history if m.is_action_result]
    assert results[0].action_result.error_type == "ServerUnavailable"
    assert results[1].action_result.error_type == "ToolChanged"
    assert "changed the input schema of 'add'" in results[1].text
    assert '"type":"integer"' in results[1].text and '"type":"string"' in results[1].text
    assert results[2].text == "X"  # slow did not change: it runs
    assert counts(tmp_path) == {"die": 1, "slow": 1}


async def test_killed_durable_run_resumes_without_calling_finished_tools_again(
    tmp_path: Path,
) -> None:
    """SIGKILL the agent's process while its second MCP call runs; the resumed
    run answers the first call from the ledger (the server counts one add)."""
    import signal
    import subprocess

    db, block = tmp_path / "agent.db", tmp_path / "block"
    env = {**os.environ, "CALC_COUNT": str(tmp_path / "count"), "CALC_BLOCK": str(block)}
    block.write_text("")
    cmd = [sys.executable, str(HERE / "durable_agent.py"), str(db), "r1"]
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    started = Path(str(block) + ".started")
    try:
        for _ in range(1500):
            if started.exists():
                break
            await asyncio.sleep(0.02)
        assert counts(tmp_path) == {"add": 1, "slow": 1}
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the agent and its stdio server
        proc.wait(10)
    block.unlink()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "5 | FIVE | the answer is 5"
    # add ran once; slow was in flight when the process died, so it ran again (S3).
    assert counts(tmp_path) == {"add": 1, "slow": 2}


async def test_a_models_arguments_are_read_as_a_policys_are(tmp_path: Path) -> None:
    """ "6" for an integer is 6, as it is for a policy; a boolean is never a number."""
    model = ScriptedLLM(
        [[call("add", a="6", b=1.0), call("add", a=True, b=1)], "done"], name="lenient"
    )
    history = await sw.Runner().run(agent_for(model, _env(tmp_path)), question="q")
    results = [m for m in history if m.is_action_result]
    assert results[0].text == "7" and not results[0].is_error
    assert results[1].is_error and results[1].action_result.error_type == "InvalidArguments"
    assert "a: True is not of type 'integer'" in results[1].text
    assert counts(tmp_path) == {"add": 1}
