"""The steps of a run as the pages show them: a tree by key, the engine's
own records, and the child runs spawned (their bars on a time axis are
:mod:`.timeline`'s).

Read from records as plain JSON trees, as :mod:`.values` says (S13).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from ..core.ledger import CHILD_MARK, RunRecord, StepRecord
from .values import EMPTY, Shown, error_summary, fmt_duration, load, shown, value_link

__all__ = [
    "StepNode",
    "child_ids",
    "events_of",
    "flatten",
    "key_order",
    "parent_key",
    "step_tree",
]


_SEGMENT = re.compile(r"[.#]")


def parent_key(key: str) -> str:
    """The key of the step that made the call at ``key`` ("" for the root).

    Keys grow by ``.n`` for a call and ``#n`` for an option call a step's
    reply asked for (S1): ``1.2#1``'s parent is ``1.2``, whose parent is ``1``.
    """
    cut = max(key.rfind("."), key.rfind("#"))
    return key[:cut] if cut > 0 else ""


def key_order(key: str) -> tuple[tuple[int, int | str], ...]:
    """Sort keys as numbers (``2`` before ``10``), ``.`` calls before ``#`` ones.

    The order steps were called in, for the tree and for every list read in
    call order (the conversation included).
    """
    out: list[tuple[int, int | str]] = []
    for sep, part in re.findall(r"(^|[.#])([^.#]*)", key):
        rank = 0 if sep != "#" else 1
        out.append((rank, int(part)) if part.isdigit() else (rank + 2, part))
    return tuple(out)


@dataclass
class StepNode:
    """A step for the tree: its record (None for a step still running, known
    only because its children are recorded), and its children. Its values
    are shown cut (:func:`.values.cut`), with links to the whole of each
    under run ``run_id``."""

    key: str
    record: StepRecord | None
    children: list[StepNode] = field(default_factory=list)
    run_id: str = ""

    @property
    def duration(self) -> str:
        r = self.record
        return "" if r is None else fmt_duration(r.finished_at - r.started_at)

    @property
    def failed(self) -> bool:
        return self.record is not None and self.record.error is not None

    @property
    def error(self) -> str:
        return "" if self.record is None else error_summary(self.record.error)

    @cached_property  # a template asks twice; a model call's args are its conversation
    def args(self) -> Shown:
        if self.record is None:
            return EMPTY
        return shown(self.record.args, value_link(self.run_id, "args", self.key))

    @cached_property
    def output(self) -> Shown:
        r = self.record
        if r is None:
            return EMPTY
        if r.error is not None:
            return shown(r.error, value_link(self.run_id, "error", self.key))
        return shown(r.output, value_link(self.run_id, "output", self.key))


def step_tree(steps: Mapping[str, StepRecord], run_id: str = "") -> list[StepNode]:
    """The recorded steps of run ``run_id`` nested by key, each level in call order.

    A parent records its outcome after its children, so a running run has
    children whose parent has no record yet: the parent appears with none.
    """
    nodes: dict[str, StepNode] = {k: StepNode(k, rec, run_id=run_id) for k, rec in steps.items()}
    for key in list(nodes):
        while key:
            up = parent_key(key)
            if not up or up in nodes:
                break
            nodes[up] = StepNode(up, None, run_id=run_id)
            key = up
    roots: list[StepNode] = []
    for key in sorted(nodes, key=key_order):
        up = parent_key(key)
        (nodes[up].children if up else roots).append(nodes[key])
    return roots


def flatten(nodes: Iterable[StepNode], depth: int = 0) -> Iterator[tuple[int, StepNode]]:
    for node in nodes:
        yield depth, node
        yield from flatten(node.children, depth + 1)


def events_of(steps: Mapping[str, StepRecord], run_id: str = "") -> list[tuple[StepRecord, Shown]]:
    """What the engine recorded besides calls (timers, signals received,
    recorded clocks and ids, child runs spawned, patch markers), in time
    order, each with its value as shown (cut, linked to the whole)."""
    out: list[tuple[StepRecord, Shown]] = []
    for s in sorted(
        (s for s in steps.values() if s.kind != "call"), key=lambda s: (s.finished_at, s.key)
    ):
        failed = s.error is not None
        field = "error" if failed else "output"
        out.append((s, shown(s.error if failed else s.output, value_link(run_id, field, s.key))))
    return out


def child_ids(run: RunRecord, steps: Mapping[str, StepRecord]) -> list[str]:
    """The ids of the child runs this run spawned, from its spawn records.

    A spawn step records the ids it started; only ids shaped as this run's
    children (``parent~key/i``) are taken, whatever else a row holds.
    """
    out: list[str] = []
    mine = run.id + CHILD_MARK
    for s in sorted(steps.values(), key=lambda s: key_order(s.key)):
        if not s.name.startswith("stalwart.spawn:"):
            continue
        ids = load(s.output)
        if isinstance(ids, list):
            out.extend(i for i in ids if isinstance(i, str) and i.startswith(mine))
    return out
