"""A durable wait that timed out is a recorded outcome: when the run resumes
by replay, the same ``ctx.wait_for`` raises the same ``TimeoutError`` again,
so the policy goes down the branch it took live (S4, S5)."""

from __future__ import annotations

import asyncio

import stalwart as sw

TIMEOUTS: list[str] = []  # each TimeoutError the policy caught, live and on replay


@sw.policy
async def approve_or_escalate(ctx: sw.Context) -> str:
    try:
        verdict = await ctx.wait_for("approve", timeout=0.05)
    except TimeoutError as exc:
        TIMEOUTS.append(str(exc))
        verdict = "escalated"
    await ctx.wait_for("go")  # the run suspends here and resumes by replay
    return str(verdict)


async def test_a_wait_that_timed_out_times_out_again_on_replay(sqlite_url: str) -> None:
    TIMEOUTS.clear()
    async with sw.Runner(sqlite_url, poll_interval=0.02, policies=[approve_or_escalate]) as r:
        handle = await r.start(approve_or_escalate, run_id="late")
        async with asyncio.timeout(10):
            while (await r.get_run("late")).waiting_for != "go":
                await asyncio.sleep(0.01)
        await r.signal("late", "approve", "approved")  # too late: the wait is over
        await r.signal("late", "go", None)
        assert await handle.result(timeout=10) == "escalated"
        steps = {s.key: s for s in await r.steps("late")}
    assert TIMEOUTS == ["no signal 'approve' within 0.05 s"] * 2  # live, then replayed
    timed_out = [s for s in steps.values() if s.name == "stalwart.signal:approve"]
    assert len(timed_out) == 1 and timed_out[0].output is None
    # Recorded once, at the moment it timed out: it starts and ends then.
    assert timed_out[0].attempts == 1
    assert timed_out[0].started_at == timed_out[0].finished_at > 0
    assert '"builtins.TimeoutError"' in (timed_out[0].error or "")
