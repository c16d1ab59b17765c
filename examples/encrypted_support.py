"""Support conversations kept encrypted at rest, one customer erased on request.

    stalwart store keygen k1 > keys.txt
    STALWART_KEYS_FILE=keys.txt python examples/encrypted_support.py --store sqlite:///support.db

Every run is tagged with the customer it is for (``subject``), so its
values are sealed under that customer's own key. The database holds
ciphertext only. When a customer asks to be forgotten, erasing the subject
deletes its key: its runs still list and show, their values read
"erased", and a run of it that resumes fails naming the value it needed,
while every other customer's runs go on.
"""

from __future__ import annotations

import argparse
import asyncio

import stalwart as sw
from stalwart.stores import open_store
from stalwart.stores.encryption import EncryptedStore, erase_subject, keys_from_environment


@sw.policy
async def draft_reply(question: str) -> str:
    return f"Thanks for asking about {question.lower()}; here is how."


@sw.policy
async def ticket(ctx: sw.Context, customer: str, question: str) -> str:
    draft = await draft_reply(question)
    approved = await ctx.wait_for("approve", timeout=3600)
    return draft if approved else "escalated"


async def suspended(runner: sw.Runner, run_id: str) -> None:
    for _ in range(3000):
        if (await runner.get_run(run_id)).status == "suspended":
            return
        await asyncio.sleep(0.01)
    raise SystemExit(f"run {run_id} never waited for its approval")


async def main(url: str) -> None:
    provider = keys_from_environment()
    if provider is None:
        raise SystemExit("set STALWART_KEYS_FILE (stalwart store keygen k1 > keys.txt)")
    store = EncryptedStore(open_store(url, keys=False), provider)
    async with sw.Runner(store, policies=[ticket, draft_reply], serving=True) as runner:
        for customer, question in [("ada", "Ada's invoice"), ("bob", "Bob's refund")]:
            await runner.start(
                ticket, customer, question, run_id=f"t-{customer}", tags={"subject": customer}
            )
        for customer in ("ada", "bob"):  # each waits for its approval, holding nothing
            await suspended(runner, f"t-{customer}")

        erased = await erase_subject(store, "ada")  # Ada asked to be forgotten
        print(f"erased subject ada ({erased} key)")

        for customer in ("ada", "bob"):
            await runner.signal(f"t-{customer}", "approve", True)
        print("bob:", await runner.outcome("t-bob"))
        try:
            await runner.outcome("t-ada")
        except sw.ValueErased as exc:
            print("ada:", type(exc).__name__, "-", str(exc).split(": the value")[0])
        print("ada's inputs now read:", (await runner.get_run("t-ada")).inputs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="sqlite:///support.db")
    asyncio.run(main(parser.parse_args().store))
