"""The PostgreSQL schema: its tables, their migrations, and how errors read.

The tables and column names are SQLite's too (:mod:`stalwart.stores.sqlite.schema`);
the types, the indexes that serve ``claim_due``'s ``SKIP LOCKED`` picks, and
the unlogged ``incarnation`` table are PostgreSQL's own.
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from textwrap import dedent
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import TupleRow

from ...core.errors import StoreError, StoreUnavailable
from ..search import SEARCH_CHARS
from ..sql.provisioning import not_provisioned

__all__ = [
    "INDEX_STALE",
    "MIGRATIONS",
    "OPTIONS",
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "check",
    "classified",
    "ddl",
    "incarnation",
    "mask",
    "migrate",
    "refused_for_good",
    "short",
    "stored_version",
    "transient",
    "where_of",
]

SCHEMA_VERSION = 9


def _one_line(text: str) -> str:
    """``text`` on one line (its runs of white space made one space): a
    function's body holds semicolons, and a script split at the end of each
    line that ends in one (as simple appliers split ``store ddl``'s output)
    must not cut it."""
    return " ".join(text.split())


MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE {s}.runs (
            id TEXT PRIMARY KEY,
            policy TEXT NOT NULL,
            inputs TEXT NOT NULL,
            status TEXT NOT NULL,
            result TEXT,
            error TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            code_version TEXT NOT NULL DEFAULT '',
            wake_at DOUBLE PRECISION,
            waiting_for TEXT,
            owner TEXT,
            lease_expires_at DOUBLE PRECISION,
            fence BIGINT NOT NULL DEFAULT 0,
            cancel_requested BOOLEAN NOT NULL DEFAULT false,
            queue TEXT NOT NULL DEFAULT 'default',
            priority INTEGER NOT NULL DEFAULT 0,
            parent_id TEXT
        ) WITH (fillfactor = 80)""",
        # claim_due's candidate lists (pending, woken, running) each have one.
        "CREATE INDEX runs_pending ON {s}.runs (priority DESC, created_at) "
        "WHERE status = 'pending'",
        "CREATE INDEX runs_wake ON {s}.runs (wake_at) "
        "WHERE status IN ('suspended', 'pending') AND wake_at IS NOT NULL",
        "CREATE INDEX runs_running ON {s}.runs (owner) WHERE status = 'running'",
        # list_runs, prune
        "CREATE INDEX runs_by_status ON {s}.runs (status, created_at)",
        "CREATE INDEX runs_created ON {s}.runs (created_at)",
        "CREATE INDEX runs_children ON {s}.runs (parent_id) WHERE parent_id IS NOT NULL",
        """CREATE TABLE {s}.queues (
            name TEXT PRIMARY KEY,
            concurrency INTEGER,
            rate DOUBLE PRECISION,
            tokens DOUBLE PRECISION NOT NULL DEFAULT 0,
            refilled_at DOUBLE PRECISION NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE {s}.steps (
            run_id TEXT NOT NULL,
            key TEXT NOT NULL,
            name TEXT NOT NULL,
            kind TEXT NOT NULL,
            args_hash TEXT NOT NULL,
            args TEXT,
            output TEXT,
            error TEXT,
            attempts INTEGER NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            finished_at DOUBLE PRECISION NOT NULL,
            spilled SMALLINT NOT NULL DEFAULT 0,
            PRIMARY KEY (run_id, key)
        )""",
        """CREATE TABLE {s}.payloads (
            run_id TEXT NOT NULL,
            key TEXT NOT NULL,
            field TEXT NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (run_id, key, field)
        )""",
        """CREATE TABLE {s}.signals (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            uid TEXT NOT NULL UNIQUE,
            run_id TEXT NOT NULL,
            name TEXT NOT NULL,
            payload TEXT NOT NULL,
            consumed_by TEXT,
            created_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX signals_unread ON {s}.signals (run_id, name, id) WHERE consumed_by IS NULL",
        "CREATE INDEX signals_by_run ON {s}.signals (run_id, consumed_by)",
    ),
    # Which life of the server this is (see PostgresStore._write_batch): an
    # unlogged table is emptied by crash recovery and by a failover, and
    # kept by a clean restart, so its one row changes exactly when
    # asynchronously committed records may have been lost.
    2: (
        """CREATE UNLOGGED TABLE {s}.incarnation (
            one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
            token TEXT NOT NULL
        )""",
    ),
    # The listings' order, (created_at, id), with or without a status, and
    # waiting_for_signals; SQLite's version 3 adds the same indexes.
    3: (
        "DROP INDEX {s}.runs_by_status",
        "CREATE INDEX runs_by_status ON {s}.runs (status, created_at, id)",
        "DROP INDEX {s}.runs_created",
        "CREATE INDEX runs_created ON {s}.runs (created_at, id)",
        "CREATE INDEX runs_waiting ON {s}.runs (updated_at, id) "
        "WHERE status = 'suspended' AND waiting_for IS NOT NULL",
    ),
    # The trace context a run was started under (stalwart[otel]).
    4: ("ALTER TABLE {s}.runs ADD COLUMN trace TEXT",),
    # Recurring schedules (stalwart.schedules); SQLite's version 5 too.
    5: (
        """CREATE TABLE {s}.schedules (
            name TEXT PRIMARY KEY,
            policy TEXT NOT NULL,
            inputs TEXT NOT NULL,
            cron TEXT,
            every BIGINT,
            timezone TEXT NOT NULL,
            missed TEXT NOT NULL,
            grace DOUBLE PRECISION NOT NULL,
            queue TEXT NOT NULL,
            priority INTEGER NOT NULL,
            next_at BIGINT NOT NULL,
            last_at BIGINT,
            paused BOOLEAN NOT NULL DEFAULT false,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX schedules_due ON {s}.schedules (next_at) WHERE NOT paused",
    ),
    # Long-term memory (stalwart.core.memory); SQLite's version 7 too. Its
    # text is searched through a generated tsvector ('english': stemmed).
    6: (
        """CREATE TABLE {s}.memory (
            id BIGSERIAL PRIMARY KEY,
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            text TEXT NOT NULL,
            vector TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            search TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
            UNIQUE (namespace, key)
        )""",
        "CREATE INDEX memory_search ON {s}.memory USING GIN (search)",
    ),
    # A run's tags (stalwart.core.tags): as JSON on the run, for readers,
    # and as rows indexed by (key, value), for filters; SQLite's 8 too.
    7: (
        "ALTER TABLE {s}.runs ADD COLUMN tags TEXT",
        "ALTER TABLE {s}.schedules ADD COLUMN tags TEXT",
        """CREATE TABLE {s}.run_tags (
            run_id TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (run_id, key)
        )""",
        "CREATE INDEX run_tags_by_value ON {s}.run_tags (key, value, run_id)",
    ),
    # Versions (stalwart.runner.routing); SQLite's 9 too.
    8: (
        "ALTER TABLE {s}.runs ADD COLUMN cleared TEXT",
        """CREATE TABLE {s}.workers (
            owner TEXT PRIMARY KEY,
            version TEXT NOT NULL,
            policies TEXT NOT NULL,
            queues TEXT,
            lease DOUBLE PRECISION NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            beat_at DOUBLE PRECISION NOT NULL
        )""",
        """CREATE TABLE {s}.versions (
            version TEXT PRIMARY KEY,
            latest BOOLEAN NOT NULL DEFAULT false,
            retired_at DOUBLE PRECISION,
            first_seen DOUBLE PRECISION NOT NULL
        )""",
        "CREATE UNIQUE INDEX versions_latest ON {s}.versions (latest) WHERE latest",
    ),
    # Text search (stalwart.stores.search): the words of each run's inputs,
    # result and error as a tsvector ('simple': no stemming, no stop
    # words) in a table of its own, GIN indexed, so that claims and beats,
    # which rewrite the run's row, never touch it. Indexing is the search's:
    # triggers only note the ids of runs created (one statement a batch) or
    # changed in run_text_stale, and a search first indexes the runs noted
    # (INDEX_STALE), so an enqueue never pays for parsing and the GIN
    # index. Every run there is noted by the migration. SQLite's 10 too.
    9: (
        # The words of one value: the strings and numbers of its JSON (its
        # text if it is not JSON), at most SEARCH_CHARS characters, ASCII
        # punctuation made space so that the parser reads letters and digits
        # only (not e-mails, paths, versions), as SQLite's tokenizer does.
        _one_line(
            rf"""CREATE FUNCTION {{s}}.run_words(value TEXT) RETURNS TEXT
        LANGUAGE plpgsql IMMUTABLE AS $$
        DECLARE
            tree JSONB;
            words TEXT;
        BEGIN
            IF value IS NULL THEN
                RETURN '';
            END IF;
            BEGIN
                tree := value::jsonb;
                SELECT string_agg(v #>> '{{{{}}}}', ' ') INTO words
                    FROM jsonb_path_query(tree, 'strict $.**') v
                    WHERE jsonb_typeof(v) IN ('string', 'number');
            EXCEPTION WHEN others THEN
                words := value;
            END;
            RETURN regexp_replace(left(coalesce(words, ''), {SEARCH_CHARS}),
                '[\s!-/:-@\[-`{{{{-~]+', ' ', 'g');
        END $$"""
        ),
        """CREATE TABLE {s}.run_text (
            run_id TEXT PRIMARY KEY,
            search TSVECTOR NOT NULL
        )""",
        "CREATE INDEX run_text_search ON {s}.run_text USING GIN (search)",
        "CREATE TABLE {s}.run_text_stale (run_id TEXT PRIMARY KEY)",
        "INSERT INTO {s}.run_text_stale (run_id) SELECT id FROM {s}.runs",
        _one_line(
            """CREATE FUNCTION {s}.note_new_runs() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO {s}.run_text_stale (run_id) SELECT id FROM added
            ON CONFLICT DO NOTHING;
            RETURN NULL;
        END $$"""
        ),
        "CREATE TRIGGER run_text_new AFTER INSERT ON {s}.runs REFERENCING NEW TABLE AS added "
        "FOR EACH STATEMENT EXECUTE FUNCTION {s}.note_new_runs()",
        _one_line(
            """CREATE FUNCTION {s}.note_changed_run() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO {s}.run_text_stale (run_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
            RETURN NULL;
        END $$"""
        ),
        "CREATE TRIGGER run_text_changed AFTER UPDATE OF inputs, result, error ON {s}.runs "
        "FOR EACH ROW WHEN (NEW.inputs IS DISTINCT FROM OLD.inputs "
        "OR NEW.result IS DISTINCT FROM OLD.result OR NEW.error IS DISTINCT FROM OLD.error) "
        "EXECUTE FUNCTION {s}.note_changed_run()",
        _one_line(
            """CREATE FUNCTION {s}.forget_run_text() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM {s}.run_text WHERE run_id IN (SELECT id FROM gone);
            DELETE FROM {s}.run_text_stale WHERE run_id IN (SELECT id FROM gone);
            RETURN NULL;
        END $$"""
        ),
        "CREATE TRIGGER run_text_gone AFTER DELETE ON {s}.runs REFERENCING OLD TABLE AS gone "
        "FOR EACH STATEMENT EXECUTE FUNCTION {s}.forget_run_text()",
    ),
}

