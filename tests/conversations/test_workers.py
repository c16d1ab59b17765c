"""Threads executed by workers, and follow-ups injected into a turn.

The test process is a client: it opens each thread with ``queue=``, so it
only enqueues the thread's run and the turns and awaits the replies from
the store; a real worker process (``conversation_worker.py``) executes them. The
worker is killed with SIGKILL in the middle of a turn and a fresh one
finishes it: nothing answered twice, nothing lost. With
``followups="inject"``, a message sent while the agent is in a tool call
joins the conversation before the agent's next model call; the worker is
killed after that call and the resumed one injects it at the same point.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import stalwart as sw
from stalwart.conversations import TURN

from .conversation_worker import chat, helper

APP = str(Path(__file__).with_name("conversation_worker.py"))


class Worker:
    """A worker process whose output goes to a file the test reads."""

    def __init__(self, url: str, workdir: Path, name: str) -> None:
        self.log = workdir / f"{name}.log"
        with self.log.open("w") as out:
            env = {**os.environ, "CHAT_WORKDIR": str(workdir)}
            self.proc = subprocess.Popen(
                [sys.executable, APP, url], stdout=out, stderr=subprocess.STDOUT, env=env
            )

    def said(self, line: str) -> bool:
        return line in self.log.read_text().splitlines()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        assert self.proc.returncode == -signal.SIGKILL

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


async def _until(check: Callable[[], bool], worker: Worker) -> None:
    """Wait (without a time limit of its own: pytest's timeout bounds it)
    until ``check()``; fail at once with the worker's output if it died."""
    while not check():
        assert worker.proc.poll() is None, worker.log.read_text()
        await asyncio.sleep(0.02)


def test_a_client_leaves_the_thread_to_a_worker_killed_mid_turn(
    store_url: str, tmp_path: Path
) -> None:
    served = tmp_path / "served.txt"

    def lines() -> list[tuple[int, str]]:
        text = served.read_text() if served.exists() else ""
        return [(int(p), q) for p, q in (line.split() for line in text.splitlines())]

    async def client() -> None:
        first = Worker(store_url, tmp_path, "first")
        second = None
        try:
            async with sw.Runner(store_url, poll_interval=0.02) as runner:
                thread = sw.Conversation(runner, chat, "chat", queue="default")
                assert await thread.send("q1", message_id="m1") == "q1 after nothing"

                (tmp_path / "hold-q2").touch()
                turn2 = await thread.put("q2", message_id="m2")
                await _until(lambda: (first.proc.pid, "q2") in lines(), first)
                first.kill()  # during the second turn: the agent's answer unrecorded
                (tmp_path / "hold-q2").unlink()

                second = Worker(store_url, tmp_path, "second")
                assert await turn2.result(timeout=120) == "q2 after q1"
                assert await thread.send("q3", message_id="m3") == "q3 after q1,q2"
                # The same message id is the same turn: read back, not asked again.
                assert await thread.send("q2", message_id="m2") == "q2 after q1"
                assert runner.executing == []  # the client executed nothing
                sends = [s for s in await runner.steps("chat") if s.name == "stalwart.send"]
                assert len(sends) == 3  # one reply per turn: none answered twice
        finally:
            first.stop()
            if second is not None:
                second.stop()
        assert second is not None
        assert lines() == [
            (first.proc.pid, "q1"),
            (first.proc.pid, "q2"),  # killed in flight (S3: at least once, one result)
            (second.proc.pid, "q2"),
            (second.proc.pid, "q3"),
        ]

    asyncio.run(client())


def test_a_followup_is_injected_at_the_next_model_call_and_again_after_a_kill(
    tmp_path: Path,
    sqlite_url: str,
) -> None:
    url = sqlite_url

    async def client() -> None:
        first = Worker(url, tmp_path, "first")
        second = None
        try:
            async with sw.Runner(url, poll_interval=0.02) as runner:
                thread = sw.Conversation(
                    runner, helper, "help", queue="default", followups="inject"
                )
                (tmp_path / "hold").touch()
                turn1 = await thread.put("book a trip", message_id="m1")
                await _until(lambda: first.said("looking up flights"), first)
                turn2 = await thread.put("in May", message_id="m2")  # while a tool runs

                async def sent() -> bool:
                    return (await runner.get_run("help~turn-m2")).status == "suspended"

                while not await sent():  # its message waits in the thread's mailbox
                    await asyncio.sleep(0.02)
                (tmp_path / "release").touch()
                await _until(lambda: first.said("holding"), first)
                first.kill()  # after the model call that saw the follow-up
                (tmp_path / "hold").unlink()

                second = Worker(url, tmp_path, "second")
                reply = await turn1.result(timeout=120)
                assert reply == "answer to book a trip + in May"
                assert await turn2.result(timeout=120) == reply  # answered together
                steps = await runner.steps("help")
                # The tool that finished was not run again; the model calls the
                # first worker recorded were replayed (the resumed one made the last).
                assert not second.said("looking up flights") and second.said("holding")
                seen = (tmp_path / "seen.txt").read_text().splitlines()
                # Injected after the first model call, before the second; the
                # resumed worker shows the model the same conversation.
                assert seen == [
                    f"{first.proc.pid} book a trip",
                    f"{first.proc.pid} book a trip + in May",
                    f"{second.proc.pid} book a trip + in May",
                ]
                # The next turn's history holds both messages (and the one reply).
                later = await thread.send("thanks", message_id="m3")
                assert later == "answer to book a trip + in May + thanks"
        finally:
            first.stop()
            if second is not None:
                second.stop()

        agent = next(s for s in steps if s.name == "helper")
        inside = [s for s in steps if s.key.startswith(agent.key + ".")]
        model = [s for s in inside if s.name == "scripted_llm"]
        taken = [s for s in inside if s.name == "stalwart.receive" and s.output is not None]
        assert len(model) == 3 and len(taken) == 1  # taken once, by a recorded receive
        mail = json.loads(taken[0].output or "")
        assert (mail["kind"], mail["from"], mail["body"]) == (TURN, "help~turn-m2", "in May")
        replies = [json.loads(s.args or "{}") for s in steps if s.name == "stalwart.send"]
        assert len(replies) == 2  # one to each turn; the folded one names its turn
        assert "help~turn-m1" in json.dumps(replies[1])

    asyncio.run(client())


def test_inject_needs_a_conversation_and_a_queue_needs_a_store() -> None:
    with pytest.raises(ValueError, match="followups must be"):
        sw.Conversation(sw.Runner(), chat, "x", followups="later")
    with pytest.raises(ValueError, match="needs a conversation"):
        sw.Conversation(sw.Runner(), chat, "x", history=False, followups="inject")

    async def main() -> None:
        needs = "conversation 'x': a conversation on a queue needs"
        with pytest.raises(sw.StoreError, match=needs):
            await sw.Conversation(sw.Runner(), chat, "x", queue="default").send("hi")

    asyncio.run(main())
