"""A flow run's graph as the run page draws it: its nodes and actions, the
path the run took through them, and the node it is at or failed in.

The path comes from the ledger (:mod:`stalwart.flow.durable` says what a flow
records): each visit of the flow's walk is a step ``1.walk.<n>``, its
``exec`` named ``<node>.exec`` and its ``post`` a ``stalwart.flow.post``
record holding the node's name and the action it returned. The graph itself
(the nodes a visit may lead to) is not recorded: it is read from the flow
object when the inspector was given the application's policies
(``create_app(policies=...)``), by its attributes only (``start_node``,
``successors``, names), never run. Without it, the graph drawn is the path:
the nodes visited, joined by the actions taken.

Positions are computed here, as numbers; the template draws the SVG and
escapes every name (S13: names are recorded data).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.ledger import TERMINAL, RunRecord, StepRecord
from ..core.policy import Policy
from ..flow.durable import FlowPolicy
from ..flow.events import flow_name, node_name
from ..flow.flow import Flow
from ..flow.node import BaseNode
from ..flow.visits import POST
from ..journey import Journey
from .steps import key_order
from .values import error_summary, load

__all__ = [
    "FlowGraph",
    "GraphEdge",
    "GraphNode",
    "Visit",
    "flow_graph",
    "flow_visits",
    "journey_graph",
    "run_graph",
]

#: Nodes drawn at most: a graph read from an object is walked this far.
MAX_NODES = 200
#: Characters of a node's name or an action written in the drawing (the
#: whole is in the box's tooltip).
LABEL = 19

_BOX_W, _BOX_H = 150, 34
_COL, _ROW = 190, 82
_MARGIN = 24
_VISIT = re.compile(r"1\.walk\.(\d+)\.(prep|exec|post)(?:#\d+)?")


@dataclass
class Visit:
    """One node run in the flow's walk, as its records say: ``state`` is
    ``done`` (its post is recorded), ``failed`` (its exec recorded an error)
    or ``open`` (started, not finished)."""

    n: int
    name: str
    action: str | None = None
    state: str = "open"
    error: str = ""


@dataclass(frozen=True)
class GraphNode:
    """A box: its place, its name (``label`` cut to fit, ``name`` whole),
    how many visits of the steps shown ran it, and ``state``: ``current``
    (the node the run is at), ``interrupted`` (the node it was at when its
    holder died), ``failed``, ``visited`` or ``""``."""

    name: str
    label: str
    x: float
    y: float
    visits: int
    state: str
    error: str = ""


@dataclass(frozen=True)
class GraphEdge:
    """An arrow for an action: its SVG path, where its label goes, and how
    many times the steps shown took it."""

    action: str
    label: str
    d: str
    label_x: float
    label_y: float
    taken: int


@dataclass(frozen=True)
class FlowGraph:
    """What the page draws: the boxes, the arrows, the drawing's size, the
    path as visits, and whether the graph is the flow's own (``whole``) or
    only the path the ledger shows."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]
    width: float
    height: float
    whole: bool
    path: list[Visit] = field(default_factory=list)
    kind: str = "flow"  # or "journey": its steps and the moves between them


def flow_visits(steps: Mapping[str, StepRecord]) -> list[Visit]:
    """The visits of a flow run's top-level walk among ``steps``, in order."""
    visits: dict[int, Visit] = {}
    for key, rec in steps.items():
        m = _VISIT.fullmatch(key)
        if m is None:
            continue
        n, phase = int(m.group(1)), m.group(2)
        visit = visits.setdefault(n, Visit(n, ""))
        if phase == "post" and rec.name == f"stalwart.{POST}":
            value = load(rec.output)
            record = value if isinstance(value, dict) else {}
            visit.name = str(record.get("node", visit.name))
            action = record.get("action")
            visit.action = _action_text(action)
            visit.state = "done"
        elif phase == "exec":
            if not visit.name and rec.name.endswith(".exec"):
                visit.name = rec.name[: -len(".exec")]
            if rec.error is not None and visit.state != "done":
                visit.state, visit.error = "failed", error_summary(rec.error)
        elif phase == "prep" and not visit.name:
            value = load(rec.output)
            if isinstance(value, dict):
                visit.name = str(value.get("node", ""))
    return [visits[n] for n in sorted(visits)]


def _action_text(action: Any) -> str | None:
    """An action as recorded (a codec tree) as the graph names it: a string
    is itself; anything else its JSON text (None: the default action)."""
    if action is None or isinstance(action, str):
        return action
    return json.dumps(action, ensure_ascii=False, sort_keys=True)


def _flow_of(policy: Policy[Any, Any] | None) -> Flow | None:
    fn = None if policy is None else policy.fn
    if isinstance(fn, FlowPolicy) and isinstance(fn.flow, Flow):
        return fn.flow
    return None


def _name(node: BaseNode) -> str:
    return flow_name(node) if isinstance(node, Flow) else node_name(node)


