"""Rules both SQL stores apply in Python, written once.

Each was written twice before (once per store) and had started to drift; a
change to one of them now changes both stores.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.errors import StaleLeaseError, StoreError
from ...core.ledger import TERMINAL, StoredStep
from ..base import SPILL_BYTES, SPILL_FIELDS

__all__ = [
    "QueueLimit",
    "check_queue_limits",
    "fence_refusal",
    "full_bucket",
    "merge_payloads",
    "quoted",
    "refill",
    "spilled_values",
    "split_spill",
]


def split_spill(step: StoredStep) -> tuple[str | None, str | None, str | None, int]:
    """``step``'s args, output and error as kept in its row, and the spill bits.

    A value larger than ``SPILL_BYTES`` leaves the hot row for the
    ``payloads`` table (S11): its place in the row is NULL and its bit is set,
    so reading the step knows to look for it.
    """
    args, output, error = step.args, step.output, step.error
    spilled = 0
    if args is not None and len(args) > SPILL_BYTES:
        args, spilled = None, spilled | SPILL_FIELDS[0][1]
    if output is not None and len(output) > SPILL_BYTES:
        output, spilled = None, spilled | SPILL_FIELDS[1][1]
    if error is not None and len(error) > SPILL_BYTES:
        error, spilled = None, spilled | SPILL_FIELDS[2][1]
    return args, output, error, spilled


def spilled_values(step: StoredStep, spilled: int) -> list[tuple[str, str]]:
    """The ``(field, value)`` pairs of ``step`` that go to ``payloads``."""
    return [(fld, getattr(step, fld)) for fld, bit in SPILL_FIELDS if spilled & bit]


def merge_payloads(steps: dict[str, StoredStep], rows: Iterable[Sequence[Any]]) -> None:
    """Put spilled values (rows of ``key, field, data``) back into ``steps``."""
    for key, fld, data in rows:
        step = steps.get(key)
        if step is not None and fld in _SPILLABLE:
            setattr(step, fld, data)


_SPILLABLE = frozenset(fld for fld, _ in SPILL_FIELDS)


# -- queues ----------------------------------------------------------------------
def check_queue_limits(concurrency: int | None, rate: float | None) -> None:
    """Refuse limits no queue can have (before anything is written)."""
    if concurrency is not None and concurrency < 1:
        raise ValueError("a queue's concurrency must be at least 1")
    if rate is not None and rate <= 0:
        raise ValueError("a queue's rate must be > 0 runs per second")


def full_bucket(rate: float | None) -> float:
    """What a rate-limited queue's bucket holds when full: one second of
    starts, and at least one start (a rate under 1/s still starts a run)."""
    return max(rate or 0.0, 1.0)


def refill(rate: float, tokens: float, refilled_at: float, now: float) -> float:
    """The tokens in a bucket last left at ``tokens`` at ``refilled_at``."""
    return min(full_bucket(rate), tokens + max(0.0, now - refilled_at) * rate)


@dataclass(slots=True)
class QueueLimit:
    """What a limited queue may still start in one claim."""

    left: float  # runs it may start (concurrency minus running)
    rate: float | None
    tokens: float  # starts of pending runs the rate allows now

    @classmethod
    def of(
        cls,
        concurrency: int | None,
        rate: float | None,
        tokens: float,
        refilled_at: float,
        running: int,
        now: float,
    ) -> QueueLimit:
        """The limit of a ``queues`` row, with ``running`` runs executing."""
        left = float("inf") if concurrency is None else concurrency - running
        bucket = float("inf") if rate is None else refill(rate, tokens, refilled_at, now)
        return cls(left, rate, bucket)

    def admits(self, status: str) -> bool:
        """Whether a ready run (``pending`` or woken ``suspended``) may start.

        Concurrency counts every run that executes; the rate counts only
        first starts (a run woken from a wait already started once).
        """
        return self.left > 0 and (status != "pending" or self.tokens >= 1)

    def take(self, status: str) -> None:
        self.left -= 1
        if status == "pending" and self.rate is not None:
            self.tokens -= 1


# -- fences ------------------------------------------------------------------------
def fence_refusal(
    run_id: str, fence: int, row: tuple[Any, Any] | None, what: str = ""
) -> StoreError | None:
    """Why a fenced write of ``run_id`` changed nothing, given the run's
    current ``(fence, status)``; None if the fence still holds it."""
    if row is None:
        return StoreError(f"run {quoted(run_id)} is not in the store")
    current, status = row
    if current != fence:
        return StaleLeaseError(
            f"run {quoted(run_id)}: {what}fencing token {fence} is stale (now {current}); "
            "another worker has taken the run over"
        )
    if status in TERMINAL:
        return StaleLeaseError(f"run {quoted(run_id)}: {what}it has already finished ({status})")
    return None


def quoted(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message, cut short if long (a run id of 10 KB
    must not bury the error that names it)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"
