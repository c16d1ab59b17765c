"""Durable conversations: killed between and during turns, and bounded for ever.

A real process holds a three-turn conversation on a real SQLite file (and
PostgreSQL); the parent kills it with SIGKILL after the first reply (between
turns) and again while the agent answers the second (during a turn). A fresh
process resends the same messages (same message ids) and gets every reply
once, each built on the history the ledger kept. Then a thread of 1,000 turns
continues as new every 20 turns: its live ledger, and what is left after
pruning the finished generations and turns, stays bounded.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.crash import kill, spawn, wait_for_line

import stalwart as sw
from stalwart.conversations import REPLY, TURN

APP = str(Path(__file__).with_name("chat_app.py"))
QUESTIONS = ["q1", "q2", "q3"]


def _spawn(url: str, workdir: Path, *extra: str) -> subprocess.Popen[str]:
    return spawn(APP, url, workdir, *QUESTIONS, *extra)


def _kill(proc: subprocess.Popen[str]) -> None:
    kill(proc)
    assert proc.returncode == -signal.SIGKILL


def test_a_conversation_killed_between_and_during_turns_loses_and_repeats_nothing(
    store_url: str, tmp_path: Path
) -> None:
    first = _spawn(store_url, tmp_path, "--hold-after", "1")
    wait_for_line(first, "reply m1")
    _kill(first)  # between turns: the thread waits for the next message

    (tmp_path / "hold-q2").touch()
    second = _spawn(store_url, tmp_path)
    wait_for_line(second, "serving q2")
    _kill(second)  # during the second turn, the agent's answer unrecorded
    (tmp_path / "hold-q2").unlink()

    third = _spawn(store_url, tmp_path)
    out, err = third.communicate(timeout=120)
    assert third.returncode == 0, err
    replies = [line for line in out.splitlines() if line.startswith("reply ")]
    assert replies == [
        "reply m1 q1 after nothing",  # answered once, read back: not asked again
        "reply m2 q2 after q1",
        "reply m3 q3 after q1,q2",
    ]
    served = [line.split()[1] for line in (tmp_path / "served.txt").read_text().splitlines()]
    # q1 ran once; q2 twice (killed in flight, S3: at least once, one result); q3 once.
    assert served == ["q1", "q2", "q2", "q3"]

    async def sends() -> list[str]:
        async with sw.Runner(store_url) as runner:
            steps = await runner.steps("chat")
            return [s.args or "" for s in steps if s.name == "stalwart.send"]

    # One reply per turn in the thread's ledger: none answered twice.
    assert len(asyncio.run(sends())) == 3


@sw.policy
async def echo(question: str, history: list[sw.Message] | None = None) -> str:
    return f"{question} ({len(history or [])} before)"


@sw.policy
async def user(ctx: sw.Context, thread: str, n: int) -> list[str]:
    """Puts ``n`` turns in the thread's mailbox, then reads the n replies."""
    for i in range(n):
        await ctx.send(thread, f"q{i}", kind=TURN)
    return [(await ctx.receive(sender=thread, kind=REPLY)).payload["reply"] for _ in range(n)]


@pytest.mark.slow
def test_continue_as_new_keeps_a_thread_of_1000_turns_bounded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}?synchronous=OFF"
    turns, per_run, carry = 1000, 20, 4

    async def main() -> None:
        async with sw.Runner(url, policies=[user], poll_interval=0.02) as runner:
            thread = sw.Conversation(runner, echo, "long", max_turns=per_run, carry_last=carry)
            await thread.open()
            replies = await runner.run(user, "long", turns, run_id="user")
            assert replies[0] == "q0 (0 before)"
            assert replies[-1] == f"q{turns - 1} ({carry + 2 * (per_run - 1)} before)"
            db = runner.store.db  # type: ignore[attr-defined]
            generations = [r for r in await runner.list_runs(limit=2000, id_contains="long~")]
            assert len(generations) == turns // per_run
            # Every generation holds at most its own turns: 4 records a turn, and
            # the record that opens it.
            rows = dict(db.execute("SELECT run_id, count(*) FROM steps GROUP BY run_id"))
            assert max(rows[g.id] for g in generations) <= 4 * per_run + 1
            assert rows.get("long", 0) <= 4 * per_run + 1
            # What the live run carries into each generation is bounded too.
            (inputs,) = db.execute("SELECT inputs FROM runs WHERE id = 'long'").fetchone()
            assert len(inputs) < 2_000
            # The finished generations go with pruning; the thread lives on.
            await runner.prune(keep=1)  # the user run
            (left,) = db.execute(
                "SELECT coalesce(sum(length(coalesce(args,'')) + length(coalesce(output,''))), 0) "
                "FROM steps WHERE run_id LIKE 'long%'"
            ).fetchone()
            assert left < 20_000, left
            # Between turns it waits for the next (suspended): just after its
            # last reply it may still be on its way to that receive.
            async with asyncio.timeout(10):
                while (await runner.get_run("long")).status != "suspended":
                    await asyncio.sleep(0.01)
            assert await thread.send("still there?") == f"still there? ({carry} before)"

    asyncio.run(main())


def test_the_negotiation_example_runs_offline(sqlite_url: str) -> None:
    root = Path(__file__).parents[2]
    store = sqlite_url
    run = [sys.executable, "examples/negotiation.py", "--store", store]
    first = subprocess.run(run, capture_output=True, text=True, timeout=60, cwd=root)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[:2] == [
        "seller: {'sold_at': 100.0}",
        "buyer: {'bought_at': 100.0, 'rounds': 16}",
    ]
    # Run again on the same file: both runs are finished, read back, not replayed.
    again = subprocess.run(run, capture_output=True, text=True, timeout=60, cwd=root)
    assert again.stdout == first.stdout
