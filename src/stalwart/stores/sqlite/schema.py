"""The SQLite file: its tables, their migrations, and how its errors read.

The columns and their names are PostgreSQL's (:mod:`stalwart.stores.postgres.schema`);
only the types are SQLite's.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
import time
from textwrap import dedent

from ...core.errors import StoreError
from ..search import SEARCH_CHARS
from ..sql.provisioning import not_provisioned

__all__ = [
    "INDEX_STALE",
    "SCHEMA_VERSION",
    "ddl",
    "is_busy",
    "is_transient",
    "migrate",
    "prepare",
    "stored_version",
]

SCHEMA_VERSION = 10


def _words(value: str) -> str:
    """SQL for the words search reads in the column ``value``: the strings
    and numbers of its JSON (its text if it is not JSON), at most
    :data:`~stalwart.stores.search.SEARCH_CHARS` characters of them."""
    return (
        f"substr(CASE WHEN json_valid({value}) THEN (SELECT group_concat(atom, ' ') "
        f"FROM json_tree({value}) WHERE type IN ('text', 'integer', 'real')) "
        f"ELSE {value} END, 1, {SEARCH_CHARS})"
    )


_note = "INSERT OR IGNORE INTO run_text_stale (run) VALUES (new.rowid);"

#: What a search runs first, in one write transaction: the runs noted
#: stale indexed (their words replacing any they had), the notes cleared.
INDEX_STALE = (
    "INSERT OR REPLACE INTO run_text (rowid, inputs, result, error) SELECT r.rowid, "
    + ", ".join(_words(f"r.{c}") for c in ("inputs", "result", "error"))
    + " FROM run_text_stale s JOIN runs r ON r.rowid = s.run",
    "DELETE FROM run_text_stale",
)

MIGRATIONS: dict[int, str | tuple[str, ...]] = {
    1: """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        policy TEXT NOT NULL,
        inputs TEXT NOT NULL,
        status TEXT NOT NULL,
        result TEXT,
        error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        code_version TEXT NOT NULL DEFAULT '',
        wake_at REAL,
        waiting_for TEXT,
        owner TEXT,
        lease_expires_at REAL,
        fence INTEGER NOT NULL DEFAULT 0,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        queue TEXT NOT NULL DEFAULT 'default',
        priority INTEGER NOT NULL DEFAULT 0,
        parent_id TEXT
    );
    CREATE INDEX runs_by_status ON runs (status, wake_at);
    CREATE INDEX runs_by_owner ON runs (owner) WHERE owner IS NOT NULL;
    CREATE TABLE steps (
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        args TEXT,
        output TEXT,
        error TEXT,
        attempts INTEGER NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL NOT NULL,
        spilled INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, key)
    ) WITHOUT ROWID;
    CREATE TABLE payloads (
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        field TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (run_id, key, field)
    ) WITHOUT ROWID;
    CREATE TABLE signals (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        payload TEXT NOT NULL,
        consumed_by TEXT,
        created_at REAL NOT NULL
    );
    CREATE INDEX signals_by_run ON signals (run_id, name, consumed_by);
    """,
    2: """
    CREATE TABLE queues (
        name TEXT PRIMARY KEY,
        concurrency INTEGER,
        rate REAL,
        tokens REAL NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL DEFAULT 0
    );
    CREATE INDEX runs_by_parent ON runs (parent_id) WHERE parent_id IS NOT NULL;
    """,
    # PostgreSQL's names and idempotent signals; indexes for the listings
    # (list_runs by (created_at, id), with or without a status;
    # waiting_for_signals); a queue row with no limit left is no row.
    3: """
    ALTER TABLE queues RENAME COLUMN updated_at TO refilled_at;
    DELETE FROM queues WHERE concurrency IS NULL AND rate IS NULL;
    ALTER TABLE signals ADD COLUMN uid TEXT;
    CREATE UNIQUE INDEX signals_by_uid ON signals (uid);
    DROP INDEX runs_by_status;
    CREATE INDEX runs_wake ON runs (status, wake_at);
    CREATE INDEX runs_by_status ON runs (status, created_at, id);
    CREATE INDEX runs_created ON runs (created_at, id);
    CREATE INDEX runs_waiting ON runs (updated_at, id)
        WHERE status = 'suspended' AND waiting_for IS NOT NULL;
    """,
    # The trace context a run was started under (stalwart[otel]).
    4: """
    ALTER TABLE runs ADD COLUMN trace TEXT;
    """,
    # Recurring schedules (stalwart.schedules); due ones by next tick.
    5: """
    CREATE TABLE schedules (
        name TEXT PRIMARY KEY,
        policy TEXT NOT NULL,
        inputs TEXT NOT NULL,
        cron TEXT,
        every INTEGER,
        timezone TEXT NOT NULL,
        missed TEXT NOT NULL,
        grace REAL NOT NULL,
        queue TEXT NOT NULL,
        priority INTEGER NOT NULL,
        next_at INTEGER NOT NULL,
        last_at INTEGER,
        paused INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX schedules_due ON schedules (next_at) WHERE NOT paused;
    """,
    # Only timed rows in the wake index: a pending run (every enqueue) has no
    # wake_at, and claims find pending runs by runs_by_status; the index page
    # an enqueue no longer writes is a fifth of its commit (B11).
    6: """
    DROP INDEX runs_wake;
    CREATE INDEX runs_wake ON runs (status, wake_at) WHERE wake_at IS NOT NULL;
    """,
    # Long-term memory (stalwart.core.memory): one value per namespace and
    # key; its text in an FTS5 index keyed by the row's id (porter stemming,
    # as PostgreSQL's 'english' configuration stems), kept by the store.
    7: """
    CREATE TABLE memory (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        namespace TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        text TEXT NOT NULL,
        vector TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        UNIQUE (namespace, key)
    );
    CREATE VIRTUAL TABLE memory_text USING fts5 (text, tokenize = 'porter unicode61');
    """,
    # A run's tags (stalwart.core.tags): as JSON on the run, for readers,
    # and as rows indexed by (key, value), for filters; PostgreSQL's 7 too.
    8: """
    ALTER TABLE runs ADD COLUMN tags TEXT;
    ALTER TABLE schedules ADD COLUMN tags TEXT;
    CREATE TABLE run_tags (
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (run_id, key)
    ) WITHOUT ROWID;
    CREATE INDEX run_tags_by_value ON run_tags (key, value, run_id);
    """,
    # Versions (stalwart.runner.routing): the code versions a run is cleared
    # for besides its own; the serving workers and what each can continue
    # (its version, its policies' code versions, its queues, its last beat);
    # the application versions, which one new runs go to, which are retired.
    # PostgreSQL's 8 too.
    9: """
    ALTER TABLE runs ADD COLUMN cleared TEXT;
    CREATE TABLE workers (
        owner TEXT PRIMARY KEY,
        version TEXT NOT NULL,
        policies TEXT NOT NULL,
        queues TEXT,
        lease REAL NOT NULL,
        started_at REAL NOT NULL,
        beat_at REAL NOT NULL
    );
    CREATE TABLE versions (
        version TEXT PRIMARY KEY,
        latest INTEGER NOT NULL DEFAULT 0,
        retired_at REAL,
        first_seen REAL NOT NULL
    );
    CREATE UNIQUE INDEX versions_latest ON versions (latest) WHERE latest;
    """,
    # Text search (stalwart.stores.search): the words of each run's inputs,
    # result and error in an FTS5 table keyed by the run's rowid. Indexing
    # is the search's: triggers only note the rowids of runs created or
    # changed (run_text_stale, an integer a run: what an enqueue pays), and
    # a search first indexes the runs noted (INDEX_STALE), so an enqueue
    # never pays FTS5's insert. Every run there is noted by the migration.
    # PostgreSQL's 9 too. Statements one by one: a trigger's body holds
    # semicolons.
    10: (
        "CREATE VIRTUAL TABLE run_text USING fts5 "
        "(inputs, result, error, tokenize = 'unicode61 remove_diacritics 0')",
        "CREATE TABLE run_text_stale (run INTEGER PRIMARY KEY)",
        "INSERT INTO run_text_stale (run) SELECT rowid FROM runs",
        "CREATE TRIGGER run_text_new AFTER INSERT ON runs BEGIN " + _note + " END",
        "CREATE TRIGGER run_text_changed AFTER UPDATE OF inputs, result, error ON runs "
        "WHEN new.inputs IS NOT old.inputs OR new.result IS NOT old.result "
        "OR new.error IS NOT old.error BEGIN " + _note + " END",
        "CREATE TRIGGER run_text_gone AFTER DELETE ON runs BEGIN "
        "DELETE FROM run_text WHERE rowid = old.rowid; "
        "DELETE FROM run_text_stale WHERE run = old.rowid; END",
    ),
}

# The longest pause between two attempts to prepare a file another process is
# preparing too.
_MAX_OPEN_BACKOFF = 0.05

# Primary result codes that say "not now" rather than "never": another
# connection holds a lock, the schema changed under a statement, memory or
# disk ran short, or the OS failed an I/O call. The same call may succeed later.
_TRANSIENT_CODES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_PROTOCOL,
        sqlite3.SQLITE_SCHEMA,
    }
)

# What sqlite3 raises for a value it cannot bind (a lone surrogate in a text,
# an integer beyond 64 bits): the value is at fault, so retrying cannot help.
UNBINDABLE = (UnicodeEncodeError, OverflowError)


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether another connection holds the lock ``exc`` met."""
    return _primary_code(exc) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def is_transient(exc: sqlite3.Error) -> bool:
    """Whether retrying may help. Errors the sqlite3 module raises itself
    (a closed connection, a value it cannot bind) carry no code: usage errors."""
    return _primary_code(exc) in _TRANSIENT_CODES


async def prepare(
    db: sqlite3.Connection,
    path: str,
    synchronous: str,
    busy_timeout: float,
    *,
    create: bool = True,
    url: str = "",
) -> None:
    """Switch the file to WAL and migrate it, even while other processes
    open the same new file. With ``create`` false (``migrate=false``) a
    file not at :data:`SCHEMA_VERSION` is refused before anything is written.

    SQLite refuses a journal-mode switch that meets another connection
    with SQLITE_BUSY at once, without waiting in its busy handler, so
    processes that open a brand-new file together would fail. Busy
    answers are retried with jittered backoff, within ``busy_timeout``.
    """
    deadline = time.monotonic() + busy_timeout
    pause = 0.001
    while True:
        try:
            if not create:
                _check(db, path, url)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={synchronous}")
            db.execute("PRAGMA foreign_keys=OFF")
            migrate(db, path)
            return
        except sqlite3.Error as exc:
            if not is_busy(exc) or time.monotonic() + pause > deadline:
                raise
        await asyncio.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, _MAX_OPEN_BACKOFF)


