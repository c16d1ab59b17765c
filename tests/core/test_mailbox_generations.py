"""Mailboxes and continue-as-new: each generation's messages are its own.

A message's delivery id derived from the sender's run
id, the step key and the recipient only used to collide: After continue-as-new the keys
count from 1 again, so a new generation's send at a key an earlier
generation had sent from got the earlier message's id: the store took it
for a resumed sender's repeat ("again"), kept nothing, and the send
returned as delivered. The message was lost without a word.

Real SQLite and PostgreSQL, a real runner.
"""

from __future__ import annotations

import stalwart as sw
from stalwart.core.mail import MAIL


@sw.policy
async def inbox(ctx: sw.Context) -> list[str]:
    """Reads two messages."""
    return [(await ctx.receive(timeout=10)).payload for _ in range(2)]


@sw.policy
async def announcer(ctx: sw.Context, generation: int = 1) -> str:
    """Sends one message per generation, each from its generation's first key."""
    await ctx.send("inbox", f"hello from generation {generation}")
    if generation == 1:
        await ctx.engine.mailbox.continue_as_new((), {"generation": 2})
    return "announced"


async def test_each_generation_of_a_run_delivers_its_own_messages(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[inbox, announcer], poll_interval=0.05) as runner:
        reader = await runner.start(inbox, run_id="inbox")
        sender = await runner.start(announcer, run_id="announcer")
        assert await sender.result(timeout=30) == "announced"
        assert await reader.result(timeout=30) == [
            "hello from generation 1",
            "hello from generation 2",
        ]
        # Two messages kept, under two delivery ids; each send recorded its own.
        dump = await runner.store.export_run("inbox")
        assert dump is not None
        mail = [s for s in dump.signals if s.name == MAIL]
        assert len({s.uid for s in mail}) == len(mail) == 2


def test_a_forged_mail_row_nested_past_the_parser_depth_matches_nothing() -> None:
    """A row edited by hand to nest deeper than ``json`` can parse is not an
    envelope: it matches no filter and is no wait for mail, never a crash."""
    from stalwart.core.mail import MAIL, mail_filter, mail_matches

    deep = "[" * 200_000 + "]" * 200_000
    assert mail_matches(deep, "alice", None) is False
    assert mail_filter(MAIL + "?" + deep) is None


@sw.policy
async def tenfold(n: int) -> int:
    return n * 10


@sw.policy
async def spawner(ctx: sw.Context, generation: int = 1) -> list[int]:
    """Spawns one child per generation, each from its generation's first key."""
    child = await ctx.spawn(tenfold, generation)
    got = await child.result()
    if generation == 1:
        await ctx.engine.mailbox.continue_as_new((), {"generation": 2})
    return [got]


async def test_each_generation_of_a_run_spawns_its_own_child_runs(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[spawner, tenfold], poll_interval=0.05) as runner:
        assert await runner.run(spawner, run_id="spawner") == [20]
