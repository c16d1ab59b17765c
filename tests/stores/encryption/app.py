"""The policies the encryption tests run: every kind of recorded value,
each holding a marker no database file or table may show in plain text."""

from __future__ import annotations

import base64

import stalwart as sw

MARK = "PLAINTEXT-MARKER-7f3a"
KEY_1 = ("k1", b"\x11" * 32)
KEY_2 = ("k2", b"\x22" * 32)


def keys_text(*keys: tuple[str, bytes]) -> str:
    """Keys as STALWART_KEYS holds them."""
    return ",".join(f"{kid}:{base64.b64encode(key).decode()}" for kid, key in keys)


@sw.policy
async def shout(text: str) -> str:
    return text.upper()


@sw.policy
async def loud(text: str) -> str:
    return await shout(text) + "!"


@sw.policy
async def listener(ctx: sw.Context) -> str:
    mail = await ctx.receive(timeout=60)
    return f"heard {mail.payload}"


@sw.policy
async def everything(ctx: sw.Context, secret: str) -> dict[str, str]:
    """A step, a large (spilled) value, memory, mail and a signal, all marked."""
    loud = await shout(secret)
    big = await shout(secret * 2000)  # past SPILL_BYTES: kept out of the hot row
    await ctx.memory.put(("notes",), "secret", {"note": secret})
    await ctx.send(f"{ctx.run_id}-listener", f"mail {secret}")
    answer = await ctx.wait_for("answer", timeout=60)
    return {"loud": loud, "big": str(len(big)), "answer": str(answer), "secret": secret}


@sw.policy
async def waiter(ctx: sw.Context, secret: str) -> str:
    """Records its input and a step, then waits for a signal: a run that
    resumes by replaying what it recorded."""
    loud = await shout(secret)
    answer = await ctx.wait_for("go", timeout=120)
    return f"{loud} {answer}"


POLICIES = [shout, loud, listener, everything, waiter]