def stored_version(db: sqlite3.Connection) -> int:
    """The file's schema version (0 for a new file), read without a lock."""
    exists = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'stalwart_schema'"
    ).fetchone()
    if exists is None:
        return 0
    (current,) = db.execute("SELECT max(version) FROM stalwart_schema").fetchone()
    return int(current or 0)


def migrate(db: sqlite3.Connection, path: str) -> None:
    """Bring the file's tables to :data:`SCHEMA_VERSION`, in one transaction.

    A file already at that version is only read: opening a store takes no
    write lock, so it never waits for another process's (or store's) writes.
    """
    if stored_version(db) == SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("CREATE TABLE IF NOT EXISTS stalwart_schema (version INTEGER NOT NULL)")
        (current,) = db.execute("SELECT max(version) FROM stalwart_schema").fetchone()
        current = current or 0
        if current > SCHEMA_VERSION:
            raise _newer(path, current)
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in _statements(version):
                db.execute(statement)
            db.execute("INSERT INTO stalwart_schema (version) VALUES (?)", (version,))
        db.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):  # keep the error that got us here
            db.execute("ROLLBACK")
        raise


def _newer(path: str, found: int) -> StoreError:
    return StoreError(
        f"{path} has schema version {found}, newer than this Stalwart "
        f"({SCHEMA_VERSION}); upgrade stalwart"
    )


