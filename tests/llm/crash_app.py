"""What the agent programs that crash tests kill have in common.

Each such program (``*_app.py`` here) runs one agent on a store in a real
process, appends what it did to files in a work folder outside the process
(requests served, tools executed), says when the step the parent waits for
is recorded and, in ``run`` mode, holds still right there for the parent's
SIGKILL; in ``recover`` mode it recovers the run and finishes it.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stalwart as sw

__all__ = [
    "PAYLOADS",
    "HoldAfter",
    "assistant_turn",
    "get_weather",
    "log",
    "mock_http_client",
    "print_answer",
    "program_args",
    "run_or_recover",
]

PAYLOADS = Path(__file__).with_name("payloads")
_workdir = Path(".")


def program_args(count: int) -> list[str]:
    """``sys.argv[1:count + 1]``: ``STORE_URL WORKDIR ACTION RUN_ID ...``;
    WORKDIR becomes where :func:`log` writes."""
    global _workdir
    args = sys.argv[1 : count + 1]
    _workdir = Path(args[1])
    return args


def log(name: str, line: str) -> None:
    """Append ``line`` to ``name`` in the work folder, on disk before it returns."""
    with open(_workdir / name, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@sw.policy
async def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """Current weather in a city.

    Args:
        city: City name, e.g. Paris
        unit: Temperature unit, celsius or fahrenheit.
    """
    log("tools.txt", f"get_weather {city}")
    return {"temperature": 18, "unit": unit, "sky": "partly cloudy"}


def assistant_turn(request_body: dict[str, Any]) -> int:
    """Which turn a chat request asks for: 1 + the assistant messages it holds."""
    return 1 + sum(1 for m in request_body["messages"] if m["role"] == "assistant")


def mock_http_client(sdk: Any, serve: Callable[[Any, Any], Any]) -> Any:
    """An ``httpx.AsyncClient`` for the official ``sdk`` module (``openai``,
    ``anthropic``), answered by ``serve(http, request)`` (``http`` is the
    httpx module that SDK uses, to build the response with)."""
    base = importlib.import_module(f"{sdk.__name__}._base_client")
    http: Any = base.httpx2 if hasattr(base, "httpx2") else importlib.import_module("httpx")
    return http.AsyncClient(transport=http.MockTransport(lambda request: serve(http, request)))


class HoldAfter(sw.Hook):
    """Prints ``say(call)`` when a call ``matches`` is recorded; with
    ``hold``, holds still after the ``nth`` of them (the parent kills us there)."""

    def __init__(
        self,
        matches: Callable[[sw.CallInfo], bool],
        say: Callable[[sw.CallInfo], str],
        *,
        hold: bool,
        nth: int = 1,
    ) -> None:
        self.matches = matches
        self.say = say
        self.hold = hold
        self.nth = nth
        self.seen = 0

    async def after_call(self, call: sw.CallInfo, result: Any) -> None:
        if not self.matches(call):
            return
        self.seen += 1
        print(self.say(call), flush=True)
        if self.hold and self.seen == self.nth:
            await asyncio.sleep(3600)  # the parent kills us here


async def run_or_recover(
    runner: sw.Runner, action: str, run_id: str, root: Any, **inputs: Any
) -> sw.RunHandle:
    """``run``: start ``root`` as run ``run_id``; ``recover``: adopt the
    killed process's runs and print how many."""
    if action == "run":
        return await runner.start(root, run_id=run_id, **inputs)
    handles = await runner.recover()
    print(f"recovered {len(handles)}", flush=True)
    return sw.RunHandle(runner, run_id)


def print_answer(answer: Any) -> None:
    print("answer " + json.dumps(answer), flush=True)
