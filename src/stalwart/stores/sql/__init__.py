"""What the two SQL stores share: column lists, rules, and SQL written once.

:mod:`stalwart.stores.sqlite` and :mod:`stalwart.stores.postgres` keep the
same tables with the same column names and the same semantics; what differs
between them is concurrency (one file and one connection against a pool of
connections and many machines) and a few words of dialect. So:

* :mod:`.columns`: the columns selected for a run or a step, derived from the
  record dataclasses, and each column's position by name (rows are read by
  name, at the cost of a precomputed index);
* :mod:`.rules`: the rules both stores apply in Python (spilling large
  values out of the hot table, the queue token bucket, fence verdicts);
* :mod:`.statements`: the SQL both stores run, written once against a
  :class:`~.statements.Dialect` (placeholder style, table prefix, the few
  functions that are spelled differently).
"""

from __future__ import annotations

from .columns import RUN, RUN_FIELDS, STEP, STEP_COLUMNS, STEP_FIELDS, step_from_row
from .rules import (
    QueueLimit,
    check_queue_limits,
    fence_refusal,
    full_bucket,
    merge_payloads,
    quoted,
    refill,
    spilled_values,
    split_spill,
)
from .statements import FINISHED, SQLITE, Dialect, Statements, counts, postgres

__all__ = [
    "FINISHED",
    "RUN",
    "RUN_FIELDS",
    "SQLITE",
    "STEP",
    "STEP_COLUMNS",
    "STEP_FIELDS",
    "Dialect",
    "QueueLimit",
    "Statements",
    "check_queue_limits",
    "counts",
    "fence_refusal",
    "full_bucket",
    "merge_payloads",
    "postgres",
    "quoted",
    "refill",
    "spilled_values",
    "split_spill",
    "step_from_row",
]
