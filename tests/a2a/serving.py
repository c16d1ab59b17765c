"""A real ``stalwart a2a serve`` process and the official SDK's client on it:
how the A2A tests reach a server. The server can be killed (SIGKILL) and
started again on the same store and port."""

# The client waits for the server's port with a short sleep, on purpose.
# ruff: noqa: ASYNC220

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from a2a.client import Client, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, Task
from google.protobuf import json_format, struct_pb2
from tests.conftest import free_port

__all__ = ["SERVED_APP", "A2AServer", "ask", "collect", "data_message", "text_message"]

SERVED_APP = Path(__file__).with_name("served_app.py")
ROOT = Path(__file__).parents[2]


class A2AServer:
    """``stalwart a2a serve --app served_app.py:<agent> --store <store>`` on a
    free port; ``start`` again after ``kill`` serves the same store."""

    def __init__(
        self,
        agent: str,
        store: str,
        env: dict[str, str] | None = None,
        *,
        conversation: bool = False,
    ) -> None:
        self.agent = agent
        self.conversation = conversation
        self.store = store
        self.env = dict(env or {})
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self, **env: str) -> None:
        self.env.update(env)
        path = os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])
        command = [
            sys.executable, "-m", "stalwart.cli", "a2a", "serve",
            "--app", f"{SERVED_APP}:{self.agent}", "--store", self.store,
            "--port", str(self.port), *(["--conversation"] if self.conversation else []),
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            command, env={**os.environ, "PYTHONPATH": path, **self.env}, cwd=ROOT
        )
        for _ in range(400):
            assert self.proc.poll() is None, "the A2A server exited"
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return
            except OSError:
                await asyncio.sleep(0.05)
        raise AssertionError("the A2A server never listened")

    def kill(self) -> None:
        """SIGKILL the server and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    async def client(self, *, streaming: bool = False) -> Client:
        return await create_client(self.url, ClientConfig(streaming=streaming))


def text_message(text: str, *, task_id: str = "", message_id: str | None = None) -> Message:
    return Message(
        message_id=message_id or uuid.uuid4().hex,
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
    )


def data_message(value: dict[str, Any]) -> Message:
    """A first message whose one data part holds ``value``."""
    data = struct_pb2.Value()
    json_format.ParseDict(value, data)
    return Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(data=data)])


async def collect(client: Client, message: Message, **config: Any) -> list[StreamResponse]:
    request = SendMessageRequest(message=message)
    for k, v in config.items():
        setattr(request.configuration, k, v)
    return [r async for r in client.send_message(request)]


async def ask(client: Client, message: Message) -> Task:
    """Send ``message`` (blocking) and return the task the server answers."""
    (response,) = await collect(client, message)
    assert response.HasField("task"), response
    return response.task
