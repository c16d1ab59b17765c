"""A remote A2A agent (a real ``stalwart a2a serve`` process) called as a tool:
every message a recorded step, a remote question a durable wait, and a
replay after a crash that never sends a finished call again."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.a2a.serving import A2AServer
from tests.conftest import free_port
from tests.crash import kill, spawn, wait_for_files, wait_for_line

import stalwart as sw
from stalwart import a2a, llm
from stalwart.testing import ScriptedLLM, call

pytestmark = pytest.mark.slow

CALLER = Path(__file__).with_name("caller_program.py")


async def test_a_remote_question_is_a_durable_wait_of_the_calling_run(
    store_url: str, tmp_path: Path
) -> None:
    server = A2AServer("greeter", f"sqlite:///{tmp_path / 'remote.db'}")
    await server.start()
    greeter = a2a.remote_agent(server.url, name="greeter")

    @sw.policy
    async def caller(ctx: sw.Context, topic: str) -> str:
        return str(await greeter(question=topic))

    try:
        async with sw.Runner(store_url, policies=[caller]) as runner:
            handle = await runner.start(caller, topic="tea", run_id="caller-1")
            for _ in range(300):
                rec = await runner.get_run("caller-1")
                if rec.status == "suspended":
                    break
                await asyncio.sleep(0.05)
            assert rec.waiting_for == "greeter.input"
            await runner.signal("caller-1", "greeter.input", "Ada")
            result = await handle.result(timeout=60)
            steps = await runner.steps("caller-1")
    finally:
        server.kill()
    assert result == "Hello, Ada: TEA"
    sends = [s for s in steps if s.name == "greeter_send"]
    assert len(sends) == 2  # the question, then the answer: each a recorded step
    asked = [s for s in steps if s.name == "stalwart.ask"]
    assert asked and "Who is asking about 'tea'?" in (asked[0].output or "")


async def test_a_finished_remote_call_is_never_sent_again_after_a_crash(
    store_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    server = A2AServer("shout", f"sqlite:///{tmp_path / 'remote.db'}", {"A2A_LOG": str(log)})
    await server.start()
    mark = tmp_path / "mark"
    first = spawn(CALLER, store_url, server.url, mark, env={"A2A_SLOW": "60"})
    try:
        wait_for_files(first, mark)  # the remote call has finished and is recorded
        kill(first)
    finally:
        server.kill()  # gone: a resumed run that called it again would fail
    second = spawn(CALLER, store_url, server.url, mark, env={"A2A_SLOW": "0"})
    try:
        seen = wait_for_line(second, "RESULT")
    finally:
        second.wait(30)
    assert seen[-1] == "RESULT remote said HELLO!"
    assert log.read_text().splitlines() == ["shout hello"]


def test_a_remote_agents_name_must_be_a_tool_name() -> None:
    with pytest.raises(ValueError, match="remote agent name"):
        a2a.remote_agent("http://127.0.0.1:1/", name="no spaces")


async def test_an_unreachable_agent_fails_the_call_naming_it() -> None:
    from tests.conftest import free_port

    tool = a2a.remote_agent(f"http://127.0.0.1:{free_port()}/", name="nobody", timeout=5)
    with pytest.raises(a2a.RemoteTaskFailed, match="remote agent 'nobody'"):
        await sw.Runner().run(tool, question="hi")


async def test_a_failed_remote_task_is_the_calls_error_naming_agent_task_and_cause(
    tmp_path: Path,
) -> None:
    server = A2AServer("broken", f"sqlite:///{tmp_path / 'remote.db'}")
    await server.start()
    tool = a2a.remote_agent(server.url, name="oracle")
    try:
        with pytest.raises(a2a.RemoteTaskFailed) as caught:
            await sw.Runner().run(tool, question="atlantis")
    finally:
        server.kill()
    text = str(caught.value)
    assert "remote agent 'oracle'" in text and "ended failed" in text
    assert "LookupError: nothing known about atlantis" in text


async def test_an_agent_whose_remote_tool_asks_waits_durably_and_goes_on_once_answered(
    store_url: str, tmp_path: Path
) -> None:
    server = A2AServer("greeter", f"sqlite:///{tmp_path / 'remote.db'}")
    await server.start()
    greeter = a2a.remote_agent(server.url, name="greeter")
    model = ScriptedLLM(
        [call("greeter", question="cake"), lambda seen, options: f"They said: {seen[-1].text}"]
    )
    host = llm.Agent(model, instructions="You pass questions on.", tools=[greeter], name="host")
    try:
        async with sw.Runner(store_url, policies=[host]) as runner:
            handle = await runner.start(host, question="Ask about cake", run_id="host-1")
            for _ in range(300):
                rec = await runner.get_run("host-1")
                if rec.status == "suspended":
                    break
                await asyncio.sleep(0.05)
        assert rec.waiting_for == "greeter.input"
        async with sw.Runner(store_url, policies=[host], serving=True) as runner:
            await runner.signal("host-1", "greeter.input", "Grace")
            result = await runner.outcome("host-1")
    finally:
        server.kill()
    assert handle.run_id == "host-1"
    assert result == "They said: Hello, Grace: CAKE"


LIAR = Path(__file__).with_name("lying_agent.py")


@contextlib.asynccontextmanager
async def lying_agent(lie: str) -> AsyncIterator[str]:
    """A real server telling ``lie`` (tests/a2a/lying_agent.py); its URL."""
    port = free_port()
    # A server process of its own, started once: not on the hot path.
    proc = subprocess.Popen([sys.executable, str(LIAR), str(port), lie])  # noqa: ASYNC220
    try:
        for _ in range(400):
            assert proc.poll() is None, "the lying agent exited"
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.kill()
        proc.wait(10)


async def test_an_answer_about_another_task_fails_the_call_naming_both_tasks() -> None:
    async with lying_agent("other-task") as url:
        tool = a2a.remote_agent(url, name="liar", timeout=10)

        @sw.policy
        async def caller(ctx: sw.Context) -> str:
            return str(await tool(question="hi"))

        async with sw.Runner(policies=[caller]) as runner:
            handle = await runner.start(caller, run_id="caller-1")
            for _ in range(300):
                if (await runner.get_run("caller-1")).status == "suspended":
                    break
                await asyncio.sleep(0.05)
            await runner.signal("caller-1", "liar.input", "Ada")
            with pytest.raises(a2a.RemoteTaskFailed) as caught:
                await handle.result(timeout=30)
    assert "answered about task 't-other', not the task 't-1'" in str(caught.value)


async def test_a_task_read_back_as_another_task_fails_the_call() -> None:
    async with lying_agent("other-task-on-get") as url:
        tool = a2a.remote_agent(url, name="liar", timeout=10)
        with pytest.raises(a2a.RemoteTaskFailed, match="answered about task 't-other'"):
            await sw.Runner().run(tool, question="hi")


async def test_a_task_that_never_settles_fails_the_call_after_its_timeout() -> None:
    async with lying_agent("forever") as url:
        tool = a2a.remote_agent(url, name="liar", timeout=1)
        with pytest.raises(a2a.RemoteTaskFailed, match="did not settle in 1"):
            await sw.Runner().run(tool, question="hi")


async def test_credentials_in_the_agents_url_never_reach_the_recorded_error(
    store_url: str,
) -> None:
    url = f"http://user:hunter2@127.0.0.1:{free_port()}/?token=s3cret"
    tool = a2a.remote_agent(url, name="nobody", timeout=5)
    async with sw.Runner(store_url, policies=[tool]) as runner:
        with pytest.raises(a2a.RemoteTaskFailed) as caught:
            await runner.run(tool, question="hi", run_id="secret-1")
        steps = await runner.steps("secret-1")
        rec = await runner.get_run("secret-1")
    recorded = " ".join([str(caught.value), rec.error or "", *(s.error or "" for s in steps)])
    assert "nobody_send" in [s.name for s in steps]
    assert "remote agent 'nobody'" in recorded
    assert "hunter2" not in recorded and "s3cret" not in recorded
