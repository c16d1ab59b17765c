"""Time travel: move recorded runs between stores, and fork them.

- :func:`export_runs`, :func:`write_export`, :func:`read_export`,
  :func:`import_runs`: a run (and its child runs) as versioned JSON Lines
  that round-trip between SQLite and PostgreSQL (``docs/time-travel.md``).
- :func:`fork`: a new run that replays another's recorded prefix up to a
  step, with that step's result, its arguments or the run's inputs
  replaced, then runs live.

Replay tests of new code against a recording are :func:`stalwart.testing.replay`.
"""

from __future__ import annotations

from ..core.errors import ForkError
from .export import (
    FORMAT,
    VERSION,
    export_runs,
    import_runs,
    read_export,
    spawned_ids,
    write_export,
)
from .fork import LINEAGE_KEY, Lineage, Replace, fork, lineage
from .keys import before, key_parts, sort_keys

__all__ = [
    "FORMAT",
    "LINEAGE_KEY",
    "VERSION",
    "ForkError",
    "Lineage",
    "Replace",
    "before",
    "export_runs",
    "fork",
    "import_runs",
    "key_parts",
    "lineage",
    "read_export",
    "sort_keys",
    "spawned_ids",
    "write_export",
]
