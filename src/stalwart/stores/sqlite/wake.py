"""Wake-ups across processes on SQLite: a short, adaptive poll of ``data_version``.

SQLite has no notifications, but ``PRAGMA data_version`` changes on a
connection whenever *another* connection has committed to the file (this
process's own writes leave it as it is). Reading it costs a few
microseconds: the WAL index in shared memory is compared, no page is read.
So a runner reads it every :data:`FAST` seconds for :data:`HOT_FOR` seconds
after the last change it saw (a human clicking "approve" in a busy app, a
chat turn, a producer enqueuing), and backs off geometrically to one read
every :data:`IDLE` seconds when nothing happens: a run enqueued or signalled
from another process starts within a few milliseconds when the file was
busy, within about :data:`IDLE` when it was quiet, and an idle runner costs
twenty reads a second: about 0.4% of a core on a loaded 2-core machine
(``docs/workers.md``), nearly all of it the event loop's timer, not SQLite.

A change says only that someone committed something: the runner reads the
tables (a claim pass: reads only, unless there is a run to take) to find
out what. The runner's own ``poll_interval`` poll stays underneath.

After a change it also reads the few rows of the ``versions`` table, at
most once every :data:`VERSIONS_EVERY` seconds, and says ``"versions"``
when they differ from the last read: a ``stalwart versions set-latest``
or ``retire`` from another process reaches a serving worker at once
instead of at its next heartbeat.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable

from ...core.errors import StoreError
from .writer import SQLiteBase

__all__ = ["FAST", "HOT_FOR", "IDLE", "VERSIONS_EVERY", "SQLiteWake"]

#: Seconds between reads while the file is busy.
FAST = 0.002
#: Seconds the reads stay fast after the last change seen.
HOT_FOR = 2.0
#: The longest pause between two reads, when nothing changes.
IDLE = 0.05
#: The shortest pause between two reads of the versions table.
VERSIONS_EVERY = 0.05
#: What is compared of it: a version named the latest or retired changes it.
_VERSIONS = "SELECT version, latest, retired_at FROM versions ORDER BY version"
#: How much longer each quiet pause is than the one before, once cooling.
_GROWTH = 1.5


class SQLiteWake(SQLiteBase):
    """``watch()``: other processes' commits, as wake-ups for a runner."""

    async def watch(self, wake: Callable[[str, str | None], None]) -> None:
        try:
            last = self._data_version()
            versions = self._read(_VERSIONS)
        except StoreError:
            return  # closed already
        # A commit between the runner's last look and the read above would
        # otherwise wait for its poll: look once more, now.
        wake("any", None)
        pause = FAST
        hot_until = time.monotonic() + HOT_FOR
        failing = False
        look_at_versions = False  # a change not yet compared with the versions read
        next_versions = 0.0  # monotonic: the versions are read no sooner
        while True:
            await asyncio.sleep(pause)
            if self._db is None:
                return  # the store was closed
            try:
                seen = self._data_version()
                if seen != last:
                    look_at_versions = True
                if look_at_versions and time.monotonic() >= next_versions:
                    look_at_versions = False
                    next_versions = time.monotonic() + VERSIONS_EVERY
                    now_versions = self._read(_VERSIONS)
                    if now_versions != versions:
                        versions = now_versions
                        wake("versions", None)
            except StoreError as exc:
                if not failing:  # once per failure, not once per read
                    failing = True
                    wake("lost", str(exc))
                pause = IDLE
                continue
            if failing:
                failing = False
                wake("any", None)  # it reads again: look at what happened meanwhile
            if seen != last:
                last = seen
                wake("any", None)
                hot_until = time.monotonic() + HOT_FOR
                pause = FAST
            elif time.monotonic() > hot_until:
                pause = min(pause * _GROWTH, IDLE)

    def _data_version(self) -> int:
        """The file's change counter as this connection sees it."""
        try:
            row = self.db.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error as exc:
            raise self._error("cannot read data_version", exc) from exc
        return int(row[0])
