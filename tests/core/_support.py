"""Types and helpers shared by the core tests.

Types that cross the JSON boundary live at module level: the codec rebuilds
them by import path, as it would after a crash.
"""

import asyncio
import dataclasses
import enum
from collections.abc import AsyncIterator
from typing import Any

import pydantic

import stalwart as sw
from stalwart.testing import ScriptedLLM, call


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mode(enum.StrEnum):
    FAST = "fast"
    SAFE = "safe"


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


@dataclasses.dataclass
class Route:
    name: str
    stops: list[Point]
    tags: tuple[str, ...] = ()


class Weather(pydantic.BaseModel):
    city: str
    celsius: float
    tags: list[str] = []


class Forecast(pydantic.BaseModel):
    days: list[Weather]
    source: str | None = None


# What a program does for types no policy hint names: declare them once.
sw.register_type(Color, Level, Mode, Point, Route, Weather, Forecast)


class Recorder(sw.Hook):
    """A hook that writes down what it saw, in order."""

    def __init__(self, veto: set[str] | None = None) -> None:
        self.seen: list[tuple[str, str, str, Any]] = []
        self.veto = veto or set()

    async def before_call(self, call: sw.CallInfo) -> None:
        self.seen.append(("before", call.key, call.name, dict(call.arguments)))
        if call.name in self.veto:
            raise sw.Veto(f"{call.name} is not allowed today")

    async def after_call(self, call: sw.CallInfo, result: Any) -> None:
        self.seen.append(("after", call.key, call.name, result))

    async def on_error(self, call: sw.CallInfo, error: BaseException) -> None:
        self.seen.append(("error", call.key, call.name, error))

    async def on_retry(self, call: sw.CallInfo, attempt: int, error: BaseException) -> None:
        self.seen.append(("retry", call.key, call.name, (attempt, error)))

    def of(self, kind: str) -> list[tuple[str, str, Any]]:
        return [(k, n, x) for (w, k, n, x) in self.seen if w == kind]


async def collect(events: AsyncIterator[sw.Event], limit: float = 5.0) -> list[sw.Event]:
    """Every event of a stream, failing (not hanging) if it never ends."""
    out: list[sw.Event] = []
    async with asyncio.timeout(limit):
        async for ev in events:
            out.append(ev)
    return out


class Gauge:
    """Counts calls running at once, to measure concurrency without clocks."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.started = 0
        self.finished = 0

    async def run(self, value: Any, yields: int = 5) -> Any:
        self.active += 1
        self.started += 1
        self.peak = max(self.peak, self.active)
        try:
            for _ in range(yields):
                await asyncio.sleep(0)
            return value
        finally:
            self.active -= 1
            self.finished += 1


def others() -> set[asyncio.Task[Any]]:
    """Tasks alive besides the current one."""
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}


def result_texts(out: list[sw.Message]) -> list[str]:
    """The result of each tool call in a model's turn, as text: its value,
    or ``Type: message`` for an error (a lock refusal among them)."""
    return [
        f"{r.error_type}: {r.error_message}" if r.is_error else str(r.value)
        for m in out
        if (r := m.action_result) is not None
    ]


async def ask_for(ctx: sw.Context, model: str, tool: str, options: list[Any]) -> str:
    """Have a scripted model named ``model`` call ``tool`` (one of
    ``options``) once in the run of ``ctx``; the text of that call's result."""
    llm: Any = ScriptedLLM([[call(tool)]], name=model)
    out = await ctx.call(llm, observations=[sw.Message.user("go")], options=options)
    [text] = result_texts(out)
    return text
