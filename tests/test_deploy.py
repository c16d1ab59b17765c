"""The deploy gate (`stalwart.deploy.check_deploy`): the runs in a store
replayed against new code, executing nothing. An unfinished run the new code
would fail to resume blocks the deploy; a change guarded by `ctx.patched`
does not; a finished run that replays differently is reported without
blocking unless asked. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.cli.conftest import run_cli

import stalwart as sw
from stalwart.deploy import DeployReport, check_deploy
from stalwart.llm import Agent
from stalwart.testing import ScriptedLLM, call

ROOT = Path(__file__).resolve().parents[1]
EXECUTED: list[str] = []


@sw.policy(name="lookup")
async def lookup(ctx: sw.Context, order: str) -> dict[str, Any]:
    EXECUTED.append(order)
    return {"order": order, "amount": 120}


@sw.policy(name="lookup")
async def lookup_in(ctx: sw.Context, order: str, currency: str = "EUR") -> dict[str, Any]:
    EXECUTED.append(order)
    return {"order": order, "amount": 120}


@sw.policy(name="notify")
async def notify(ctx: sw.Context, order: str) -> str:
    return f"told {order}"


@sw.policy(name="refund")
async def refund(ctx: sw.Context, order: str) -> str:
    info = await lookup(order=order)
    await notify(order=order)
    approved = await ctx.wait_for("approve", prompt=f"refund {info['amount']}?")
    return "refunded" if approved else "kept"


@sw.policy(name="refund")
async def refund_in_usd(ctx: sw.Context, order: str) -> str:
    info = await lookup_in(order=order, currency="USD")
    await notify(order=order)
    approved = await ctx.wait_for("approve", prompt=f"refund {info['amount']}?")
    return "refunded" if approved else "kept"


@sw.policy(name="refund")
async def refund_patched(ctx: sw.Context, order: str) -> str:
    if await ctx.patched("usd"):
        info = await lookup_in(order=order, currency="USD")
    else:
        info = await lookup(order=order)
    await notify(order=order)
    approved = await ctx.wait_for("approve", prompt=f"refund {info['amount']}?")
    return "refunded" if approved else "kept"


@sw.policy(name="refund")
async def refund_notify_first(ctx: sw.Context, order: str) -> str:
    await notify(order=order)
    info = await lookup(order=order)
    approved = await ctx.wait_for("approve", prompt=f"refund {info['amount']}?")
    return "refunded" if approved else "kept"


async def settle(runner: sw.Runner, ids: list[str]) -> None:
    async with asyncio.timeout(30):
        while True:
            runs = {r.id: r.status for r in await runner.list_runs()}
            if all(runs.get(i) in ("suspended", "succeeded", "failed") for i in ids):
                return
            await asyncio.sleep(0.02)


async def seed(url: str) -> None:
    """Two refunds waiting for approval, one approved and finished."""
    async with sw.Runner(url, policies=[refund, lookup, notify]) as runner:
        for i in range(3):
            await runner.start(refund, order=f"A-{i}", run_id=f"refund-{i}")
        await settle(runner, ["refund-0", "refund-1", "refund-2"])
        await runner.signal("refund-0", "approve", True)
        assert await runner.outcome("refund-0") == "refunded"


def verdicts(report: DeployReport) -> dict[str, tuple[str, bool]]:
    return {r.run_id: (r.verdict, r.blocks(report.strict)) for r in report.runs}


async def test_the_code_that_made_the_runs_is_compatible_with_all_of_them(
    store_url: str,
) -> None:
    await seed(store_url)
    EXECUTED.clear()
    report = await check_deploy(store_url, [refund, lookup, notify])
    assert report.ok
    assert verdicts(report) == {
        "refund-1": ("compatible", False),
        "refund-2": ("compatible", False),
        "refund-0": ("compatible", False),
    }
    assert EXECUTED == []  # replayed: nothing ran


async def test_other_arguments_block_on_waiting_runs_and_name_the_step_and_both_calls(
    store_url: str,
) -> None:
    await seed(store_url)
    report = await check_deploy(store_url, [refund_in_usd, lookup_in, notify])
    assert not report.ok
    assert verdicts(report) == {
        "refund-1": ("diverges", True),
        "refund-2": ("diverges", True),
        "refund-0": ("diverges", False),  # finished: never resumed, so reported only
    }
    first = report.blocking[0]
    assert (first.run_id, first.step) == ("refund-1", "1")
    assert first.recorded == 'lookup({"order":"A-1"})'
    assert first.now == 'lookup({"order":"A-1","currency":"USD"})'
    assert "other arguments" in first.why and "ctx.patched" in first.fix
    assert "refund-1" in str(report) and "2 block the deploy" in str(report)
    strict = await check_deploy(store_url, [refund_in_usd, lookup_in, notify], strict=True)
    assert len(strict.blocking) == 3


async def test_a_change_guarded_by_a_patch_marker_is_compatible(store_url: str) -> None:
    await seed(store_url)
    report = await check_deploy(store_url, [refund_patched, lookup_in, notify])
    assert report.ok, str(report)
    assert {r.verdict for r in report.runs} == {"compatible"}


async def test_two_steps_in_another_order_diverge_at_the_first(store_url: str) -> None:
    await seed(store_url)
    report = await check_deploy(store_url, [refund_notify_first, lookup, notify], finished=0)
    assert [r.run_id for r in report.runs] == ["refund-1", "refund-2"]
    assert all(r.verdict == "diverges" and r.step == "1" for r in report.runs)
    assert "order" in report.runs[0].why or "another policy" in report.runs[0].why


async def test_a_run_whose_policy_the_new_code_lacks_blocks(store_url: str) -> None:
    await seed(store_url)
    report = await check_deploy(store_url, [lookup, notify])
    assert [(r.run_id, r.verdict) for r in report.blocking] == [
        ("refund-1", "no-policy"),
        ("refund-2", "no-policy"),
    ]
    assert "no policy named 'refund'" in report.blocking[0].why


async def test_a_pending_run_with_nothing_recorded_is_compatible(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as runner:
        await runner.enqueue(refund, order="B-1", run_id="queued")
    report = await check_deploy(store_url, [refund_in_usd, lookup_in, notify])
    assert verdicts(report) == {"queued": ("compatible", False)}


@sw.policy(name="approve_refund")
async def approve_refund(ctx: sw.Context, order: str) -> str:
    """Ask a person to approve a refund.

    Args:
        order: The order to refund.
    """
    approved = await ctx.wait_for("approve", prompt=f"refund {order}?")
    return "approved" if approved else "refused"


def clerk(instructions: str) -> Agent:
    model = ScriptedLLM(
        [[call("approve_refund", order="A-1")], [sw.Message.assistant("Done.")]], name="model"
    )
    return Agent(model, instructions=instructions, tools=[approve_refund], name="clerk")


async def test_an_agent_waiting_in_its_loop_diverges_when_its_instructions_change(
    store_url: str,
) -> None:
    before = clerk("You approve refunds.")
    async with sw.Runner(store_url, policies=[before, approve_refund]) as runner:
        await runner.start(before, question="refund A-1?", run_id="clerk-1")
        await settle(runner, ["clerk-1"])
    assert (await check_deploy(store_url, [clerk("You approve refunds."), approve_refund])).ok
    changed = clerk("You approve refunds under 100 EUR.")
    report = await check_deploy(store_url, [changed, approve_refund])
    [run] = report.runs
    assert (run.verdict, run.blocks()) == ("diverges", True)
    assert run.recorded is not None and "You approve refunds." in run.recorded
    assert run.now is not None and "under 100 EUR" in run.now


async def test_a_finished_agent_step_inside_a_run_replays_without_its_model(
    store_url: str,
) -> None:
    # The run recorded the agent's answer as one step: resuming it never
    # calls the agent's model again, so new instructions cannot diverge it.
    answer = [sw.Message.assistant("Refund approved.")]
    before = Agent(ScriptedLLM([answer], name="model"), instructions="Old.", name="helper")
    after = Agent(ScriptedLLM([answer], name="model"), instructions="New.", name="helper")

    @sw.policy(name="desk")
    async def desk(ctx: sw.Context, question: str) -> str:
        answer = await before(question=question)
        await ctx.wait_for("file")
        return str(answer)

    @sw.policy(name="desk")
    async def desk_after(ctx: sw.Context, question: str) -> str:
        answer = await after(question=question)
        await ctx.wait_for("file")
        return str(answer)

    async with sw.Runner(store_url, policies=[desk, before]) as runner:
        await runner.start(desk, question="refund A-1?", run_id="desk-1")
        await settle(runner, ["desk-1"])
    report = await check_deploy(store_url, [desk_after, after])
    assert verdicts(report) == {"desk-1": ("compatible", False)}


@sw.policy(name="inbox")
async def inbox(ctx: sw.Context) -> list[str]:
    """Reads two messages from its mailbox."""
    first = await ctx.receive()
    second = await ctx.receive()
    return [first.payload, second.payload]


@sw.policy(name="poster")
async def poster(ctx: sw.Context, to: str) -> None:
    await ctx.send(to, "hello")


@sw.policy(name="answer")
async def answer(question: str, history: list[sw.Message] | None = None) -> str:
    return f"{question} ({len(history or [])} before)"


async def test_runs_waiting_on_their_mailbox_are_compatible_with_the_code_that_made_them(
    store_url: str,
) -> None:
    # A conversation between turns waits on its mailbox, as any ctx.receive
    # does: the new code resumes it as it resumes a run waiting for a signal.
    policies = [inbox, poster, answer]
    async with sw.Runner(store_url, policies=policies, poll_interval=0.02) as runner:
        await runner.start(inbox, run_id="inbox-1")
        await runner.run(poster, to="inbox-1", run_id="poster-1")
        thread = sw.Conversation(runner, answer, "thread-1")
        turn = await thread.put("hi")
        assert await turn.result(timeout=10) == "hi (0 before)"
        await settle(runner, ["inbox-1", "thread-1"])
    report = await check_deploy(store_url, [*policies, thread.loop], finished=0)
    assert report.ok, str(report)
    assert verdicts(report)["inbox-1"] == ("compatible", False)
    assert verdicts(report)["thread-1"] == ("compatible", False)


@sw.policy(name="inbox")
async def inbox_that_tells_first(ctx: sw.Context) -> list[str]:
    await ctx.send("poster-1", "ready")
    first = await ctx.receive()
    second = await ctx.receive()
    return [first.payload, second.payload]


async def test_a_message_sent_where_the_run_recorded_none_blocks(store_url: str) -> None:
    policies = [inbox, poster]
    async with sw.Runner(store_url, policies=policies, poll_interval=0.02) as runner:
        await runner.start(inbox, run_id="inbox-1")
        await runner.run(poster, to="inbox-1", run_id="poster-1")
        await settle(runner, ["inbox-1"])
    report = await check_deploy(store_url, [inbox_that_tells_first, poster], finished=0)
    [run] = report.blocking
    assert (run.run_id, run.verdict, run.step) == ("inbox-1", "diverges", "1")


def test_a_negative_sample_is_refused() -> None:
    with pytest.raises(ValueError, match="finished must be 0 or more"):
        asyncio.run(check_deploy("sqlite:///:memory:", [refund], finished=-1))


def test_the_example_blocks_the_breaking_version_and_clears_the_patched_one(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "deploy_gate.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "v2: 3 runs checked: 0 compatible, 3 diverge" in done.stdout
    assert "2 block the deploy" in done.stdout
    assert "v3: 3 runs checked: 3 compatible" in done.stdout
    assert "nothing blocks the deploy" in done.stdout


def test_the_rolling_deploy_example_keeps_each_order_on_code_that_continues_it(
    tmp_path: Path,
) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import rolling_deploy  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(ROOT / "examples"))
    seen = asyncio.run(rolling_deploy.main(f"sqlite:///{tmp_path}/orders.db"))
    assert seen["gate"] == {
        "small": ("compatible", "v2"),
        "large": ("diverges", None),
        "larger": ("diverges", None),
    }
    assert seen["new version"] == "v2"
    assert (seen["new"], seen["large"], seen["small"]) == ("v2 7 yes", "v1 500 yes", "v2 10 yes")
    assert "served only by retired version v1" in seen["stranded"]


APP_V1 = """
import stalwart as sw

