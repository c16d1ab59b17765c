"""Time travel: move recorded runs between stores, and fork them.

- :func:`export_runs`, :func:`write_export`, :func:`read_export`,
  :func:`import_runs`: a run (and its child runs) as versioned JSON Lines
  that round-trip between SQLite and PostgreSQL (``docs/time-travel.md``).
- :func:`move_run`: an unfinished run (its children, mailbox and waits)
  moved to another store at a step boundary, resumable there and marked
  moved here (:func:`moved_to`).
- :func:`fork`: a new run that replays another's recorded prefix up to a
  step, with that step's result, its arguments or the run's inputs
  replaced, then runs live; :func:`fork_pending` leaves it for a worker.

Replay tests of new code against a recording are :func:`stalwart.testing.replay`.
"""

from __future__ import annotations

from ..core.errors import ForkError, MoveError
from .export import (
    FORMAT,
    VERSION,
    export_runs,
    import_runs,
    read_export,
    spawned_ids,
    write_export,
)
from .fork import LINEAGE_KEY, Lineage, Replace, fork, fork_pending, lineage
from .keys import before, key_parts, sort_keys
from .move import MOVING, Moved, move_run, moved_to

__all__ = [
    "FORMAT",
    "LINEAGE_KEY",
    "MOVING",
    "VERSION",
    "ForkError",
    "Lineage",
    "MoveError",
    "Moved",
    "Replace",
    "before",
    "export_runs",
    "fork",
    "fork_pending",
    "import_runs",
    "key_parts",
    "lineage",
    "move_run",
    "moved_to",
    "read_export",
    "sort_keys",
    "spawned_ids",
    "write_export",
]
