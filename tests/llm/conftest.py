"""Replay recorded provider payloads through the official SDKs, offline.

A :class:`Replay` is an HTTP transport for the SDK's own HTTP client: it
answers each request with the next recorded payload from ``payloads/`` and
keeps every request, so tests can check the exact JSON the SDK put on the wire
and what our conversion makes of the answer the SDK parsed.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import anthropic
import openai
import pytest

from stalwart.core.message import Message
from stalwart.llm import ToolSpec

PAYLOADS = Path(__file__).parent / "payloads"


def payload(name: str) -> bytes:
    return (PAYLOADS / name).read_bytes()


def payload_json(name: str) -> Any:
    return json.loads(payload(name))


def sse_events(name: str) -> list[dict[str, Any]]:
    """The JSON data of each event of a recorded SSE stream, as plain dicts."""
    events = []
    for line in payload(name).decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            events.append(json.loads(line[len("data: ") :]))
    return events


def http_module(sdk: ModuleType) -> ModuleType:
    """The HTTP library ``sdk`` builds its client on.

    Releases of the SDKs before their move to ``httpx2`` take ``httpx``
    clients; the current ``anthropic`` refuses those, so each SDK gets a
    client of the library its own base client imports.
    """
    base = importlib.import_module(f"{sdk.__name__}._base_client")
    return base.httpx2 if hasattr(base, "httpx2") else importlib.import_module("httpx")


@dataclass
class Answer:
    """One HTTP answer: a payload file (or a JSON ``body``), a status, extra headers."""

    name: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    # Instead of answering, raise this exception of the HTTP library
    # ("ReadTimeout", "ConnectError"): a request that timed out or never connected.
    raises: str | None = None

    def content(self) -> bytes:
        return payload(self.name) if self.body is None else json.dumps(self.body).encode()


@dataclass
class Request:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Replay:
    """Answers requests with recorded payloads, in order, and records the requests."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = list(answers)
        self.requests: list[Request] = []
        self._clients: list[Any] = []

    @property
    def sent(self) -> dict[str, Any]:
        """The JSON body of the last request."""
        body: dict[str, Any] = self.requests[-1].json()
        return body

    def _handler(self, http: ModuleType) -> Callable[[Any], Any]:
        def handle(request: Any) -> Any:
            self.requests.append(
                Request(request.method, str(request.url), dict(request.headers), request.read())
            )
            if not self.answers:
                return http.Response(418, json={"error": {"message": "no recorded answer left"}})
            answer = self.answers.pop(0)
            if answer.raises is not None:
                raise getattr(http, answer.raises)(answer.raises, request=request)
            kind = "text/event-stream" if answer.name.endswith(".sse") else "application/json"
            headers = {"content-type": kind, **answer.headers}
            return http.Response(answer.status, headers=headers, content=answer.content())

        return handle

    def _http_client(self, sdk: ModuleType) -> Any:
        http = http_module(sdk)
        client = http.AsyncClient(transport=http.MockTransport(self._handler(http)))
        self._clients.append(client)
        return client

    def openai(self, **options: Any) -> openai.AsyncOpenAI:
        options.setdefault("max_retries", 0)
        return openai.AsyncOpenAI(api_key="test", http_client=self._http_client(openai), **options)

    def anthropic(self, **options: Any) -> anthropic.AsyncAnthropic:
        options.setdefault("max_retries", 0)
        return anthropic.AsyncAnthropic(
            api_key="test", http_client=self._http_client(anthropic), **options
        )

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()


@pytest.fixture
async def replay() -> AsyncIterator[Callable[..., Replay]]:
    """Make a :class:`Replay` from payload names or :class:`Answer` objects."""
    made: list[Replay] = []

    def make(*answers: str | Answer) -> Replay:
        r = Replay([a if isinstance(a, Answer) else Answer(a) for a in answers])
        made.append(r)
        return r

    yield make
    for r in made:
        await r.aclose()


WEATHER = ToolSpec(
    "get_weather",
    "Current weather in a city.",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
        },
        "required": ["city"],
    },
)
TIME = ToolSpec(
    "get_time",
    "Current local time in a time zone.",
    {
        "type": "object",
        "properties": {"timezone": {"type": "string"}},
        "required": ["timezone"],
    },
)
TOOLS = [WEATHER, TIME]


def weather_conversation(actor: str = "assistant") -> list[Message]:
    """A finished parallel tool round: question, two calls, their two results."""
    weather = Message.call(
        "get_weather", {"city": "Paris", "unit": "celsius"}, id="call_weather", actor=actor
    )
    time = Message.call("get_time", {"timezone": "Europe/Paris"}, id="call_time", actor=actor)
    return [
        Message.system("You are a concise assistant."),
        Message.user("What's the weather and the time in Paris?"),
        Message.assistant("Let me look both up.", actor=actor),
        weather,
        time,
        Message.result(weather, {"temperature": 18, "sky": "partly cloudy"}),
        Message.result(time, "14:05"),
    ]