#: What a search runs first, until it indexes no run: up to 2,000 of the
#: runs noted stale, taken (rows another search holds are skipped), indexed
#: (their words replacing any they had); its one row is how many it took.
#: A run changed while it is indexed is noted again, for the next search.
INDEX_STALE = (
    "WITH taken AS (DELETE FROM {s}.run_text_stale WHERE run_id IN ("
    "SELECT run_id FROM {s}.run_text_stale LIMIT 2000 FOR UPDATE SKIP LOCKED) "
    "RETURNING run_id), "
    "indexed AS (INSERT INTO {s}.run_text (run_id, search) "
    "SELECT r.id, to_tsvector('simple', {s}.run_words(r.inputs) || ' ' || "
    "{s}.run_words(r.result) || ' ' || {s}.run_words(r.error)) "
    "FROM taken JOIN {s}.runs r ON r.id = taken.run_id "
    "ON CONFLICT (run_id) DO UPDATE SET search = excluded.search RETURNING 1) "
    "SELECT (SELECT count(*) FROM taken), (SELECT count(*) FROM indexed)"
)

# Failures worth another attempt, by SQLSTATE: the connection broke (08),
# the server is short of connections, memory or disk (53), lost a race
# and rolled back (40001 serialization, 40P01 deadlock, 40003 outcome
# unknown), timed out on a lock or a statement (55P03, 57014), or is
# shutting down or starting (57P01-57P03). Anything else the server reports
# (a value too large for an index, bad data, a constraint) fails the same
# way next time, so it is raised at once.
_TRANSIENT_CLASSES = frozenset({"08", "53"})
_TRANSIENT_STATES = frozenset(
    {"40001", "40P01", "40003", "55P03", "57014", "57P01", "57P02", "57P03"}
)


