"""The lock table of one execution: the locks of its ``exclusive`` options, by
name, and which of them wait for which.

A lock's name is what an option's ``exclusive`` says (``"policy:<name>"`` for
its own, ``"lock:<name>"`` for a shared one); each execution has its own
table, so a child run started from inside an exclusive call takes its own
locks and is never refused for its parent's. The table answers the two
questions the dispatch asks before a call waits for a lock: is the lock held
by a call this one was made from inside (it would wait for itself), and would
waiting close a cycle of holders each waiting for the next (a wait-for graph,
checked once when the wait would start; nothing polls).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextvars import ContextVar

__all__ = ["LockTable"]

# The locks held by the calls this task runs inside, of every execution.
# Tasks copy it from the task that starts them, so a call made from inside an
# exclusive call sees that lock held. The lock objects, not their names: a
# child run started from inside such a call inherits this variable too, and
# its own lock of the same name is another object.
_HELD: ContextVar[frozenset[asyncio.Lock]] = ContextVar(
    "stalwart_exclusive_held", default=frozenset()
)


class LockTable:
    """The exclusive locks of one execution and its wait-for graph."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        # For each lock, the locks that calls made inside the call holding it
        # are waiting for (how many such calls).
        self._waits: dict[asyncio.Lock, dict[asyncio.Lock, int]] = {}

    def _lock(self, name: str) -> asyncio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        return lock

    def _name(self, lock: asyncio.Lock) -> str:
        # Derived, not kept: only an error message needs it.
        return next(name for name, mine in self._locks.items() if mine is lock)

    def _mine(self, lock: asyncio.Lock) -> bool:
        # A scan of the few locks a run has; a dict keyed by lock would be a
        # second copy of the table to keep in step.
        return any(mine is lock for mine in self._locks.values())

    def reentered(self, name: str) -> bool:
        """Whether the calling task runs inside the call holding ``name``:
        waiting for it would wait for itself."""
        return self._lock(name) in _HELD.get()

    def cycle(self, name: str) -> list[str] | None:
        """The chain of lock names from ``name`` to one the calling task's
        callers hold, each held by a call waiting for the next, if waiting for
        ``name`` would close such a cycle; else None."""
        lock = self._lock(name)
        held = _HELD.get()
        if not held or not lock.locked():
            return None
        paths: dict[asyncio.Lock, list[asyncio.Lock]] = {lock: [lock]}
        queue = [lock]
        while queue:  # breadth first over finitely many locks: ends
            at = queue.pop(0)
            for nxt in self._waits.get(at, ()):
                if nxt in paths:
                    continue
                paths[nxt] = [*paths[at], nxt]
                if nxt in held:
                    return [self._name(lk) for lk in paths[nxt]]
                queue.append(nxt)
        return None

    @contextlib.asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        """Hold lock ``name``, marked held for the calls made inside; while
        waiting for it, each lock of this table the calling task's callers
        hold waits for it."""
        lock = self._lock(name)
        held = [h for h in _HELD.get() if self._mine(h)]
        waits = self._waits
        for h in held:
            edges = waits.setdefault(h, {})
            edges[lock] = edges.get(lock, 0) + 1
        try:
            await lock.acquire()
        finally:
            for h in held:
                edges = waits[h]
                edges[lock] -= 1
                if not edges[lock]:
                    del edges[lock]
                    if not edges:
                        del waits[h]
        try:
            token = _HELD.set(_HELD.get() | {lock})
            try:
                yield
            finally:
                _HELD.reset(token)
        finally:
            lock.release()
