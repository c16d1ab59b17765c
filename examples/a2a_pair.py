"""Two agents talking A2A: a translator served as an A2A agent, and a writer
that calls it as a tool.

The translator is an ``llm.Agent`` served by ``stalwart.a2a`` (what
``stalwart a2a serve --app examples/a2a_pair.py:translator`` runs), each task
a durable run on its own SQLite file. The writer is another agent, on its
own store, offered ``a2a.remote_agent(url, name="translator")``: each
message it sends is a recorded step, so a writer that crashes and resumes
never asks the translator twice.

Both models are scripted here (``ScriptedLLM``), so it runs offline:

    python examples/a2a_pair.py [FOLDER]
"""

from __future__ import annotations

import asyncio
import socket
import sys
import tempfile
from pathlib import Path

import uvicorn

import stalwart as sw
from stalwart import a2a, llm
from stalwart.testing import ScriptedLLM, call

translator = llm.Agent(
    ScriptedLLM(["Bonjour, le monde"]),
    instructions="You translate English into French.",
    name="translator",
)


def writer_for(url: str) -> llm.Agent:
    """The writer: asks the remote translator, then writes its answer."""
    remote = a2a.remote_agent(url, name="translator", description="Translates into French.")
    model = ScriptedLLM(
        [
            call("translator", question="Hello, world"),
            lambda seen, options: f"In French: {seen[-1].text}",
        ]
    )
    return llm.Agent(model, instructions="You write greetings.", tools=[remote], name="writer")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main(folder: Path) -> str:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    served = sw.Runner(f"sqlite:///{folder / 'translator.db'}", serving=True)
    app = a2a.build_app(translator, served, url=url)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():  # it could not start: say why
            serving.result()
        await asyncio.sleep(0.05)
    try:
        async with sw.Runner(f"sqlite:///{folder / 'writer.db'}") as runner:
            writer = writer_for(url)
            return str(await writer.run("Greet the world in French", runner=runner, run_id="w-1"))
    finally:
        server.should_exit = True
        await serving


if __name__ == "__main__":
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    where.mkdir(parents=True, exist_ok=True)
    print(asyncio.run(main(where)))
