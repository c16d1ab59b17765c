"""Waits: durable sleep, signals, patch markers and child runs (S7).

A part of the :class:`~.engine.Engine`, which makes it and owns it
(``engine.waits``). A wait that cannot end now raises :class:`~.unwind.Suspend`: the runner
records the wake time (or the signal awaited) and lets the run go; it
resumes by replay when the time comes or the signal arrives. In memory
(no ledger) a wait simply awaits.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from .. import codec
from ..errors import SignalRefused, StalwartError, StoreError
from ..ledger import (
    ASKED,
    CHILD_MARK,
    CHILDREN_WAIT,
    TERMINAL,
    asked_key,
    child_group,
    child_run_id,
)
from ..policy import as_policy
from ..recorded import error_to_json
from ..stepargs import step_hash
from .unwind import Suspend

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["Waits"]


class Waits:
    """Durable sleep, signals, patch markers and child runs of one run."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # Signals delivered to a run in memory, by name, and who waits for one.
        self._signals: dict[str, deque[Any]] = {}
        self._once: set[str] = set()  # names delivered ``once`` (tool approvals)
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    async def sleep(self, key: str, seconds: float) -> None:
        """``ctx.sleep``: a long sleep suspends the run (S7)."""
        x = self.engine
        if x.store is None:
            await asyncio.sleep(seconds)
            return
        wake_at = await x.recorded(key, "sleep", lambda: time.time() + seconds)
        remaining = wake_at - time.time()
        if remaining <= 0:
            return
        if remaining <= x.inline_sleep:
            await asyncio.sleep(remaining)
            return
        raise Suspend(wake_at, None)

    async def wait_for(
        self,
        deadline_key: str,
        key: str,
        name: str,
        timeout: float | None,
        asked: dict[str, Any] | None = None,
    ) -> Any:
        """``ctx.wait_for``: the signal's payload, suspending the run until it comes."""
        x = self.engine
        if x.store is None:
            return await self._wait_in_memory(name, timeout)
        if asked is not None:
            await self._note_asked(deadline_key, asked)
        deadline = await x.recorded(
            deadline_key, "deadline", lambda: None if timeout is None else time.time() + timeout
        )
        rec = x.replay.get(key)
        if rec is not None:
            return x.replayed_value(rec, key, f"stalwart.signal:{name}", "{}", "", publish=False)
        payload = await x.write(x.store.take_signal(x.run_id, name, key))
        if payload is not None:
            value = codec.loads(payload, f"signal {name!r} of run {x.run_id!r}")
            await x.record_value(key, f"signal:{name}", value)
            return value
        if deadline is not None and time.time() >= deadline:
            exc = TimeoutError(f"no signal {name!r} within {timeout} s")
            await x.record_value(key, f"signal:{name}", None, error_to_json(exc))
            raise exc
        raise Suspend(deadline, name)

    async def _note_asked(self, deadline_key: str, asked: dict[str, Any]) -> None:
        """Record what a wait asks (``stalwart.ask``), once, before the wait.

        Its key is the wait's deadline key plus ``.0``: derived, never handed
        out by a context (sequence numbers start at 1), so every other key of
        the run stays what it was without this record (S1). A run that
        reached this wait before (its deadline is recorded) writes nothing:
        the record is already there, or the run waited on code that did not
        write one, and it resumes as it was recorded. On replay the note is
        not read back: it is for readers, so a changed prompt is no
        nondeterminism (S5).
        """
        key = asked_key(deadline_key)
        replay = self.engine.replay
        if deadline_key in replay or key in replay:
            return
        await self.engine.record_value(key, ASKED, asked)

    async def _wait_in_memory(self, name: str, timeout: float | None) -> Any:
        box = self._signals.setdefault(name, deque())
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                while not box:
                    fut: asyncio.Future[None] = loop.create_future()
                    self._waiters.setdefault(name, []).append(fut)
                    await fut
        except TimeoutError:
            raise TimeoutError(f"no signal {name!r} within {timeout} s") from None
        return box.popleft()

    def deliver(
        self, name: str, payload: Any, *, once: bool = False, waiting: bool = False
    ) -> None:
        """Hand a signal to a run waiting in memory; ``once`` refuses a name
        handed before, ``waiting`` a name the run does not wait for now
        (:class:`SignalRefused`), as a store does."""
        if waiting and (self._signals.get(name) or not self._waiters.get(name)):
            raise SignalRefused(
                f"run {self.engine.run_id!r} is not waiting for a signal {name!r} now: "
                "another answer came first, or none was asked for; nothing was sent"
            )
        if once:
            if name in self._once:
                raise SignalRefused(f"run {self.engine.run_id!r} has had a signal {name!r} already")
            self._once.add(name)
        self._signals.setdefault(name, deque()).append(payload)
        for fut in self._waiters.pop(name, []):
            if not fut.done():
                fut.set_result(None)

    def takes_patch(self, key: str, change: str) -> bool:
        """Whether a run at ``key`` takes the new path of ``change`` (S5): yes
        live or when its marker is recorded there; no when the run passed
        here on older code (another record at ``key``). The context takes the
        key only on yes, so the old path keeps the keys it had."""
        rec = self.engine.replay.get(key)
        return rec is None or rec.name == f"stalwart.patch:{change}"

    async def mark_patch(self, key: str, change: str) -> None:
        """Record the patch marker at ``key`` the first time a run passes it."""
        x = self.engine
        if x.store is not None and key not in x.replay:
            await x.record_value(key, f"patch:{change}", True)

    # -- child runs ------------------------------------------------------------
    async def spawn(
        self,
        key: str,
        target: Any,
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
        queue: str | None,
        priority: int,
    ) -> list[str]:
        """Start child runs (idempotently: their ids derive from the step key)."""
        pol = as_policy(target)
        pol.declare_types()  # the children's results are read back here
        name = f"stalwart.spawn:{pol.name}"
        x = self.engine
        args_json, args_hash = "{}", ""
        if x.store is not None:
            args_json, args_hash = _children_identity(key, calls)
            rec = x.replay.get(key)
            if rec is not None:
                if not rec.args_hash:  # recorded before children had an identity
                    args_json, args_hash = "{}", ""
                ids: list[str] = x.replayed_value(
                    rec, key, name, args_json, args_hash, publish=False
                )
                return ids
        if x.host is None:
            raise RuntimeError("child runs need a Runner (this run has none)")
        # Keys count from 1 again in each generation of a run that continued
        # as new: a later generation's children are named under it
        # (``<run id>~<generation>~<key>/<n>``), never an earlier one's.
        generation = x.mailbox.generation
        parent = x.run_id if generation == 1 else f"{x.run_id}{CHILD_MARK}{generation}"
        ids = [child_run_id(parent, key, i) for i in range(len(calls))]
        await x.write(x.host.spawn_children(x, pol, calls, ids, queue, priority))
        if x.store is not None:
            await x.record_value(
                key, f"spawn:{pol.name}", ids, args_json=args_json, args_hash=args_hash
            )
        return ids

    async def await_children(self, key: str, ids: list[str]) -> list[dict[str, Any]]:
        """The outcomes of child runs, suspending this run until all are done.

        The last child to finish wakes this run; a timer that backs off with
        the children's age covers any wake-up lost to a race or a crash.
        """
        x = self.engine
        if x.store is None:
            assert x.host is not None
            return await x.host.await_memory_children(ids)
        rec = x.replay.get(key)
        if rec is not None:
            out: list[dict[str, Any]] = x.replayed_value(
                rec, key, "stalwart.children", "{}", "", publish=False
            )
            return out
        runs = {r.id: r for r in await x.write(x.store.get_runs(ids))}
        missing = [i for i in ids if i not in runs]
        if missing:
            # Pruned (or deleted by hand): waiting would never end. Say so.
            raise x.halt(
                StoreError(
                    f"run {x.run_id!r}, step {key}: child run {missing[0]!r} is not in the "
                    f"store ({len(missing)} of {len(ids)} missing); it was deleted before this "
                    "run read it"
                )
            )
        strays = [i for i in ids if runs[i].parent_id != x.run_id]
        if strays:
            # Its wake-up goes to its own parent, and the store would find
            # none of this run's children unfinished: the wait would spin.
            raise x.halt(
                StalwartError(
                    f"run {x.run_id!r}, step {key}: run {strays[0]!r} is not a child of this "
                    f"run (its parent is {runs[strays[0]].parent_id!r}); a run awaits only "
                    "the children it started"
                )
            )
        if all(r.status in TERMINAL for r in runs.values()):
            outcomes = [
                {"status": runs[i].status, "result": runs[i].result, "error": runs[i].error}
                for i in ids
            ]
            await x.record_value(key, "children", outcomes)
            return outcomes
        # The last child to finish wakes this run, and suspending re-checks
        # the children, so the timer is only a safety net (a worker that died
        # between finishing a child and waking us): it backs off to 30 s.
        # Children of several steps (``ctx.results``): wait for the group of
        # the first unfinished one, never one that is done already.
        now = time.time()
        oldest = min((r.created_at for r in runs.values()), default=now)
        backoff = min(30.0, max(0.5, now - oldest))
        pending = next(i for i in ids if runs[i].status not in TERMINAL)
        raise Suspend(now + backoff, f"{CHILDREN_WAIT}{child_group(pending)}")


def _children_identity(
    key: str, calls: list[tuple[tuple[Any, ...], dict[str, Any]]]
) -> tuple[str, str]:
    """What a spawn step is checked against on replay (S5): how many
    children, and a hash of every child's arguments in order. The
    arguments themselves are kept by each child run, not in this record."""
    whole = codec.dumps([[list(a), k] for a, k in calls], f"arguments of step {key}")
    digest = step_hash(whole)
    return codec.dumps({"children": len(calls), "hash": digest}), digest
