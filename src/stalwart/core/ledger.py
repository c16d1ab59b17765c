"""The ledger's record format: what a run and a step look like once recorded.

The engine writes steps (as stored: ``core/stepargs.py``) and reads
:class:`RunRecord`s through the small :class:`Ledger` protocol; a store
(``stalwart.stores``) keeps them and gives readers whole :class:`StepRecord`
records.
Values are JSON text already, so every store keeps the same bytes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

__all__ = [
    "ASKED",
    "CHILDREN_WAIT",
    "CHILD_MARK",
    "MAX_DELAY",
    "MAX_RUN_ID",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "TERMINAL",
    "Ledger",
    "RunRecord",
    "RunStatus",
    "StepRecord",
    "StoredStep",
    "asked_key",
    "check_delay",
    "check_priority",
    "check_run_id",
    "child_group",
    "child_run_id",
]

RunStatus = Literal["pending", "running", "suspended", "succeeded", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})


@dataclass(slots=True)
class StepRecord:
    """One finished step: its identity (S1), and its output or error (S4).

    ``output`` and ``error`` are JSON text; exactly one is set. ``kind`` tells
    a policy call from the engine's own records (sleep, signal, now, ...).
    """

    key: str
    name: str
    args_hash: str
    args: str | None
    output: str | None
    error: str | None
    attempts: int = 1
    started_at: float = 0.0
    finished_at: float = 0.0
    kind: str = "call"


@dataclass(slots=True)
class StoredStep:
    """One step as a store keeps it: the fields of a
    :class:`StepRecord`, but ``args`` may be compact (refer to an
    earlier step's). What the engine writes and replays, and what an export,
    an import or a fork copies; never handed to a reader, which gets the
    record whole (``core/stepargs.py``: ``whole_steps``)."""

    key: str
    name: str
    args_hash: str
    args: str | None
    output: str | None
    error: str | None
    attempts: int = 1
    started_at: float = 0.0
    finished_at: float = 0.0
    kind: str = "call"

    @classmethod
    def of(cls, step: StepRecord) -> StoredStep:
        """A whole record as a store keeps it (whole arguments are a stored form)."""
        return cls(
            step.key,
            step.name,
            step.args_hash,
            step.args,
            step.output,
            step.error,
            step.attempts,
            step.started_at,
            step.finished_at,
            step.kind,
        )


@dataclass(slots=True)
class RunRecord:
    """A run: its inputs, where it stands, and who holds it.

    ``trace``: the trace context the run was started under (W3C
    ``traceparent``/``tracestate`` as JSON), kept so that every execution of
    the run, on any worker and after any crash, joins the trace that started
    it; None when tracing was off.

    ``tags``: the run's tags (:mod:`stalwart.core.tags`) as JSON text of an
    object sorted by key, or None when it has none.

    ``cleared``: the code versions besides ``code_version`` that the deploy
    gate found can continue the run (``stalwart deploy check --clear``),
    separated by spaces, or None (:mod:`stalwart.runner.routing`).
    """

    id: str
    policy: str
    inputs: str
    status: RunStatus = "pending"
    result: str | None = None
    error: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    code_version: str = ""
    wake_at: float | None = None
    waiting_for: str | None = None
    owner: str | None = None
    lease_expires_at: float | None = None
    fence: int = 0
    cancel_requested: bool = False
    queue: str = "default"
    priority: int = 0
    parent_id: str | None = None
    trace: str | None = None
    tags: str | None = None
    cleared: str | None = None


CHILDREN_WAIT = "stalwart.children:"

# What a wait for a signal asks (``ctx.ask``, ``ctx.wait_for(..., about=...)``):
# an engine record named ``stalwart.ask`` whose output is ``{"prompt": str or
# None, "signal": name, "about": any value}``, at the wait's deadline key plus
# ".0". Readers (the CLI, the inspector) find a waiting run's question there.
ASKED = "ask"


def asked_key(deadline_key: str) -> str:
    """The key of the record of what the wait at ``deadline_key`` asks.

    ``.0`` is a child key no context hands out (they count from 1), so the
    record takes no key from the run's sequence (S1).
    """
    return f"{deadline_key}.0"


# Child run ids: the parent's id, "~", the spawning step's key, "/", the index.
# Run ids a user chooses may not contain "~" (see check_run_id), so a user's
# run can never be taken for a child, nor a child for a user's run.
CHILD_MARK = "~"
MAX_RUN_ID = 512


def child_run_id(parent_id: str, step_key: str, index: int) -> str:
    return f"{parent_id}{CHILD_MARK}{step_key}/{index}"


def child_group(child_id: str) -> str:
    """The id prefix shared by the children one step started."""
    return child_id.rsplit("/", 1)[0] + "/"


def check_run_id(run_id: object) -> str:
    """A run id a user may choose: why not, as a ValueError naming it."""
    if not isinstance(run_id, str):
        raise TypeError(f"a run id is a string, not {type(run_id).__name__}")
    if not run_id:
        raise ValueError("a run id cannot be empty (leave it out to get a random one)")
    if not run_id.strip(" "):
        raise ValueError("a run id cannot be only spaces (leave it out to get a random one)")
    if len(run_id) > MAX_RUN_ID:
        raise ValueError(f"a run id has at most {MAX_RUN_ID} characters, not {len(run_id)}")
    if CHILD_MARK in run_id:
        raise ValueError(
            f"run id {run_id[:80]!r} contains {CHILD_MARK!r}, which is kept for child runs"
        )
    if not run_id.isprintable():
        raise ValueError(f"run id {run_id[:80]!r} contains control characters")
    return run_id


#: A run's priority as every store holds it (PostgreSQL's ``integer``).
PRIORITY_MIN, PRIORITY_MAX = -(2**31), 2**31 - 1


def check_priority(priority: object) -> int:
    """A run's priority: an int the stores can hold, else an error naming it
    (a value past the column's range would fail in the store, as if it were down)."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"priority is an int, not {type(priority).__name__}")
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ValueError(f"priority {priority} is out of range ({PRIORITY_MIN} to {PRIORITY_MAX})")
    return priority


#: The longest start delay, in seconds (ten years of 365 days): a later
#: start is a run no worker would take in its lifetime, with a wake time
#: no reader can show.
MAX_DELAY = 10 * 365 * 24 * 3600


def check_delay(delay: object) -> float | None:
    """A start delay in seconds: from 0 to :data:`MAX_DELAY` (None or 0: no
    delay). An endless delay would be a run no worker ever takes, and a wake
    time no reader can show."""
    if delay is None:
        return None
    if isinstance(delay, bool) or not isinstance(delay, int | float):
        raise TypeError(f"delay is a number of seconds, not {type(delay).__name__}")
    if not math.isfinite(delay) or not 0 <= delay <= MAX_DELAY:
        raise ValueError(f"delay is a number of seconds from 0 to {MAX_DELAY}, not {delay!r}")
    return float(delay) or None


class Ledger(Protocol):
    """What the engine needs from a store while it executes a run.

    Every write carries the ``fence`` of the run's claim; a store refuses a
    stale one (S8). :class:`~stalwart.stores.base.Store` is the full interface.
    """

    async def record_step(self, run_id: str, fence: int, step: StoredStep) -> StoredStep:
        """Record ``step`` unless its key is taken; return the record that won (S3)."""
        ...

    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        """Consume the oldest unconsumed signal ``name`` for ``step_key``, if any."""
        ...

    async def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        """The runs with these ids that exist."""
        ...
