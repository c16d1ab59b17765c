"""What a flow run tells whoever streams its run, and the names it uses.

A flow's node events reach listeners as ``ctx.emit`` values
(`stalwart.Emitted` events of ``handle.events()`` and ``runner.stream()``);
the same names key the flow's records and name its runs, so they live here,
below both the journal and the flow's policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .flow import Flow
from .node import BaseNode

__all__ = ["NodeFailed", "NodeFinished", "NodeStarted", "flow_name", "node_name"]


@dataclass(frozen=True, slots=True)
class NodeStarted:
    """A node (or a sub-flow) of a flow began; ``key`` is its visit's step key."""

    node: str
    key: str
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class NodeFinished:
    """A node's ``post`` returned ``action``: the edge the flow follows next."""

    node: str
    key: str
    action: Any = None
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class NodeFailed:
    """A node (or a sub-flow) raised; the error goes on up the flow."""

    node: str
    key: str
    error_type: str
    error_message: str


def node_name(node: BaseNode) -> str:
    """A node's ``name`` attribute if it has one, else its class name."""
    name = getattr(node, "name", None)
    return name if isinstance(name, str) and name else type(node).__name__


def flow_name(flow: BaseNode) -> str:
    """The name of a flow's policy (and so of its runs).

    A ``name`` attribute wins; then a subclass's name. A stock class
    (``Flow(start=decide)``) is told apart by its start node:
    ``"Flow-Decide"``, so that two such flows in one program do not share a
    name a runner resumes runs by.
    """
    name = getattr(flow, "name", None)
    if isinstance(name, str) and name:
        return name
    cls = type(flow)
    start = getattr(flow, "start_node", None)
    if cls.__module__ == Flow.__module__ and start is not None:
        return f"{cls.__name__}-{node_name(start)}"
    return cls.__name__
