"""A parent run's children, and theirs, as the tree its page draws.

The direct children are those the parent's spawn records name (in the
order spawned, a pruned one included); their own children are found by id:
a child's id is its parent's id, ``~``, the spawning step's key, ``/`` and
its index (``parent~1/0``), so every descendant's id starts with the
parent's and ``~``. One listing reads them all (at most :data:`LIMIT`),
each placed under the run its row names as parent. Rows only: no step of a
child is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.ledger import CHILD_MARK, RunRecord
from ..stores import Store

__all__ = ["LIMIT", "Family", "Member", "family_tree"]

#: Descendants below the direct children a page reads at most.
LIMIT = 500


@dataclass
class Member:
    """A run of the family: its id, its row (None: pruned), its children."""

    id: str
    run: RunRecord | None
    children: list[Member] = field(default_factory=list)


@dataclass(frozen=True)
class Family:
    """The tree, and whether the listing of deeper runs stopped at ``limit``."""

    members: list[Member]
    cut: bool = False
    limit: int = LIMIT


async def family_tree(
    store: Store, parent: RunRecord, children: Sequence[tuple[str, RunRecord | None]]
) -> Family:
    """The children of ``parent`` (``children``: ids and rows, as spawned)
    as a tree."""
    top = [Member(i, r) for i, r in children]
    if not top:
        return Family([])
    mine = parent.id + CHILD_MARK
    found = await store.list_runs(None, LIMIT + 1, id_contains=mine)
    cut = len(found) > LIMIT
    members = {m.id: m for m in top}
    deeper = sorted(
        (r for r in found[:LIMIT] if r.id.startswith(mine) and r.id not in members),
        key=lambda r: (r.created_at, r.id),
    )
    for r in deeper:
        members[r.id] = Member(r.id, r)
    for r in deeper:
        up = members.get(r.parent_id or "")
        if up is not None and up is not members[r.id]:
            up.children.append(members[r.id])
    return Family(top, cut)
