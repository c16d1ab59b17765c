"""The recorded run a replay test reads: from a store, an export file, or
already loaded.

A replay test names its recording the way its author has it at hand (a file
checked in next to the test, or a run in a live store), and everything after
loading sees one shape: the run, its steps by key, and the child runs it
spawned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.ledger import RunRecord, StepRecord
from ..stores import open_store
from ..stores.base import RunDump
from ..timetravel.export import export_runs, read_export

__all__ = ["Recording", "load_recording"]


@dataclass
class Recording:
    """A recorded run (and the child runs it spawned), from a store or a file."""

    run: RunRecord
    steps: dict[str, StepRecord]
    children: list[RunDump] = field(default_factory=list)
    source: str = ""

    @classmethod
    def of(cls, dumps: Sequence[RunDump], run_id: str | None, source: str) -> Recording:
        """The run ``run_id`` of ``dumps`` (default: the first top-level one)."""
        top = [d for d in dumps if (d.run.id == run_id if run_id else d.run.parent_id is None)]
        if not top:
            raise LookupError(f"{source}: no run {run_id!r}" if run_id else f"{source}: no run")
        main = top[0]
        rest = [d for d in dumps if d is not main]
        return cls(main.run, main.records(), rest, source)


async def load_recording(source: Any, run_id: str | None = None) -> Recording:
    """A :class:`Recording` from an export file's path, a ``(store URL,
    run id)`` pair, or a Recording (returned as is)."""
    if isinstance(source, Recording):
        return source
    if isinstance(source, tuple):
        url, run_id = source
        store = open_store(url)
        await store.open()
        try:
            dumps = await export_runs(store, run_id, children=True)
        finally:
            await store.close()
        return Recording.of(dumps, run_id, f"{store.url} run {run_id}")
    if isinstance(source, str | Path):
        return Recording.of(read_export(source), run_id, str(source))
    raise TypeError(
        f"a recording is a Recording, an export file's path or (store URL, run id), not {source!r}"
    )
