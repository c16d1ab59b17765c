"""What the ledger holds for a refused exclusive call, and what it does not.

A lock refusal (``ExclusiveReentry``, ``ExclusiveDeadlock``) is recorded at
the key the call has, holding the very result the model read, so a resumed
run answers with it (S2). A call that is not refused writes nothing more,
and a duplicate call id, read from the recorded reply itself, is not
recorded. Real SQLite files, a real runner.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import stalwart as sw
from stalwart import Message
from stalwart.core import codec
from stalwart.testing import ScriptedLLM, call


def _texts(out: list[Message]) -> list[str]:
    return [
        f"{r.error_type}: {r.error_message}" if r.is_error else str(r.value)
        for m in out
        if (r := m.action_result) is not None
    ]


@sw.policy(exclusive=True)
async def el_delegate(ctx: sw.Context, depth: int = 0) -> list[str]:
    """Holds its own lock; asks for itself once more."""
    if depth:
        return ["inner ran"]
    llm: Any = ScriptedLLM([[call("el_delegate", depth=1)]], name="el_delegate_model")
    out = await ctx.call(llm, observations=[Message.user("go")], options=[el_delegate])
    return _texts(out)


@sw.policy(exclusive="pen")
async def el_write(text: str) -> str:
    """Writes with the pen.

    Args:
        text: What to write.
    """
    return f"wrote {text}"


@sw.policy
async def el_reenter(ctx: sw.Context) -> list[Message]:
    llm: Any = ScriptedLLM([[call("el_delegate")]], name="el_reenter_model")
    out: list[Message] = await ctx.call(
        llm, observations=[Message.user("go")], options=[el_delegate]
    )
    return out


@sw.policy
async def el_plain(ctx: sw.Context) -> list[str]:
    llm: Any = ScriptedLLM(
        [
            [
                call("el_write", text="a"),
                call("el_write", text="b"),
                call("el_write", "x", text="c"),
                call("el_write", "x", text="d"),
            ]
        ],
        name="el_plain_model",
    )
    out = await ctx.call(llm, observations=[Message.user("go")], options=[el_write])
    return _texts(out)


async def test_a_reentry_refusal_is_recorded_at_the_calls_key(tmp_path: Path) -> None:
    async with sw.Runner(f"sqlite:///{tmp_path / 'r.db'}") as runner:
        out = await (await runner.start(el_reenter, run_id="re")).result(30)
        steps = {s.key: s for s in await runner.steps("re")}
    [outer] = [m.action_result for m in out if m.action_result is not None]
    [text] = outer.value
    assert text.startswith("ExclusiveReentry: 'el_delegate' is exclusive (its own lock)")
    [refusal] = [s for s in steps.values() if s.name == "stalwart.refused:el_delegate"]
    # The inner call's own key (the outer call 1#1, its model 1#1.1, its call #1).
    assert refusal.key == "1#1.1#1"
    assert refusal.error is None
    recorded = codec.loads(refusal.output or "null")
    assert isinstance(recorded, Message) and recorded.action_result is not None
    assert f"{recorded.action_result.error_type}: {recorded.action_result.error_message}" == text


async def test_calls_not_refused_and_duplicate_ids_record_no_refusal(tmp_path: Path) -> None:
    async with sw.Runner(f"sqlite:///{tmp_path / 'p.db'}") as runner:
        texts = await (await runner.start(el_plain, run_id="p")).result(30)
        names = [s.name for s in await runner.steps("p")]
    assert texts[:3] == ["wrote a", "wrote b", "wrote c"]
    assert texts[3].startswith("DuplicateCallId: call id 'x' of 'el_write' (step 1#4)")
    assert not [n for n in names if n.startswith("stalwart.refused")], names
    assert names.count("el_write") == 3
