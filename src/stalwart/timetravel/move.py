"""Move an unfinished run, its child runs, mailboxes and waits to another store.

:func:`move_run` works at a step boundary, in four steps, each safe to do
again, so a mover killed at any point and run again completes the move:

1. **Park** every unfinished run of the tree on the source
   (:meth:`~stalwart.stores.base.Store.park_run`): suspended, waiting for
   :data:`MOVING`, with no timer and its fence bumped. No worker claims a
   parked run, and a former holder's writes are refused (S8). A run a live
   worker is executing is waited for until it suspends, finishes or is let
   go, up to ``timeout``.
2. **Mark** them moved: ended ``cancelled`` with a
   :class:`~stalwart.core.errors.MoveError` naming the target (password
   masked) as their error (:func:`moved_to` reads it). A finished run takes
   no step, no signal and no claim: the source refuses further writes, and
   what it holds of the run is final.
3. **Copy** each run as it is stored (steps, signals and mail, spilled values
   included, as ``runs export`` does) into the target, a moved run parked
   there as it was parked on the source, so no worker of the target takes
   it yet; a copy the target has already is kept.
4. **Release** the target's copies: pending, for its workers, which resume
   them by replay (a wait or a sleep not over suspends again).

A parked or moved run executes nowhere on the source, and the target's copy
only after step 4: the run finishes once, on the target. A signal sent to
the source before the mark is copied with the run; after it, it is refused.
A mover killed after the mark leaves the run on neither store's workers
until it is run again with the same target. Checks
that can fail (no such run, a finished one, an id the target holds, a live
worker that does not let go) are made before anything is written.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, replace

from ..core.errors import MoveError, StalwartError
from ..core.ledger import TERMINAL, RunRecord
from ..core.recorded import error_to_json
from ..core.redact import mask_url, redact
from ..stores.base import RunDump, Store, owner_is_dead
from .export import export_runs

__all__ = ["MOVING", "Moved", "move_run", "moved_to"]

#: What a run parked for a move waits for, on the source and on the target.
MOVING = "stalwart.move"
_MOVED = "moved to "


@dataclass(frozen=True, slots=True)
class Moved:
    """What a move did: ``runs``, the ids now resumable on the target (the run
    and its unfinished children), ``copied``, every id copied (finished
    children included), and ``to``, the target's URL without its password."""

    run_id: str
    runs: list[str]
    copied: list[str]
    to: str


def moved_to(rec: RunRecord) -> str | None:
    """Where ``rec`` was moved (the target's URL, password masked), or None
    if it was not moved."""
    if rec.status != "cancelled" or not rec.error:
        return None
    try:
        err = json.loads(rec.error)
    except ValueError:
        return None
    if not isinstance(err, dict) or err.get("type") != "stalwart.errors.MoveError":
        return None
    message = err.get("message")
    if isinstance(message, str) and message.startswith(_MOVED):
        return message[len(_MOVED) :]
    return None


async def move_run(
    source: Store, target: Store, run_id: str, *, timeout: float = 30.0, poll: float = 0.05
) -> Moved:
    """Move the unfinished run ``run_id`` and its child runs from ``source``
    to ``target`` (both open); see the module's docstring. Called again
    after a mover died halfway, it completes that move.

    Raises :class:`MoveError` before anything is written when there is no
    such run, it has finished, the target holds one of its ids, or a live
    worker kept executing it past ``timeout`` seconds.
    """
    to = mask_url(target.url)
    where = f"run {run_id[:80]!r} ({mask_url(source.url)} -> {to})"
    root = await source.get_run(run_id)
    if root is None:
        raise MoveError(f"{where}: no such run in the source")
    went = moved_to(root)
    if went is None:
        if root.status in TERMINAL:
            raise MoveError(
                f"{where}: it has finished ({root.status}); only an unfinished run moves"
            )
        dumps = await export_runs(source, run_id, children=True)
        await _check_target(target, dumps, where)
        while not all(_parked_or_finished(d.run) for d in dumps):
            await _park(source, [d.run for d in dumps], where, timeout, poll)
            # Read the tree again as parked: a child spawned before its parent
            # was parked is parked on the next pass; nothing changes after that.
            dumps = await export_runs(source, run_id, children=True)
            await _check_target(target, dumps, where)
        moved_error = error_to_json(MoveError(_MOVED + to))
        for dump in reversed(dumps):  # children first, then the run
            if dump.run.status not in TERMINAL:
                await source.finish_run(dump.run.id, dump.run.fence, "cancelled", None, moved_error)
    elif went != to:
        raise MoveError(
            f"{where}: it was moved to {went} already; give that store as the target "
            "to complete the move"
        )
    # Marked: the source takes no more steps and no more signals for these
    # runs, so what is read now is all there is to copy.
    dumps = await export_runs(source, run_id, children=True)
    for dump in dumps:
        await target.import_run(_parked_copy(dump))  # one the target has is kept
    return await _release(target, dumps, to)


