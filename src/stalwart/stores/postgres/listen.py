"""Wake-ups across processes on PostgreSQL: one LISTEN connection per runner.

The writes that make a run ready (a new run, a signal to a waiting run, the
last child of a waiting parent finishing, a delivered message, a run handed
back or given a timer), ask a run to stop, or finish one, announce it on a
channel of the store's schema once they have committed
(``PostgresBase._announce``), so no listener hears of a row before it can
read it. A runner holds one connection listening to those channels and wakes
its worker loop on each notification: a run enqueued or signalled in another
process starts in milliseconds instead of at the next poll, and a version
named the latest or retired reaches serving workers at once instead of at
their next heartbeat.

A notification is a hint. Its payload (a queue name, or nothing) is only
compared with the queues a runner serves; what to do is always read from
the tables. Anyone who can connect can ``NOTIFY`` these channels: at worst a
runner looks at the store for nothing (its wake-ups coalesce, so a flood
costs a poll at a time, never a task per notification).

When the connection drops, the runner falls back on polling every
``poll_interval`` and the listener reconnects with exponential backoff
(jittered, up to :data:`MAX_BACKOFF`); once it listens again it wakes the
runner, which looks at the store for whatever happened meanwhile. A
connection that goes silent (a half-open socket) is found by a ``SELECT 1``
every :data:`CHECK_EVERY` seconds without notifications.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable

import psycopg

from ...core.errors import StoreUnavailable
from .connection import Conn, PostgresBase
from .schema import short

__all__ = ["CHECK_EVERY", "MAX_BACKOFF", "PostgresListen"]

#: Seconds without a notification after which the connection is checked.
CHECK_EVERY = 10.0
#: How long that check may take before the connection counts as dead.
CHECK_TIMEOUT = 5.0
#: The first and the longest pause before listening again after a failure.
FIRST_BACKOFF = 0.05
MAX_BACKOFF = 5.0


class PostgresListen(PostgresBase):
    """``watch()``: the store's notifications, as wake-ups for a runner."""

    async def watch(self, wake: Callable[[str, str | None], None]) -> None:
        kinds = {channel: kind for kind, channel in self._sql.channel.items()}
        backoff = FIRST_BACKOFF
        while not self._closing:
            try:
                conn = await self._connect()
            except StoreUnavailable as exc:
                wake("lost", str(exc))
            else:
                try:
                    for channel in kinds:  # names of our own making, quoted
                        await conn.execute(f'LISTEN "{channel}"')
                    backoff = FIRST_BACKOFF
                    # Anything may have happened while nobody listened.
                    wake("any", None)
                    wake("versions", None)
                    await self._relay(conn, kinds, wake)
                except (psycopg.Error, TimeoutError, OSError) as exc:
                    wake(
                        "lost",
                        f"PostgreSQL at {self.where}: the connection listening for wake-ups "
                        f"failed: {type(exc).__name__}: {short(exc)}",
                    )
                finally:
                    with contextlib.suppress(Exception):
                        await conn.close()
            if self._closing:
                return
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _relay(
        self,
        conn: Conn,
        kinds: dict[str, str],
        wake: Callable[[str, str | None], None],
    ) -> None:
        """Hand each notification on as a wake-up, until the connection fails."""
        while not self._closing:
            async for note in conn.notifies(timeout=CHECK_EVERY):
                kind = kinds.get(note.channel)
                if kind is not None:
                    wake(kind, note.payload if kind == "ready" else None)
            async with asyncio.timeout(CHECK_TIMEOUT):  # quiet: is it still there?
                await conn.execute("SELECT 1")