Conn = psycopg.AsyncConnection[TupleRow]


def transient(exc: psycopg.Error) -> bool:
    """Whether the same operation may succeed if tried again later."""
    state = exc.sqlstate
    if state is None:
        # Raised by the client, not the server: a lost or refused connection
        # or no pooled connection in time (PoolTimeout) is transient; a value
        # libpq cannot send (a NUL in a string) is not.
        return isinstance(exc, psycopg.OperationalError)
    return state[:2] in _TRANSIENT_CLASSES or state in _TRANSIENT_STATES


OPTIONS = (
    "schema",
    "pool_min",
    "pool_max",
    "pool_timeout",
    "retry_for",
    "durability",
    "migrate",
)
SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def classified(exc: psycopg.Error, what: str) -> StoreError:
    """``exc`` as the store error a runner acts on: transient or for good."""
    kind = StoreUnavailable if transient(exc) else StoreError
    return kind(f"{what}: {type(exc).__name__}: {short(exc)}")


def where_of(params: dict[str, Any]) -> str:
    """host:port/db for messages, never the password; each server of a URL
    that lists several (a primary and its standbys) as host:port."""
    hosts = (params.get("host") or params.get("hostaddr") or "localhost").split(",")
    ports = (params.get("port") or "5432").split(",")
    if len(ports) == 1:
        ports *= len(hosts)
    db = params.get("dbname") or params.get("user") or ""
    if len(ports) != len(hosts):  # libpq refuses it: say what was given
        return f"{','.join(hosts)}:{','.join(ports)}/{db}"
    servers = ",".join(
        f"{h or 'localhost'}:{p or '5432'}" for h, p in zip(hosts, ports, strict=True)
    )
    return f"{servers}/{db}"