async def _check_target(target: Store, tree: list[RunDump], where: str) -> None:
    """The target holds none of the tree's ids, but copies a mover parked there."""
    try:
        held = await target.get_runs([d.run.id for d in tree])
    except StalwartError as exc:
        raise MoveError(f"{where}: the target cannot be read: {redact(str(exc))}") from None
    for rec in held:
        if not (rec.status == "suspended" and rec.waiting_for == MOVING):
            raise MoveError(
                f"{where}: the target already has a run {rec.id[:80]!r} ({rec.status}); "
                "nothing was moved"
            )


def _parked_or_finished(rec: RunRecord) -> bool:
    return rec.status in TERMINAL or (rec.status == "suspended" and rec.waiting_for == MOVING)


def _live(rec: RunRecord, now: float) -> bool:
    """Whether a live worker is executing ``rec``."""
    return (
        rec.status == "running"
        and (rec.lease_expires_at or 0) >= now
        and not owner_is_dead(rec.owner)
    )


async def _park(
    source: Store, runs: list[RunRecord], where: str, timeout: float, poll: float
) -> None:
    """Park every unfinished run of ``runs`` once none is executing; a run
    that changes while it is parked is read and parked again."""
    deadline = time.monotonic() + timeout
    ids = [r.id for r in runs]
    mine: set[str] = set()  # parked by this call: let go again if it gives up
    while True:
        current = {r.id: r for r in await source.get_runs(ids)}
        todo = [r for r in (current.get(i) for i in ids) if r and not _parked_or_finished(r)]
        busy = [r for r in todo if _live(r, time.time())]
        if not todo:
            return
        if not busy:
            for rec in todo:
                if await source.park_run(rec, MOVING):
                    mine.add(rec.id)
            continue  # read again: a run that changed meanwhile is parked next pass
        if time.monotonic() >= deadline:
            for parked in mine:  # let go of what this call parked: pending again
                await source.wake(parked, MOVING)
            held = busy[0]
            raise MoveError(
                f"{where}: run {held.id[:80]!r} is executing on worker "
                f"{(held.owner or '?')[:80]!r}, which did not let it go within {timeout:g}s "
                "(it does at its next durable wait); nothing was moved"
            )
        await asyncio.sleep(poll)


def _parked_copy(dump: RunDump) -> RunDump:
    """``dump`` as the target first keeps it: a run marked moved is parked
    there, unfinished, held by nobody, its fence at least 1 so the first
    claim there replays it; a run that finished before the move is as it was."""
    run = dump.run
    if moved_to(run) is not None:
        run = replace(
            run,
            status="suspended",
            result=None,
            error=None,
            wake_at=None,
            waiting_for=MOVING,
            owner=None,
            lease_expires_at=None,
            cancel_requested=False,
        )
    if dump.steps and run.fence < 1:
        run = replace(run, fence=1)
    return RunDump(run, dump.steps, dump.signals)


async def _release(target: Store, dumps: list[RunDump], to: str) -> Moved:
    """Make the target's parked copies pending for its workers."""
    released: list[str] = []
    for dump in dumps:
        if moved_to(dump.run) is None:
            continue  # finished before the move: copied as it was
        await target.wake(dump.run.id, MOVING)
        released.append(dump.run.id)
    root = dumps[0].run.id
    return Moved(root, released, [d.run.id for d in dumps], to)
