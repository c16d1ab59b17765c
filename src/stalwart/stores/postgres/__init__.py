"""The PostgreSQL store: any number of worker processes, on any number of machines.

Same semantics as :class:`~stalwart.stores.sqlite.SQLiteStore`, method by
method; what differs is how concurrency is handled:

* **Connections.** A pool (psycopg_pool, ``pool_min``/``pool_max``) serves
  every operation except step records, which go through one dedicated
  connection in autocommit mode. Every connection is in autocommit mode: a
  single statement is one round trip that commits; multi-statement operations
  open an explicit transaction.
* **Group commit.** A step record with nothing in flight is written at once
  by its caller: one ``INSERT ... SELECT ... FROM (VALUES ...)`` statement,
  one round trip, one commit. Records that arrive while a write is in flight
  are written together by the next statement (a writer task drains them;
  large batches travel as one array per column), so a ``gather`` of a
  thousand steps costs a handful of commits, with no timer and no added
  latency. A record the server refuses for good (a NUL in a name) fails
  alone: its batch is written again in halves, so the records of other runs
  beside it still go in. A caller resumes only after the commit holding its
  record (``durability=commit``, the default). With ``durability=group`` the
  step connection runs with ``synchronous_commit=off``: a crash of the
  *server* can lose the last few hundred milliseconds of records, always a
  suffix (the WAL is ordered, S6); a crash of the worker loses nothing it was
  told was recorded. An execution that may have lost records in such a
  crash is stopped before it writes past them (its writes fail with
  :class:`~stalwart.core.errors.StoreUnavailable`), and the run resumes by replay
  from what survived; see ``PostgresSteps._write_together`` in :mod:`.steps`.
* **Fencing.** A step record checks the run's fence with ``FOR SHARE`` in the
  same statement, so a claim that bumps the fence and a stale write are
  serialized by the row lock: a write either lands before the takeover (and
  the new owner's replay sees it) or is refused. A record the statement
  left out is refused with :class:`~stalwart.core.errors.StaleLeaseError` if its
  fence is stale, even when its key has a record already: a replaced worker
  never gets the new owner's result as its own. Claims are atomic
  conditional ``UPDATE``s; ``claim_due`` picks candidates with ``SELECT ...
  FOR UPDATE SKIP LOCKED``, so two workers never receive the same run and
  never wait for each other.
* **Leases** are measured on the server's clock (``clock_timestamp()``), so
  clock skew between worker machines cannot make a lease look expired early.
  Timer wake times are recorded by the engine on the worker's clock, as on
  SQLite.
* **Retries.** Transient failures (connection lost, server restarting or
  out of connections, serialization failures, deadlocks, lock or statement
  timeouts, no pooled connection in time) are retried with bounded
  exponential backoff for up to ``retry_for`` seconds, then reported as
  :class:`~stalwart.core.errors.StoreUnavailable` naming the server. Errors the
  server would give again (a value too large for an index, bad data, a
  broken constraint) are raised at once as a plain
  :class:`~stalwart.core.errors.StoreError`, never retried (S14). Every
  operation is safe to repeat: step records are idempotent by key (a retry
  whose first attempt did commit finds its own record and returns it),
  signals carry a client-made id, and a run left held by this owner by a
  claim whose reply was lost is claimed again (as on SQLite, a run held by
  its own owner but not live there counts as abandoned).
* **Waking** is by LISTEN/NOTIFY (:mod:`.listen`): a write that makes a run
  ready, asks one to stop or finishes one notifies a channel of the schema
  once it has committed, and each runner's one listening connection wakes
  its loop, so a run enqueued or signalled elsewhere starts in
  milliseconds. Polling stays underneath: the runner asks ``claim_due`` and
  ``next_wake`` every ``poll_interval`` anyway (a few indexed queries,
  whatever the number of waiting runs), and that is all it does while the
  listening connection is down.
* **Schema** lives in its own PostgreSQL schema (``schema=stalwart`` by
  default), created and migrated on open under an advisory lock, so workers
  starting together do not race.

URL: ``postgresql://user:pass@host:5432/db?schema=stalwart&pool_min=1&pool_max=10``;
the options below are ours and removed before the URL reaches libpq; any other
query parameter (``sslmode``, ``connect_timeout``, ...) is passed through.

=================  ==========  ==============================================
option             default     meaning
=================  ==========  ==============================================
``schema``         stalwart    PostgreSQL schema holding the tables
``pool_min``       1           connections kept open in the pool
``pool_max``       10          most connections in the pool (plus one for steps)
``pool_timeout``   10          seconds to wait for a pooled connection
``retry_for``      15          seconds a failing operation is retried
``durability``     commit      ``commit`` or ``group`` (see above)
``migrate``        true        ``false``: never create or migrate the tables;
                               refuse a schema at another version
                               (``stalwart store ddl`` prints the SQL)
=================  ==========  ==============================================

The store is split by concern: :mod:`.schema` (tables, migrations, errors),
:mod:`.statements` (its own SQL), :mod:`.connection` (pool, retries, fences),
:mod:`.runs`, :mod:`.claims`, :mod:`.steps`, :mod:`.signals`, :mod:`.schedules`,
:mod:`.memory`; the SQL and
rules it shares with SQLite are in :mod:`stalwart.stores.sql`.
"""

from __future__ import annotations

from .claims import PostgresClaims
from .dump import PostgresDump
from .listen import PostgresListen
from .memory import PostgresMemory
from .runs import PostgresRuns
from .schedules import PostgresSchedules
from .schema import SCHEMA_VERSION
from .signals import PostgresSignals
from .steps import PostgresSteps
from .versions import PostgresVersions

__all__ = ["SCHEMA_VERSION", "PostgresStore"]


class PostgresStore(
    PostgresRuns,
    PostgresClaims,
    PostgresSteps,
    PostgresSignals,
    PostgresDump,
    PostgresSchedules,
    PostgresMemory,
    PostgresVersions,
    PostgresListen,
):
    """A Store in a PostgreSQL database. Build from a URL with :meth:`from_url`."""
