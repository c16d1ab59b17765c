"""Human in the loop: a draft is published only once a person approves it.

`WriteDraft` drafts (taking the reviewer's last feedback into account),
`HumanReview` waits for the reviewer's decision, "approved" goes to `Publish`
and "revise" back to `WriteDraft`. The wait is durable: inside a run,
`HumanReview` asks through ``current_context().wait_for("review")``, which
*suspends* the run. Nothing stays in memory while the reviewer thinks; the
process may even stop. When the decision arrives as a signal, any runner on
the same store resumes the run by replay, without redrafting what was done.

The demo below plays the reviewer: it rejects the first draft with feedback,
then approves, each time from a fresh runner, as if from another process.

    python examples/pocketflow/approval.py --db approval.db
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import stalwart as sw
from stalwart.core.policy import current_context
from stalwart.flow import AsyncFlow, AsyncNode


@sw.policy
async def draft_model(topic: str, feedback: list[str]) -> str:
    """An offline stand-in for a writing model.

    Args:
        topic: What to announce.
        feedback: The reviewer's remarks on earlier drafts.
    """
    text = f"We are thrilled to announce {topic}! It is fast, durable and fun to use."
    if any("shorter" in f.lower() for f in feedback):
        text = f"Announcing {topic}: fast and durable."
    if any("date" in f.lower() for f in feedback):
        text += " Available from Monday."
    return text


class WriteDraft(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> tuple[str, list[str]]:
        return shared["topic"], [r["feedback"] for r in shared["reviews"] if r.get("feedback")]

    async def exec_async(self, inputs: tuple[str, list[str]]) -> str:
        topic, feedback = inputs
        return await draft_model(topic=topic, feedback=feedback)

    async def post_async(self, shared: dict[str, Any], prep_res: Any, draft: str) -> None:
        shared["drafts"].append(draft)


class HumanReview(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> str:
        return str(shared["drafts"][-1])

    async def exec_async(self, draft: str) -> dict[str, Any]:
        ctx = current_context()
        if ctx is None:  # run as a plain PocketFlow program: ask on the terminal
            answer = await asyncio.to_thread(input, f"{draft}\nApprove? [y/N or feedback] ")
            approved = answer.strip().lower() in ("y", "yes")
            return {"approved": approved, "feedback": "" if approved else answer}
        ctx.emit({"review": draft})  # shown to whoever streams the run
        decision: dict[str, Any] = await ctx.wait_for("review")  # suspends the run
        return decision

    async def post_async(self, shared: dict[str, Any], draft: str, decision: Any) -> str:
        shared["reviews"].append({"draft": draft, **decision})
        return "approved" if decision.get("approved") else "revise"


class Publish(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> str:
        return str(shared["drafts"][-1])

    async def post_async(self, shared: dict[str, Any], draft: str, exec_res: Any) -> None:
        shared["published"] = draft


def approval_flow() -> AsyncFlow:
    write, review, publish = WriteDraft(), HumanReview(), Publish()
    write >> review
    review - "approved" >> publish
    review - "revise" >> write
    flow = AsyncFlow(start=write)
    flow.name = "announcement_approval"  # type: ignore[attr-defined]
    return flow


RUN_ID = "announcement-1"


async def until_waiting(runner: sw.Runner, run_id: str) -> str:
    """Wait until the run waits for the reviewer (or ends); return its status."""
    async with asyncio.timeout(30):
        while True:
            status = (await runner.get_run(run_id)).status
            if status in ("suspended", "succeeded", "failed"):
                return status
            await asyncio.sleep(0.02)


async def demo(db: Path) -> dict[str, Any]:
    url = f"sqlite:///{db}"
    flow = approval_flow()
    async with sw.Runner(url) as runner:  # the author starts the run
        shared = {"topic": "Stalwart 1.0", "drafts": [], "reviews": []}
        await runner.start(flow, shared=shared, run_id=RUN_ID)
        print("run:", await until_waiting(runner, RUN_ID), "(waiting for the reviewer)")

    reviews = [
        {"approved": False, "feedback": "Make it shorter, and give a date."},
        {"approved": True},
    ]
    for decision in reviews:
        # A reviewer, later and elsewhere: a fresh runner that knows the flow.
        # serving=True: this runner resumes runs it did not start (the flow).
        async with sw.Runner(url, policies=[flow], poll_interval=0.02, serving=True) as runner:
            print("reviewer:", decision)
            await runner.signal(RUN_ID, "review", decision)  # the run resumes by replay
            print("run:", await until_waiting(runner, RUN_ID))
    async with sw.Runner(url) as runner:  # anyone can read the outcome
        result: dict[str, Any] = await sw.RunHandle(runner, RUN_ID).result()
    for i, draft in enumerate(result["drafts"], 1):
        print(f"draft {i}: {draft}")
    print(f"published: {result['published']}")
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="A durable human approval step.")
    parser.add_argument("--db", default=None, help="SQLite file (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.db:
        return asyncio.run(demo(Path(args.db)))
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(demo(Path(tmp) / "approval.db"))


if __name__ == "__main__":
    main()
