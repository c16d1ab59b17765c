"""The embedded SQLite store: one file, WAL mode, any number of processes.

Writes run on the event loop's thread, through one connection per store, and
are cheap (tens of microseconds), so the thread hop of an executor would cost
more than the write. Step records are batched into the open transaction and
committed once every step that finished in the same pass of the event loop has
joined (see ``SQLiteBase._committed`` in :mod:`.writer`): a step's caller
resumes only after the commit (``durability=commit``, the default), yet
concurrent steps that finish together share one commit. With
``durability=group`` the caller does not wait; the commit follows within
``group_delay`` seconds, and a crash can lose that window's records (they are
re-executed on recovery: at least once, never a hole, S6). A failed write can
take the open transaction with it (SQLite rolls it back on a full disk); the
step records batched in it, other runs' included, are then written again, and
if the file cannot take them either, their executions are refused any later
write, so that each run resumes by replay from what was committed.

Every transaction that writes starts with ``BEGIN IMMEDIATE``, so that two
processes never deadlock on a lock upgrade; ``busy_timeout`` bounds how long a
write waits for another process's commit, with the event loop free (SQLite's own
busy handler, which sleeps on the loop's thread, gets 20 ms). No method returns with a
transaction open unless a commit of it is already scheduled, so this process
never holds the file's write lock while it is idle.

Errors are split by what a retry can do: a locked or busy file, or an I/O
error that may pass, raises :class:`~stalwart.core.errors.StoreUnavailable`; a
usage error or a broken file raises a plain :class:`~stalwart.core.errors.StoreError`.

The store is split by concern: :mod:`.schema` (tables, migrations, errors),
:mod:`.writer` (the connection, transactions, group commit), :mod:`.runs`,
:mod:`.claims`, :mod:`.steps`, :mod:`.signals`, :mod:`.schedules`, :mod:`.memory`,
:mod:`.versions`;
the SQL and rules it shares with PostgreSQL are in :mod:`stalwart.stores.sql`.
"""

from __future__ import annotations

from .claims import SQLiteClaims
from .dump import SQLiteDump
from .memory import SQLiteMemory
from .runs import SQLiteRuns
from .schedules import SQLiteSchedules
from .schema import SCHEMA_VERSION
from .signals import SQLiteSignals
from .steps import SQLiteSteps
from .versions import SQLiteVersions
from .wake import SQLiteWake

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]


class SQLiteStore(
    SQLiteRuns,
    SQLiteClaims,
    SQLiteSteps,
    SQLiteSignals,
    SQLiteDump,
    SQLiteSchedules,
    SQLiteMemory,
    SQLiteVersions,
    SQLiteWake,
):
    """A Store in one SQLite file. Build from a URL with :meth:`from_url`."""