@sw.policy
async def lookup(ctx: sw.Context, order: str) -> dict:
    return {"order": order}

@sw.policy
async def refund(ctx: sw.Context, order: str) -> str:
    await lookup(order=order)
    await ctx.wait_for("approve")
    return "refunded"
"""


def test_the_command_exits_1_when_a_waiting_run_would_break_and_prints_json(
    tmp_path: Path,
) -> None:
    (tmp_path / "shop_v1.py").write_text(APP_V1)
    (tmp_path / "shop_v2.py").write_text(APP_V1.replace("lookup(order=order)", "lookup(order)"))
    (tmp_path / "shop_v3.py").write_text(APP_V1.replace("def refund", "def refund_all"))
    url = f"sqlite:///{tmp_path / 'shop.db'}"

    async def start() -> None:
        sys.path.insert(0, str(tmp_path))
        try:
            import shop_v1  # type: ignore[import-not-found]
        finally:
            sys.path.remove(str(tmp_path))
        async with sw.Runner(url, policies=[shop_v1.refund, shop_v1.lookup]) as runner:
            await runner.start(shop_v1.refund, order="A-1", run_id="r-1")
            await settle(runner, ["r-1"])

    asyncio.run(start())

    def check(app: str, *more: str) -> subprocess.CompletedProcess[str]:
        return run_cli(tmp_path, "deploy", "check", "--app", app, "--store", url, *more)

    same = check("shop_v1.py")
    assert same.returncode == 0, same.stderr
    assert "nothing blocks the deploy" in same.stdout
    moved = check("shop_v2.py", "--json")  # an argument now by position: recorded by name
    assert moved.returncode == 1, moved.stderr
    document = json.loads(moved.stdout)
    assert document["ok"] is False and document["counts"]["blocking"] == 1
    [run] = document["runs"]
    assert (run["run_id"], run["verdict"], run["blocks"]) == ("r-1", "diverges", True)
    gone = check("shop_v3.py")
    assert gone.returncode == 1
    assert "no policy named 'refund'" in gone.stdout


@sw.policy(name="refund")
async def refund_that_waits_outside_any_step(ctx: sw.Context, order: str) -> str:
    await asyncio.sleep(3600)  # not a step: a resume would sit here too
    info = await lookup(order=order)
    await notify(order=order)
    approved = await ctx.wait_for("approve", prompt=f"refund {info['amount']}?")
    return "refunded" if approved else "kept"


async def test_new_code_that_awaits_outside_any_step_is_reported_stuck_not_hung(
    store_url: str,
) -> None:
    await seed(store_url)
    report = await check_deploy(
        store_url, [refund_that_waits_outside_any_step, lookup, notify], finished=0, timeout=0.5
    )
    assert [(r.run_id, r.verdict, r.blocks()) for r in report.runs] == [
        ("refund-1", "stuck", True),
        ("refund-2", "stuck", True),
    ]
    assert "not a step" in report.runs[0].why