def refused_for_good(exc: Exception) -> bool:
    """Whether the server (or libpq) refused a statement for something in
    its data: an error that another statement, with other data, may not meet."""
    return type(exc) is StoreError and isinstance(exc.__cause__, psycopg.Error)


def short(exc: BaseException, limit: int = 500) -> str:
    """``exc``'s text, cut short: a server message can quote a whole value."""
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + " ..."


def mask(url: str) -> str:
    """``url`` with its password hidden, for ``describe()`` and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


async def incarnation(conn: Conn, s: str) -> str:
    """The token naming this life of the server, made by the first
    connection after a crash; every connection until the next crash reads
    the same one."""
    mine = uuid.uuid4().hex
    for _ in range(5):
        # A racing store's token, committed after this statement's
        # snapshot, is invisible to it: the next pass reads it.
        cur = await conn.execute(
            f"WITH made AS (INSERT INTO {s}.incarnation (token) VALUES (%s) "
            "ON CONFLICT DO NOTHING RETURNING token) "
            f"SELECT token FROM made UNION ALL SELECT token FROM {s}.incarnation",
            (mine,),
        )
        row = await cur.fetchone()
        if row is not None:
            return str(row[0])
    # Emptied under us again and again: a transient oddity, retried later.
    raise pg_errors.SerializationFailure("the incarnation token keeps changing")


async def migrate(conn: Conn, s: str, schema: str, where: str) -> None:
    """Create or upgrade the tables in ``s`` to :data:`SCHEMA_VERSION`, under an
    advisory lock so that workers starting together do not race."""
    if await stored_version(conn, s) == SCHEMA_VERSION:
        return  # the usual case: no DDL, no lock, no privileges needed
    lock = int.from_bytes(
        hashlib.blake2b(f"stalwart:{schema}".encode(), digest_size=8).digest(),
        "big",
        signed=True,
    )
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {s}.stalwart_schema ("
            "version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
        )
        current = await stored_version(conn, s)
        if current > SCHEMA_VERSION:
            raise _newer(schema, where, current)
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version]:
                await conn.execute(statement.format(s=s))
            await conn.execute(
                f"INSERT INTO {s}.stalwart_schema (version, applied_at) VALUES (%s, %s)",
                (version, time.time()),
            )


async def stored_version(conn: Conn, s: str) -> int:
    """The schema's version (0 when it has no tables yet), read without a lock."""
    cur = await conn.execute("SELECT to_regclass(%s)", (f"{s}.stalwart_schema",))
    row = await cur.fetchone()
    if row is None or row[0] is None:
        return 0
    cur = await conn.execute(f"SELECT max(version) FROM {s}.stalwart_schema")
    row = await cur.fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def _newer(schema: str, where: str, found: int) -> StoreError:
    return StoreError(
        f"schema {schema!r} at {where} has version {found}, newer than "
        f"this Stalwart ({SCHEMA_VERSION}); upgrade stalwart"
    )


