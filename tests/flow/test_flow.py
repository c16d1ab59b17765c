"""Flows: following actions, the "Flow ends" warning, copies, params, nesting."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from stalwart.flow import AsyncFlow, AsyncNode, AsyncParallelBatchFlow, BaseNode, Flow, Node

from ._helpers import Caught


class Step(Node):
    """Appends its name to shared["log"] and returns a fixed action."""

    def __init__(self, name: str, action: Any = None) -> None:
        super().__init__()
        self.name = name
        self.action = action

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        shared.setdefault("log", []).append(self.name)
        return self.action


# --- following actions ---------------------------------------------------


def test_none_action_follows_default_edge(caught: Caught) -> None:
    a, b = Step("a"), Step("b")
    a >> b
    shared: dict[str, Any] = {}
    assert Flow(start=a).run(shared) is None
    assert shared["log"] == ["a", "b"]
    assert caught.messages == []


def test_explicit_default_action_follows_default_edge() -> None:
    a, b = Step("a", "default"), Step("b")
    a >> b
    shared: dict[str, Any] = {}
    Flow(start=a).run(shared)
    assert shared["log"] == ["a", "b"]


def test_empty_string_action_counts_as_default() -> None:
    a, b = Step("a", ""), Step("b")
    a >> b
    shared: dict[str, Any] = {}
    Flow(start=a).run(shared)
    assert shared["log"] == ["a", "b"]


def test_branches_on_named_actions() -> None:
    def build(choice: str) -> tuple[Flow, dict[str, Any]]:
        decide = Step("decide", choice)
        decide - "left" >> Step("L")
        decide - "right" >> Step("R")
        return Flow(start=decide), {}

    for choice, expected in [("left", "L"), ("right", "R")]:
        flow, shared = build(choice)
        flow.run(shared)
        assert shared["log"] == ["decide", expected]


def test_flow_returns_last_action(caught: Caught) -> None:
    a, b = Step("a", "go"), Step("b", "final_action")
    a - "go" >> b
    assert Flow(start=a).run({}) == "final_action"
    assert caught.messages == []


def test_flow_with_no_start_does_nothing() -> None:
    assert Flow().run({}) is None


def test_missing_action_warns_exactly_once_and_stops(caught: Caught) -> None:
    a, b = Step("a"), Step("b")
    a - "specific_action" >> b
    shared: dict[str, Any] = {}
    assert Flow(start=a).run(shared) is None
    assert shared["log"] == ["a"]
    assert caught.messages == ["Flow ends: 'None' not found in ['specific_action']"]
    assert caught.categories == [UserWarning]


def test_missing_named_action_lists_every_action_in_order(caught: Caught) -> None:
    a = Step("a", "nope")
    a - "x" >> Step("x")
    a >> Step("d")
    a - "y" >> Step("y")
    assert Flow(start=a).run({}) == "nope"
    assert caught.messages == ["Flow ends: 'nope' not found in ['x', 'default', 'y']"]


def test_node_without_successors_ends_silently(caught: Caught) -> None:
    a, b, c = Step("a"), Step("b", "whatever"), Step("c")
    a >> b
    shared: dict[str, Any] = {}
    Flow(start=a).run(shared)
    assert shared["log"] == ["a", "b"]
    assert c.params == {}
    assert caught.messages == []


def test_normal_run_of_a_rich_graph_raises_no_warning(caught: Caught) -> None:
    class Counter(Node):
        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            shared["n"] = shared.get("n", 0) + 1
            return "again" if shared["n"] < 3 else "done"

    counter = Counter()
    counter - "again" >> counter
    counter - "done" >> Step("end")
    inner = Flow(start=counter)
    outer_start = Step("start")
    outer_start >> inner
    shared: dict[str, Any] = {}
    assert Flow(start=outer_start).run(shared) is None
    assert shared == {"log": ["start", "end"], "n": 3}
    assert caught.messages == []


def test_loops_revisit_a_node(caught: Caught) -> None:
    class Countdown(Node):
        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            shared["n"] -= 1
            return "loop" if shared["n"] > 0 else "exit"

    node = Countdown()
    node - "loop" >> node
    shared = {"n": 5}
    assert Flow(start=node).run(shared) == "exit"
    assert shared["n"] == 0
    assert caught.messages == ["Flow ends: 'exit' not found in ['loop']"]


def test_falsy_successor_ends_the_walk_like_pocketflow(caught: Caught) -> None:
    class Falsy(Step):
        def __bool__(self) -> bool:
            return False

    a = Step("a")
    a >> Falsy("f")
    shared: dict[str, Any] = {}
    Flow(start=a).run(shared)
    assert shared["log"] == ["a"]
    assert caught.messages == ["Flow ends: 'None' not found in ['default']"]


# --- a flow's own steps --------------------------------------------------


def test_flow_runs_its_prep_and_post_never_exec() -> None:
    calls: list[Any] = []

    class MyFlow(Flow):
        def prep(self, shared: Any) -> Any:
            calls.append("prep")
            return "flow-prep"

        def exec(self, prep_res: Any) -> Any:
            calls.append("exec")
            return "never"

        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            calls.append(("post", prep_res, exec_res, list(shared["log"])))
            return "flow-result"

    flow = MyFlow(start=Step("a", "last"))
    assert flow.run({}) == "flow-result"
    assert calls == ["prep", ("post", "flow-prep", "last", ["a"])]


def test_flow_post_default_returns_exec_res() -> None:
    assert Flow().post({}, "prep", "exec") == "exec"


# --- copies --------------------------------------------------------------


def test_original_node_never_runs() -> None:
    ran_on: list[int] = []

    class Tracked(Node):
        def prep(self, shared: Any) -> Any:
            ran_on.append(id(self))
            self.touched = True

    original = Tracked()
    original.set_params({"mine": 1})
    Flow(start=original).run({})
    assert len(ran_on) == 1
    assert ran_on[0] != id(original)
    assert not hasattr(original, "touched")
    assert original.params == {"mine": 1}


def test_each_visit_gets_a_fresh_copy(caught: Caught) -> None:
    seen: list[int] = []

    class Visit(Node):
        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            seen.append(id(self))
            assert not hasattr(self, "visited")
            self.visited = True
            shared["n"] += 1
            return "again" if shared["n"] < 3 else None

    node = Visit()
    node - "again" >> node
    Flow(start=node).run({"n": 0})
    assert len(seen) == 3
    assert id(node) not in seen
    assert caught.messages == ["Flow ends: 'None' not found in ['again']"]


def test_instance_attributes_and_replaced_methods_are_kept() -> None:
    node = Node()
    node.label = "set on the instance"  # type: ignore[attr-defined]
    node.exec = lambda prep_res: f"replaced with {prep_res}"  # type: ignore[method-assign]
    node.prep = lambda shared: shared["in"]  # type: ignore[method-assign]

    def post(shared: Any, prep_res: Any, exec_res: Any) -> Any:
        shared["out"] = exec_res
        return None

    node.post = post  # type: ignore[method-assign]
    shared = {"in": "x"}
    Flow(start=node).run(shared)
    assert shared["out"] == "replaced with x"

    class Reads(Node):
        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            shared["label"] = self.label  # type: ignore[attr-defined]

    reader = Reads()
    reader.label = "kept"  # type: ignore[attr-defined]
    Flow(start=reader).run(shared)
    assert shared["label"] == "kept"


def test_copy_is_shallow() -> None:
    class Appends(Node):
        def __init__(self) -> None:
            super().__init__()
            self.items: list[int] = []

        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            self.items.append(1)

    node = Appends()
    Flow(start=node).run({})
    assert node.items == [1]  # the list is shared with the copy, as with copy.copy


def test_classes_that_customise_copying_are_honoured() -> None:
    copies: list[str] = []

    class OwnCopy(Node):
        def __copy__(self) -> OwnCopy:
            copies.append("__copy__")
            new = OwnCopy()
            new.note = "from __copy__"  # type: ignore[attr-defined]
            return new

        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            shared["note"] = self.note  # type: ignore[attr-defined]

    class DropsClient(Node):
        def __getstate__(self) -> dict[str, Any]:
            state = dict(self.__dict__)
            state.pop("client", None)
            return state

        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            shared["has_client"] = hasattr(self, "client")

    class Slotted(Node):
        __slots__ = ("slot",)

        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            shared["slot"] = self.slot

    shared: dict[str, Any] = {}
    Flow(start=OwnCopy()).run(shared)
    assert copies == ["__copy__"]
    assert shared["note"] == "from __copy__"

    dropping = DropsClient()
    dropping.client = object()  # type: ignore[attr-defined]
    Flow(start=dropping).run(shared)
    assert shared["has_client"] is False  # copy.copy goes through __getstate__

    slotted = Slotted()
    slotted.slot = "in a slot"
    Flow(start=slotted).run(shared)
    assert shared["slot"] == "in a slot"


# --- params --------------------------------------------------------------


class ParamsSpy(Node):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
        shared.setdefault("params", {})[self.name] = self.params
        return None


def test_nodes_get_the_flows_params_replacing_their_own() -> None:
    a = ParamsSpy("a")
    a.set_params({"own": "lost"})
    flow = Flow(start=a)
    flow.set_params({"k": "v"})
    shared: dict[str, Any] = {}
    flow.run(shared)
    assert shared["params"]["a"] == {"k": "v"}
    assert a.params == {"own": "lost"}  # the original is untouched


def test_nodes_of_one_run_share_one_params_dict_and_flow_params_are_not_mutated() -> None:
    class Writes(Node):
        def post(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            self.params["written"] = True

    first, second = Writes(), ParamsSpy("second")
    first >> second
    flow = Flow(start=first)
    flow.set_params({"k": 1})
    shared: dict[str, Any] = {}
    flow.run(shared)
    assert shared["params"]["second"] == {"k": 1, "written": True}
    assert flow.params == {"k": 1}

    again: dict[str, Any] = {}
    flow.run(again)
    assert again["params"]["second"] == {"k": 1, "written": True}
    assert again["params"]["second"] is not shared["params"]["second"]


def test_flows_set_params_through_set_params() -> None:
    calls: list[dict[str, Any]] = []

    class Hooked(Node):
        def set_params(self, params: dict[str, Any]) -> None:
            calls.append(params)
            super().set_params(params)

    flow = Flow(start=Hooked())
    flow.set_params({"p": 1})
    flow.run({})
    assert calls == [{"p": 1}]


async def test_concurrent_branches_keep_their_own_params() -> None:
    class Slow(AsyncNode):
        async def exec_async(self, prep_res: Any) -> Any:
            before = self.params["i"]
            await asyncio.sleep(0.01 * (5 - before))
            return (before, self.params["i"])

        async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            shared.append(exec_res)

    class Fan(AsyncParallelBatchFlow):
        async def prep_async(self, shared: Any) -> Any:
            return [{"i": i} for i in range(5)]

    shared: list[tuple[int, int]] = []
    await Fan(start=Slow()).run_async(shared)
    assert sorted(shared) == [(i, i) for i in range(5)]


async def test_two_concurrent_runs_of_one_flow_do_not_mix_params() -> None:
    class Echo(AsyncNode):
        async def prep_async(self, shared: Any) -> Any:
            await asyncio.sleep(0.01)
            return self.params["who"]

        async def post_async(self, shared: Any, prep_res: Any, exec_res: Any) -> Any:
            shared["who"] = (prep_res, self.params["who"])

    flow = AsyncFlow(start=Echo())

    async def run_as(who: str) -> dict[str, Any]:
        shared: dict[str, Any] = {}
        f = copy.copy(flow)
        f.set_params({"who": who})
        await f.run_async(shared)
        return shared

    first, second = await asyncio.gather(run_as("a"), run_as("b"))
    assert first == {"who": ("a", "a")}
    assert second == {"who": ("b", "b")}


# --- nesting -------------------------------------------------------------


def test_outer_flow_branches_on_inner_flow_result() -> None:
    inner = Flow(start=Step("inner", "approved"))
    inner - "approved" >> Step("publish")
    inner - "rejected" >> Step("revise")
    shared: dict[str, Any] = {}
    assert Flow(start=inner).run(shared) is None
    assert shared["log"] == ["inner", "publish"]


def test_nested_flows_with_successors_of_their_own(caught: Caught) -> None:
    first = Flow(start=Step("f1"))
    second = Flow(start=Step("s1", "x"))
    first >> second >> Step("after")
    shared: dict[str, Any] = {}
    outer = Flow(start=first)
    # `second` ends with "x" but only has a default edge: the outer walk ends there.
    assert outer.run(shared) == "x"
    assert shared["log"] == ["f1", "s1"]
    assert caught.messages == ["Flow ends: 'x' not found in ['default']"]


def test_nesting_to_any_depth_passes_params_and_actions() -> None:
    leaf = ParamsSpy("leaf")
    level: BaseNode = leaf
    for _ in range(6):
        level = Flow(start=level)
    outer = Flow(start=level)
    outer.set_params({"depth": "all"})
    shared: dict[str, Any] = {}
    outer.run(shared)
    assert shared["params"]["leaf"] == {"depth": "all"}


def test_inner_flow_params_come_from_outer_and_own_params_are_replaced() -> None:
    leaf = ParamsSpy("leaf")
    inner = Flow(start=leaf)
    inner.set_params({"inner_only": 1})
    outer = Flow(start=inner)
    outer.set_params({"outer": 2})
    shared: dict[str, Any] = {}
    outer.run(shared)
    assert shared["params"]["leaf"] == {"outer": 2}
    assert inner.params == {"inner_only": 1}