def flow_graph(
    run: RunRecord,
    steps: Mapping[str, StepRecord],
    policy: Policy[Any, Any] | None,
    interrupted: bool = False,
) -> FlowGraph | None:
    """The graph of a flow run (None when the run is no flow's).

    ``policy`` is the run's policy when the inspector was given it: a flow's
    gives the whole graph; else the graph is the path the steps show.
    ``interrupted``: the run's holder died holding it (its node is marked
    ``interrupted`` rather than ``current``, until a worker takes it over).
    """
    flow = _flow_of(policy)
    path = flow_visits(steps)
    if flow is None and not path:
        return None
    # Nodes by identity: (name, index) when read from the flow, so two
    # nodes of one class stay two; by name when only the path is known.
    names: list[str] = []
    successors: list[dict[str, int]] = []
    start: int | None = None
    if flow is not None and flow.start_node is not None:
        ids: dict[int, int] = {}
        todo = [flow.start_node]
        objects: list[BaseNode] = []
        while todo and len(objects) < MAX_NODES:
            node = todo.pop(0)
            if id(node) in ids:
                continue
            ids[id(node)] = len(objects)
            objects.append(node)
            todo.extend(node.successors.values())
        for node in objects:
            names.append(_name(node))
            successors.append(
                {str(a): ids[id(t)] for a, t in node.successors.items() if id(t) in ids}
            )
        start = 0
    else:
        index: dict[str, int] = {}
        for v in path:
            if v.name not in index:
                index[v.name] = len(names)
                names.append(v.name)
                successors.append({})
        for a, b in itertools.pairwise(path):
            if a.n + 1 == b.n:  # consecutive visits: the action led from one to the next
                successors[index[a.name]].setdefault(a.action or "default", index[b.name])
        start = 0 if names and path and path[0].n == 1 else None
    # Place the path's visits on the nodes: each by name, following the
    # previous node's action where two nodes share a name.
    at: list[int | None] = []
    for i, v in enumerate(path):
        here: int | None = None
        prev = at[i - 1] if i else (start if v.n == 1 else None)
        if i and prev is not None and path[i - 1].n + 1 == v.n:
            nxt = successors[prev].get(path[i - 1].action or "default")
            if nxt is not None and names[nxt] == v.name:
                here = nxt
        elif not i and v.n == 1 and start is not None and names[start] == v.name:
            here = start
        if here is None and v.name in names:
            here = names.index(v.name)
        at.append(here)
    visits = [0] * len(names)
    taken: dict[tuple[int, str], int] = {}
    for i, v in enumerate(path):
        node_i = at[i]
        if node_i is None:
            continue
        visits[node_i] += 1
        if i + 1 < len(path) and path[i + 1].n == v.n + 1 and at[i + 1] is not None:
            edge = (node_i, v.action or "default")
            taken[edge] = taken.get(edge, 0) + 1
    states = ["visited" if c else "" for c in visits]
    now = "interrupted" if interrupted else "current"
    errors = [""] * len(names)
    failed_run = run.status == "failed"
    last = path[-1] if path else None
    last_at = at[-1] if at else None
    if last is None:
        if start is not None and run.status not in TERMINAL:
            states[start] = now
    elif last.state == "failed" or (failed_run and last.state == "open"):
        if last_at is not None:
            states[last_at] = "failed"
            errors[last_at] = last.error or error_summary(run.error)
    elif last.state == "open":
        if last_at is not None and run.status not in TERMINAL:
            states[last_at] = now
    elif run.status not in TERMINAL and last_at is not None:
        # Its last node finished: the run is at the node its action leads to.
        nxt = successors[last_at].get(last.action or "default")
        if nxt is not None:
            states[nxt] = now
            edge = (last_at, last.action or "default")
            taken[edge] = taken.get(edge, 0) + 1
    return _layout(names, successors, start, visits, states, errors, taken, flow is not None, path)


