"""Wiring: `>>`, `- "action" >>`, `next()`, `Flow(start=)` and `start()`."""

from __future__ import annotations

import pytest

from stalwart.flow import AsyncFlow, AsyncNode, BaseNode, Flow, Node

from ._helpers import Caught


def test_rshift_is_next_default_and_returns_right_node(caught: Caught) -> None:
    a, b = Node(), Node()
    assert (a >> b) is b
    assert a.successors == {"default": b}
    assert caught.messages == []


def test_rshift_chains() -> None:
    a, b, c = Node(), Node(), Node()
    a >> b >> c
    assert a.successors["default"] is b
    assert b.successors["default"] is c
    assert c.successors == {}


def test_named_action_edge_returns_target() -> None:
    a, b, c = Node(), Node(), Node()
    assert (a - "yes" >> b) is b
    assert (a - "no" >> c) is c
    assert a.successors == {"yes": b, "no": c}


def test_named_action_edge_chains_on() -> None:
    a, b, c = Node(), Node(), Node()
    a - "go" >> b >> c
    assert a.successors == {"go": b}
    assert b.successors == {"default": c}


@pytest.mark.parametrize("action", [1, None, 2.5, b"bytes", ("t",)])
def test_non_string_action_raises_type_error(action: object) -> None:
    with pytest.raises(TypeError) as info:
        Node() - action  # type: ignore[operator]
    assert str(info.value) == "Action must be a string"


def test_next_default_and_named() -> None:
    a, b, c = BaseNode(), BaseNode(), BaseNode()
    assert a.next(b) is b
    assert a.next(c, "other") is c
    assert a.successors == {"default": b, "other": c}


def test_overwriting_successor_warns_and_replaces(caught: Caught) -> None:
    a, b, c = Node(), Node(), Node()
    a >> b
    a >> c
    assert caught.messages == ["Overwriting successor for action 'default'"]
    assert caught.categories == [UserWarning]
    assert a.successors == {"default": c}


def test_overwriting_named_successor_warns_with_action_name(caught: Caught) -> None:
    a, b, c = Node(), Node(), Node()
    a - "x" >> b
    a.next(c, "x")
    assert caught.messages == ["Overwriting successor for action 'x'"]
    assert a.successors["x"] is c


def test_distinct_actions_do_not_warn(caught: Caught) -> None:
    a = Node()
    a >> Node()
    a - "x" >> Node()
    a - "y" >> Node()
    assert caught.messages == []


def test_flow_start_constructor_and_method() -> None:
    n, m = Node(), Node()
    flow = Flow(start=n)
    assert flow.start_node is n
    assert flow.start(m) is m
    assert flow.start_node is m
    assert Flow().start_node is None


def test_successors_is_a_public_dict_programs_can_edit() -> None:
    a, b = Node(), Node()
    a.successors["manual"] = b
    assert a.successors == {"manual": b}


def test_async_classes_wire_the_same_way() -> None:
    a, b = AsyncNode(), AsyncNode()
    flow = AsyncFlow()
    assert flow.start(a) is a
    assert (a - "x" >> b) is b
    assert a.successors == {"x": b}
