"""Mailboxes between runs: ``ctx.send`` / ``ctx.receive`` on SQLite and PostgreSQL.

Two agents in two processes exchange messages while one of them is killed
with SIGKILL right after a delivery and before it is recorded; receive with
filters and timeouts; a send to a run that does not exist fails the step,
naming run and step; a message is stored once however often it is delivered.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from tests.crash import spawn

import stalwart as sw
from stalwart.core.errors import RunNotFound
from stalwart.core.mail import MAIL, envelope, mail_wakes

APP = str(Path(__file__).with_name("agents_app.py"))


def _spawn(url: str, who: str, n: int, *extra: str) -> subprocess.Popen[str]:
    return spawn(APP, url, who, n, *extra)


def _result(out: str) -> list[int]:
    return next(json.loads(line[7:]) for line in out.splitlines() if line.startswith("result "))


async def _exists(url: str, run_id: str) -> None:
    async with sw.Runner(url) as runner:
        for _ in range(1000):
            if await runner.store.get_run(run_id) is not None:
                return
            await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id!r} never started")


def test_two_agents_exchange_messages_across_a_sigkill_of_one(store_url: str) -> None:
    n = 6
    bob = _spawn(store_url, "bob", n, "--die-after-deliver", "3")
    asyncio.run(_exists(store_url, "bob"))  # alice sends to a run that exists
    alice = _spawn(store_url, "alice", n)
    _, err = bob.communicate(timeout=60)
    assert bob.returncode == -9, err  # killed itself after its third delivery, unrecorded
    again = _spawn(store_url, "bob", n)
    bob_out, bob_err = again.communicate(timeout=120)
    alice_out, alice_err = alice.communicate(timeout=120)
    assert again.returncode == 0, bob_err
    assert alice.returncode == 0, alice_err
    assert _result(bob_out) == list(range(1, n + 1))  # no offer lost or read twice
    assert _result(alice_out) == [10 * i for i in range(1, n + 1)]  # no answer lost or doubled

    async def mailboxes() -> dict[str, int]:
        async with sw.Runner(store_url) as runner:
            counts = {}
            for run_id in ("alice", "bob"):
                dump = await runner.store.export_run(run_id)
                assert dump is not None
                counts[run_id] = sum(1 for s in dump.signals if s.name == MAIL)
            return counts

    # Each message is stored once: the redelivery after the kill was kept once.
    assert asyncio.run(mailboxes()) == {"alice": n, "bob": n}


@sw.policy
async def listener(ctx: sw.Context) -> list[object]:
    seen: list[object] = []
    urgent = await ctx.receive(kind="urgent")  # skips the older chat message
    seen.append([urgent.payload, urgent.kind, urgent.sender])
    from_boss = await ctx.receive(sender="boss")
    seen.append(from_boss.payload)
    chat = await ctx.receive()
    seen.append(chat.payload)
    try:
        await ctx.receive(timeout=0.05, kind="never")
    except TimeoutError as exc:
        seen.append(str(exc))
    try:
        await ctx.send("nobody-here", {"hello": 1})
    except RunNotFound as exc:
        seen.append(str(exc))
    return seen


@sw.policy
async def boss(ctx: sw.Context, to: str) -> str:
    await ctx.send(to, "chat first", kind="chat")
    await ctx.send(to, "do it now", kind="urgent")
    return await ctx.send(to, {"raise": 5})


def test_receive_filters_timeouts_and_an_unknown_recipient(store_url: str) -> None:
    async def main() -> list[object]:
        async with sw.Runner(store_url, policies=[listener, boss], poll_interval=0.02) as runner:
            waiting = await runner.start(listener, run_id="listener")
            while (await runner.get_run("listener")).status != "suspended":
                await asyncio.sleep(0.01)  # it waits holding nothing (S7)
            uid = await runner.run(boss, "listener", run_id="boss")
            assert uid.startswith("mail:")
            result: list[object] = await waiting.result(timeout=20)
            steps = {s.key: s for s in await runner.steps("listener")}
            assert steps["2"].name == "stalwart.receive"  # recorded: replay returns it
            return result

    seen = asyncio.run(main())
    assert seen[0] == ["do it now", "urgent", "boss"]
    assert seen[1] == "chat first"  # the oldest message from boss, the urgent one taken
    assert seen[2] == {"raise": 5}
    assert seen[3] == "run 'listener', step 8: no message of kind 'never' within 0.05 s"
    assert seen[4] == "run 'listener', step 9: no run 'nobody-here' to send to"


def test_a_delivery_is_kept_once_per_id(store_url: str) -> None:
    @sw.policy
    async def inbox(ctx: sw.Context) -> object:
        return (await ctx.receive()).payload

    async def main() -> list[str]:
        async with sw.Runner(store_url, policies=[inbox], poll_interval=0.02) as runner:
            await runner.start(inbox, run_id="inbox")
            env = envelope("mail:x", "someone", "message", 1.0, '"hi"')
            wakes = mail_wakes("someone", "message")
            first = await runner.store.deliver_mail("inbox", env, "mail:x", wakes)
            second = await runner.store.deliver_mail("inbox", env, "mail:x", wakes)
            missing = await runner.store.deliver_mail("nobody", env, "mail:y", wakes)
            assert await runner.outcome("inbox") == "hi"
            finished = await runner.store.deliver_mail("inbox", env, "mail:z", wakes)
            return [first, second, missing, finished]

    assert asyncio.run(main()) == ["sent", "again", "missing", "finished"]


def test_in_memory_a_live_run_receives(tmp_path: Path) -> None:
    async def main() -> list[object]:
        runner = sw.Runner()
        waiting = await runner.start(listener, run_id="listener")
        await runner.run(boss, "listener", run_id="boss")
        out: list[object] = await waiting.result(timeout=5)
        return out

    seen = asyncio.run(main())
    assert seen[:3] == [["do it now", "urgent", "boss"], "chat first", {"raise": 5}]
    assert "no run 'nobody-here' executing in this runner" in str(seen[4])


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