def _layout(
    names: list[str],
    successors: list[dict[str, int]],
    start: int | None,
    visits: list[int],
    states: list[str],
    errors: list[str],
    taken: dict[tuple[int, str], int],
    whole: bool,
    path: list[Visit],
) -> FlowGraph:
    """Rows by distance from the start (breadth first), left to right in
    the order found; an arrow to a row below is straight, one back up (a
    loop) or across a row bends out to the right."""
    depth: dict[int, int] = {}
    order = [start] if start is not None else []
    order += [i for i in range(len(names)) if i != start]
    for root in order:
        if root in depth:
            continue
        depth[root] = 0 if root == start else (max(depth.values(), default=-1) + 1)
        queue = [root]
        while queue:
            i = queue.pop(0)
            for t in successors[i].values():
                if t not in depth:
                    depth[t] = depth[i] + 1
                    queue.append(t)
    rows: dict[int, list[int]] = {}
    for i in sorted(depth, key=lambda i: (depth[i], order.index(i))):
        rows.setdefault(depth[i], []).append(i)
    pos: dict[int, tuple[float, float]] = {}
    widest = max((len(r) for r in rows.values()), default=1)
    # 120 more: room for the loops bending out on the right
    width: float = 2 * _MARGIN + widest * _COL - (_COL - _BOX_W) + 120
    for row, members in rows.items():
        offset = (widest - len(members)) * _COL / 2
        for j, i in enumerate(members):
            pos[i] = (_MARGIN + offset + j * _COL, _MARGIN + row * _ROW)
    height = 2 * _MARGIN + (max(rows, default=0) + 1) * _ROW - (_ROW - _BOX_H)
    nodes = [
        GraphNode(names[i], _short(names[i]), pos[i][0], pos[i][1], visits[i], states[i], errors[i])
        for i in range(len(names))
    ]
    edges: list[GraphEdge] = []
    for i, out in enumerate(successors):
        for k, (action, t) in enumerate(out.items()):
            (x1, y1), (x2, y2) = pos[i], pos[t]
            if y2 > y1:
                sx, sy = x1 + _BOX_W / 2 + (k - (len(out) - 1) / 2) * 14, y1 + _BOX_H
                ex, ey = x2 + _BOX_W / 2, y2
                d = (
                    f"M{sx:.1f},{sy:.1f} C{sx:.1f},{sy + 30:.1f} "
                    f"{ex:.1f},{ey - 30:.1f} {ex:.1f},{ey - 2:.1f}"
                )
                lx, ly = sx + (ex - sx) * 0.6 + 4, sy + (ey - sy) * 0.6 + 11 * (k % 2)
            else:  # back up, to itself, or across a row: out to the right and in again
                bend = max(x1, x2) + _BOX_W + 40 + 12 * k
                sx, sy = x1 + _BOX_W, y1 + _BOX_H / 2
                ex, ey = x2 + _BOX_W + 2, y2 + _BOX_H / 2
                d = f"M{sx:.1f},{sy:.1f} C{bend:.1f},{sy:.1f} {bend:.1f},{ey:.1f} {ex:.1f},{ey:.1f}"
                lx, ly = bend - 6, (sy + ey) / 2
            width = max(width, lx + 110)
            edges.append(GraphEdge(action, _short(action), d, lx, ly, taken.get((i, action), 0)))
    return FlowGraph(nodes, edges, width, height, whole, path)


def _short(text: str) -> str:
    return text if len(text) <= LABEL else text[: LABEL - 1] + "…"


def journey_graph(
    run: RunRecord,
    steps: Mapping[str, StepRecord],
    policy: Policy[Any, Any] | None,
    interrupted: bool = False,
) -> FlowGraph | None:
    """A journey run's steps (the journey's own, when the inspector has
    it) and the moves between them its ``stalwart.journey`` records show
    (None when the run is no journey's).

    A move's arrow is named by the step it leads to; a journey's moves are
    its tools' choices, not declared, so only moves made are drawn.
    """
    journey = policy.fn if policy is not None and isinstance(policy.fn, Journey) else None
    records = sorted(
        (r for r in steps.values() if r.kind == "journey"), key=lambda r: key_order(r.key)
    )
    if journey is None and not records:
        return None
    names: list[str] = [m.name for m in journey.kind] if journey is not None else []
    start = journey.start.name if journey is not None else None
    path: list[Visit] = []
    done = False
    for r in records:
        value = load(r.output)
        record = value if isinstance(value, dict) else {}
        name = str(record.get("step", ""))
        done = record.get("done") is True
        if not path and start is not None and name != start:
            path.append(Visit(0, start, name, "done"))
        if path and path[-1].name == name:
            continue  # the state changed, the step did not
        if path:
            path[-1].action = name
        path.append(Visit(len(path) + 1, name, None, "done"))
    if not path and start is not None:
        path.append(Visit(1, start, None, "done"))
    for v in path:
        if v.name not in names:
            names.append(v.name)
    index = {n: i for i, n in enumerate(names)}
    successors: list[dict[str, int]] = [{} for _ in names]
    taken: dict[tuple[int, str], int] = {}
    visits = [0] * len(names)
    for a, b in itertools.pairwise(path):
        successors[index[a.name]][b.name] = index[b.name]
        taken[(index[a.name], b.name)] = taken.get((index[a.name], b.name), 0) + 1
    for v in path:
        visits[index[v.name]] += 1
    states = ["visited" if c else "" for c in visits]
    errors = [""] * len(names)
    if path:
        last = index[path[-1].name]
        if run.status == "failed":
            states[last], errors[last] = "failed", error_summary(run.error)
        elif run.status not in TERMINAL and not done:
            states[last] = "interrupted" if interrupted else "current"
    first = index[start] if start is not None else (0 if names else None)
    graph = _layout(
        names, successors, first, visits, states, errors, taken, journey is not None, path
    )
    return dataclasses.replace(graph, kind="journey")


def run_graph(
    run: RunRecord,
    steps: Mapping[str, StepRecord],
    policy: Policy[Any, Any] | None,
    interrupted: bool = False,
) -> FlowGraph | None:
    """The graph a run's page draws: a flow's or a journey's (None: neither)."""
    return flow_graph(run, steps, policy, interrupted) or journey_graph(
        run, steps, policy, interrupted
    )
