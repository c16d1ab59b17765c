"""A writing workflow: outline, then one section per point, then polish.

Three steps, each a node asking a "model": `GenerateOutline` plans the
sections, `WriteSections` (an `AsyncBatchNode`) drafts them one after the
other, `PolishArticle` adds a title, an introduction and a conclusion. The
model is the `writer` policy, a heuristic that runs offline; under a durable
store every call is recorded and never paid for twice.

    python examples/pocketflow/writing.py "durable agents"
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart.flow import AsyncBatchNode, AsyncFlow, AsyncNode

ANGLES = ["what it is", "why it matters", "how to start"]


@sw.policy
async def writer(task: str, topic: str, section: str = "", draft: str = "") -> str:
    """An offline stand-in for a writing model.

    Args:
        task: "outline", "section" or "polish".
        topic: What the article is about.
        section: The section to write (task "section").
        draft: The sections written so far (task "polish").
    """
    if task == "outline":
        return "\n".join(f"- {topic.capitalize()}: {angle}" for angle in ANGLES)
    if task == "section":
        angle = section.split(": ", 1)[-1]
        return (
            f"{section}. Think of {topic} in terms of {angle}: start from one concrete "
            f"example, then widen it. Keep the example small enough to hold in one hand."
        )
    title = topic.title()
    intro = f"This short article looks at {topic} from {len(ANGLES)} angles."
    outro = f"In short: {topic} rewards starting small and building on what works."
    return f"# {title}\n\n{intro}\n\n{draft}\n\n{outro}"


class GenerateOutline(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> str:
        return str(shared["topic"])

    async def exec_async(self, topic: str) -> list[str]:
        outline = await writer(task="outline", topic=topic)
        return [line.removeprefix("- ") for line in outline.splitlines() if line.strip()]

    async def post_async(self, shared: dict[str, Any], topic: str, sections: list[str]) -> None:
        shared["outline"] = sections
        print("outline:\n" + "\n".join(f"  {i}. {s}" for i, s in enumerate(sections, 1)))


class WriteSections(AsyncBatchNode):
    async def prep_async(self, shared: dict[str, Any]) -> list[tuple[str, str]]:
        return [(shared["topic"], section) for section in shared["outline"]]

    async def exec_async(self, item: tuple[str, str]) -> str:
        topic, section = item
        return await writer(task="section", topic=topic, section=section)

    async def post_async(self, shared: dict[str, Any], prep_res: Any, exec_res: list[str]) -> None:
        shared["sections"] = dict(zip(shared["outline"], exec_res, strict=True))


class PolishArticle(AsyncNode):
    async def prep_async(self, shared: dict[str, Any]) -> tuple[str, str]:
        return shared["topic"], "\n\n".join(shared["sections"].values())

    async def exec_async(self, inputs: tuple[str, str]) -> str:
        topic, draft = inputs
        return await writer(task="polish", topic=topic, draft=draft)

    async def post_async(self, shared: dict[str, Any], prep_res: Any, article: str) -> None:
        shared["article"] = article


def writing_flow() -> AsyncFlow:
    outline, sections, polish = GenerateOutline(), WriteSections(), PolishArticle()
    outline >> sections >> polish
    flow = AsyncFlow(start=outline)
    flow.name = "writing_workflow"  # type: ignore[attr-defined]
    return flow


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="Outline, write and polish an article.")
    parser.add_argument("topic", nargs="?", default="durable agents")
    parser.add_argument("--store", default=None, help="e.g. sqlite:///writing.db")
    args = parser.parse_args(argv)
    shared: dict[str, Any] = sw.Runner(args.store).run_sync(
        writing_flow(), shared={"topic": args.topic}
    )
    print("\n" + shared["article"])
    return shared


if __name__ == "__main__":
    main()
