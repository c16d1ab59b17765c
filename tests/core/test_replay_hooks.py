"""Hooks that watch replays (a tracer marks a recorded step replayed): with
such a hook installed, a resumed run still gets each recorded step's value,
or its recorded error, without executing it, and the hook is told of each,
with the call as the policy made it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import stalwart as sw

RAN: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    RAN.clear()


class Watcher(sw.Hook):
    def __init__(self) -> None:
        self.replayed: list[tuple[str, str, dict[str, Any], str | None]] = []

    async def on_replayed(self, call: sw.CallInfo, error: BaseException | None) -> None:
        shown = None if error is None else f"{type(error).__name__}: {error}"
        self.replayed.append((call.key, call.name, call.arguments, shown))


@sw.policy
async def triple(x: int, *, label: str) -> str:
    RAN.append(f"triple {x}")
    if x < 0:
        raise ValueError(f"negative {x}")
    return f"{label} {3 * x}"


@sw.policy
async def watched(ctx: sw.Context) -> str:
    first = await triple(2, label="a")
    try:
        await triple(-1, label="b")
    except ValueError as exc:
        second = str(exc)
    got = await ctx.wait_for("go")
    return f"{first} / {second} / {got}"


async def test_a_resumed_run_replays_values_and_errors_to_a_watching_hook(
    sqlite_url: str,
) -> None:
    watcher = Watcher()
    async with sw.Runner(
        sqlite_url, poll_interval=0.02, hooks=[watcher], policies=[watched]
    ) as runner:
        handle = await runner.start(watched, run_id="w")
        while (await runner.get_run("w")).status != "suspended":
            await asyncio.sleep(0.01)
        assert watcher.replayed == []  # nothing replayed yet: both ran live
        await runner.signal("w", "go", "on")
        assert await handle.result(timeout=10) == "a 6 / negative -1 / on"
    assert RAN == ["triple 2", "triple -1"]  # the resumed execution ran neither again
    assert watcher.replayed == [
        ("1", triple.name, {"*": [2], "label": "a"}, None),
        ("2", triple.name, {"*": [-1], "label": "b"}, "ValueError: negative -1"),
    ]