async def check(conn: Conn, s: str, schema: str, where: str, url: str) -> None:
    """Refuse a schema not at :data:`SCHEMA_VERSION` (``migrate=false``),
    running no DDL and taking no lock."""
    found = await stored_version(conn, s)
    if found > SCHEMA_VERSION:
        raise _newer(schema, where, found)
    if found < SCHEMA_VERSION:
        raise not_provisioned(
            f"PostgreSQL schema {schema!r} at {where}", found, SCHEMA_VERSION, url
        )


def ddl(current: int, s: str, schema: str, where: str) -> str:
    """The SQL script that brings schema ``s`` at version ``current`` (0: no
    tables) to :data:`SCHEMA_VERSION`, as :func:`migrate` would, in one
    transaction: the schema, every later migration's statements and the
    ``stalwart_schema`` row each records. psql or any client can run it."""
    if current > SCHEMA_VERSION:
        raise _newer(schema, where, current)
    head = f"-- Stalwart PostgreSQL schema {schema}: version {current} to {SCHEMA_VERSION}"
    if current == SCHEMA_VERSION:
        return f"{head}: nothing to apply\n"
    lines = [
        head,
        "BEGIN;",
        f"CREATE SCHEMA IF NOT EXISTS {s};",
        f"CREATE TABLE IF NOT EXISTS {s}.stalwart_schema ("
        "version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL);",
    ]
    for version in range(current + 1, SCHEMA_VERSION + 1):
        lines.append(f"-- version {version}")
        lines += [f"{dedent(st).strip().format(s=s)};" for st in MIGRATIONS[version]]
        lines.append(
            f"INSERT INTO {s}.stalwart_schema (version, applied_at) "
            f"VALUES ({version}, extract(epoch FROM clock_timestamp()));"
        )
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"
