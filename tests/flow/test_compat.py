"""A PocketFlow program runs unchanged after swapping its import."""

from __future__ import annotations

import textwrap
import warnings
from typing import Any

import stalwart.flow

CLASSES = [
    "AsyncBatchFlow",
    "AsyncBatchNode",
    "AsyncFlow",
    "AsyncNode",
    "AsyncParallelBatchFlow",
    "AsyncParallelBatchNode",
    "BaseNode",
    "BatchFlow",
    "BatchNode",
    "Flow",
    "Node",
]


def test_star_import_gives_what_pocketflows_does() -> None:
    namespace: dict[str, Any] = {}
    exec("from stalwart.flow import *", namespace)
    names = sorted(k for k in namespace if k != "__builtins__")
    # pocketflow has no __all__, so its star import also leaks these modules,
    # and programs use `asyncio.run` without importing asyncio.
    assert names == sorted([*CLASSES, "asyncio", "copy", "time", "warnings"])
    assert sorted(stalwart.flow.__all__) == names


def test_class_hierarchy_matches_pocketflow() -> None:
    f = stalwart.flow
    assert issubclass(f.Node, f.BaseNode)
    assert issubclass(f.BatchNode, f.Node)
    assert issubclass(f.Flow, f.BaseNode)
    assert issubclass(f.BatchFlow, f.Flow)
    assert issubclass(f.AsyncNode, f.Node)
    for cls in (f.AsyncBatchNode, f.AsyncParallelBatchNode):
        assert issubclass(cls, f.AsyncNode)
        assert issubclass(cls, f.BatchNode)
    assert issubclass(f.AsyncFlow, f.Flow)
    assert issubclass(f.AsyncFlow, f.AsyncNode)
    for cls in (f.AsyncBatchFlow, f.AsyncParallelBatchFlow):
        assert issubclass(cls, f.AsyncFlow)
        assert issubclass(cls, f.BatchFlow)


PROGRAM = textwrap.dedent(
    """
    from stalwart.flow import *

    class Decide(Node):
        def prep(self, shared):
            return shared["question"], shared.get("context", [])

        def exec(self, inputs):
            question, context = inputs
            return "answer" if len(context) >= 2 else "search"

        def post(self, shared, prep_res, exec_res):
            return exec_res

    class Search(Node):
        def exec(self, prep_res):
            if self.cur_retry == 0:
                raise ConnectionError("flaky")
            return "a fact"

        def post(self, shared, prep_res, exec_res):
            shared.setdefault("context", []).append(exec_res)
            return "decide"

    class Answer(AsyncNode):
        async def prep_async(self, shared):
            return shared["context"]

        async def exec_async(self, context):
            await asyncio.sleep(0)
            return f"{len(context)} facts"

        async def post_async(self, shared, prep_res, exec_res):
            shared["answer"] = exec_res

    class Summaries(AsyncParallelBatchNode):
        async def prep_async(self, shared):
            return shared["context"]

        async def exec_async(self, fact):
            return fact.upper()

        async def post_async(self, shared, prep_res, exec_res):
            shared["summaries"] = exec_res

    decide, search, answer = Decide(), Search(max_retries=2), Answer()
    decide - "search" >> search
    decide - "answer" >> answer
    search - "decide" >> decide
    answer >> Summaries()

    shared = {"question": "why?"}
    result = asyncio.run(AsyncFlow(start=decide).run_async(shared))
    """
)


def test_a_pocketflow_style_program_runs_unchanged() -> None:
    namespace: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning may fire in a normal run
        exec(compile(PROGRAM, "<pocketflow program>", "exec"), namespace)
    assert namespace["shared"] == {
        "question": "why?",
        "context": ["a fact", "a fact"],
        "answer": "2 facts",
        "summaries": ["A FACT", "A FACT"],
    }
    assert namespace["result"] is None
