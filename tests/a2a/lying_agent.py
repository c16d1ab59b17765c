"""An A2A agent that lies, for the remote tool's tests:
``python lying_agent.py PORT LIE``. Its card is honest; its answers are not.

- ``other-task``: asks for input, then answers the reply with another task.
- ``other-task-on-get``: says its task is working, then ``tasks/get`` answers
  with another task.
- ``forever``: its task is working, and stays so.
"""

from __future__ import annotations

import sys
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

PORT, LIE = int(sys.argv[1]), sys.argv[2]
URL = f"http://127.0.0.1:{PORT}/"
CARD = {
    "name": "liar",
    "description": "Answers about the wrong tasks.",
    "version": "1",
    "supportedInterfaces": [{"url": URL, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
    "capabilities": {"streaming": False},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [],
}


def _task(task_id: str, state: str, *, said: str = "", answer: str = "") -> dict[str, Any]:
    task: dict[str, Any] = {"id": task_id, "contextId": "c", "status": {"state": state}}
    if said:
        task["status"]["message"] = {
            "messageId": "m",
            "role": "ROLE_AGENT",
            "parts": [{"text": said}],
        }
    if answer:
        task["artifacts"] = [{"artifactId": "result", "parts": [{"text": answer}]}]
    return task


async def card(request: Request) -> JSONResponse:
    return JSONResponse(CARD)


async def rpc(request: Request) -> JSONResponse:
    body = await request.json()
    sending = body["method"] == "SendMessage"
    first = sending and not body["params"]["message"].get("taskId")
    if LIE == "other-task":
        task = (
            _task("t-1", "TASK_STATE_INPUT_REQUIRED", said="Who?")
            if first
            else _task("t-other", "TASK_STATE_COMPLETED", answer="another task's answer")
        )
    elif LIE == "other-task-on-get":
        task = (
            _task("t-1", "TASK_STATE_WORKING")
            if sending
            else _task("t-other", "TASK_STATE_COMPLETED", answer="another task's answer")
        )
    else:  # forever
        task = _task("t-1", "TASK_STATE_WORKING")
    result = {"task": task} if sending else task
    return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": result})


app = Starlette(
    routes=[
        Route("/.well-known/agent-card.json", card),
        Route("/", rpc, methods=["POST"]),
    ]
)
uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
