"""A step failing with an exception class the ledger cannot rebuild (not
declared with ``stalwart.register_type``) raises, live, the same StepError a
replay of it raises (S2, S4): its caller sees one thing whether the step ran
or was replayed, and a warning says once which class to declare."""

from __future__ import annotations

import asyncio
import logging

import pytest

import stalwart as sw

RAN: list[str] = []
SEEN: list[str] = []  # what the caller caught, in each execution


@pytest.fixture(autouse=True)
def _reset() -> None:
    RAN.clear()
    SEEN.clear()


class QuotaExceeded(Exception):
    """Never declared: the ledger keeps its name and message only."""


@sw.policy
async def spend(n: int) -> int:
    RAN.append(f"spend {n}")
    raise QuotaExceeded(f"over quota by {n}")


@sw.policy
async def budget(ctx: sw.Context) -> str:
    try:
        await spend(3)
    except Exception as exc:
        SEEN.append(f"{type(exc).__name__} {getattr(exc, 'error_type', '-')}: {exc}")
    return str(await ctx.wait_for("go"))


async def test_an_undeclared_error_is_seen_live_as_its_replay_raises_it(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="stalwart"):
        async with sw.Runner(sqlite_url, poll_interval=0.02, policies=[budget]) as runner:
            handle = await runner.start(budget, run_id="b")
            while (await runner.get_run("b")).status != "suspended":
                await asyncio.sleep(0.01)
            await runner.signal("b", "go", "on")
            assert await handle.result(timeout=10) == "on"
    # Live, then replayed in the resumed execution: the same error both times.
    assert SEEN == ["StepError QuotaExceeded: QuotaExceeded: over quota by 3"] * 2
    assert RAN == ["spend 3"]
    warned = [r.getMessage() for r in caplog.records if "is not declared" in r.getMessage()]
    assert len(warned) == 1
    assert f"{__name__}.QuotaExceeded is not declared" in warned[0]
    assert "raised as StepError" in warned[0]
    assert "stalwart.register_type(QuotaExceeded)" in warned[0]