def _check(db: sqlite3.Connection, path: str, url: str) -> None:
    """Refuse a file not at :data:`SCHEMA_VERSION` (``migrate=false``)."""
    found = stored_version(db)
    if found > SCHEMA_VERSION:
        raise _newer(path, found)
    if found < SCHEMA_VERSION:
        raise not_provisioned(f"SQLite store {path!r}", found, SCHEMA_VERSION, url)


def _statements(version: int) -> list[str]:
    found = MIGRATIONS[version]
    if isinstance(found, tuple):
        return list(found)
    return [dedent(s).strip() for s in found.split(";") if s.strip()]


def ddl(current: int, path: str) -> str:
    """The SQL script that brings a file at schema version ``current`` (0: a
    new file) to :data:`SCHEMA_VERSION`, as :func:`migrate` would, in one
    transaction: every later migration's statements and the
    ``stalwart_schema`` row each records. Any SQLite client can run it."""
    if current > SCHEMA_VERSION:
        raise _newer(path, current)
    head = f"-- Stalwart SQLite schema: version {current} to {SCHEMA_VERSION}"
    if current == SCHEMA_VERSION:
        return f"{head}: nothing to apply\n"
    lines = [head]
    if current == 0:
        lines.append("PRAGMA journal_mode=WAL;")
    lines += [
        "BEGIN IMMEDIATE;",
        "CREATE TABLE IF NOT EXISTS stalwart_schema (version INTEGER NOT NULL);",
    ]
    for version in range(current + 1, SCHEMA_VERSION + 1):
        lines.append(f"-- version {version}")
        lines += [f"{statement};" for statement in _statements(version)]
        lines.append(f"INSERT INTO stalwart_schema (version) VALUES ({version});")
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"
