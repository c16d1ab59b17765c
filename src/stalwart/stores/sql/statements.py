"""The SQL both stores run, written once against a small :class:`Dialect`.

A statement is written with ``?`` placeholders and ``{t}`` before each table
name; :meth:`Dialect.sql` turns it into the dialect's text once, when a
store is built. What SQLite and PostgreSQL spell differently (placeholders,
a schema prefix, "starts with", row locks) is a field of the dialect; what
only one of them can do (PostgreSQL's arrays and ``SKIP LOCKED``, SQLite's
one-writer transactions) stays in that store's own modules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from ...core.ledger import CHILDREN_WAIT, RunRecord
from ..base import RUN_COLUMNS
from ..search import search_words
from .columns import RUN_FIELDS, STEP_COLUMNS

__all__ = ["FINISHED", "Dialect", "Statements", "run_rows"]

_run_row = attrgetter(*RUN_FIELDS)


def run_rows(runs: Sequence[RunRecord]) -> list[tuple[Any, ...]]:
    """The values of :data:`~stalwart.stores.base.RUN_COLUMNS` for each run,
    in order: what ``create_runs`` inserts. One C ``attrgetter`` a row, not
    nineteen ``getattr`` calls in a generator (a batch enqueue builds a
    thousand of them, B11)."""
    return list(map(_run_row, runs))


# The statuses of a finished run, as an SQL list.
FINISHED = "('succeeded', 'failed', 'cancelled')"


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one SQL dialect spells what the shared statements need."""

    prefix: str  # before every table name: "" or '"schema".'
    mark: str  # a placeholder: "?" or "%s"
    starts_with: str  # "{col} starts with the parameter", one "?" in it
    contains: str  # "{col} contains the parameter as literal text", one "?" in it
    lock: str  # appended to a SELECT that locks the rows it reads (or "")
    tag_rows: str  # the key and value rows of a JSON object given as one "?"
    # "the run holds every word of the parameter" (:mod:`..search`), one "?"
    # in it; the parameter is the words, each quoted when ``quote_words``.
    text_match: str = ""
    quote_words: bool = False

    def words(self, words: Sequence[str]) -> str:
        """The parameter of :attr:`text_match` for ``words``."""
        if self.quote_words:  # FTS5: a quoted word is never a keyword or an operator
            return " ".join('"' + w.replace('"', '""') + '"' for w in words)
        return " ".join(words)

    def sql(self, text: str) -> str:
        """``text`` (``?`` placeholders, ``{t}`` before tables) in this dialect."""
        text = text.replace("{t}", self.prefix)
        if self.mark != "?":
            text = text.replace("%", "%%").replace("?", self.mark)
        return text


SQLITE = Dialect(
    prefix="",
    mark="?",
    starts_with="instr({col}, ?) = 1",
    contains="instr({col}, ?) > 0",
    lock="",
    tag_rows="json_each(?)",
    text_match="rowid IN (SELECT rowid FROM {t}run_text WHERE run_text MATCH ?)",
    quote_words=True,
)


def postgres(schema: str) -> Dialect:
    """The PostgreSQL dialect for tables in ``schema`` (an identifier, quoted)."""
    return Dialect(
        prefix=f"{schema}.",
        mark="%s",
        starts_with="starts_with({col}, ?)",
        contains="strpos({col}, ?) > 0",
        lock=" FOR UPDATE",
        tag_rows="jsonb_each_text(?::jsonb)",
        text_match="id IN (SELECT run_id FROM {t}run_text "
        "WHERE search @@ plainto_tsquery('simple', ?))",
    )


class Statements:
    """The statements shared by both stores, in one dialect, built once."""

    def __init__(self, d: Dialect) -> None:
        self.dialect = d
        q = d.sql
        marks = ",".join("?" * len(RUN_COLUMNS.split(",")))
        self.get_run = q(f"SELECT {RUN_COLUMNS} FROM {{t}}runs WHERE id = ?")
        self.create_run = q(
            f"INSERT INTO {{t}}runs ({RUN_COLUMNS}) VALUES ({marks}) ON CONFLICT (id) DO NOTHING"
        )
        # A new run's tags as rows (parameters: its id, its tags' JSON).
        self.insert_tags = q(
            "INSERT INTO {t}run_tags (run_id, key, value) SELECT ?, key, value "
            # "WHERE true": SQLite would read ON CONFLICT's ON as a join's.
            f"FROM {d.tag_rows} WHERE true ON CONFLICT (run_id, key) DO NOTHING"
        )
        self.fence_status = q("SELECT fence, status FROM {t}runs WHERE id = ?")
        self.status_locked = q("SELECT status FROM {t}runs WHERE id = ?" + d.lock)
        # Which wait a run holds open (a send ``wait_fence`` checks it).
        self.wait_state = q("SELECT status, waiting_for, fence FROM {t}runs WHERE id = ?")
        # A run waiting for ``waiting_for`` (a signal's name, its children) is ready now.
        self.wake = q(
            "UPDATE {t}runs SET status = 'pending', wake_at = NULL, waiting_for = NULL, "
            "updated_at = ? WHERE id = ? AND status = 'suspended' AND waiting_for = ?"
        )
        children = d.starts_with.replace("{col}", "id")
        self.unfinished_children = q(
            f"SELECT count(*) FROM {{t}}runs WHERE parent_id = ? AND {children} "
            f"AND status NOT IN {FINISHED}"
        )
        # The fenced writes that end an execution; PostgreSQL may append a
        # condition of its own (see PostgresStore's durability=group).
        self.finish = q(
            "UPDATE {t}runs SET status = ?, result = ?, error = ?, owner = NULL, "
            "lease_expires_at = NULL, updated_at = ? WHERE id = ? AND fence = ? "
            f"AND status NOT IN {FINISHED}"
        )
        self.suspend = q(
            "UPDATE {t}runs SET status = ?, wake_at = ?, waiting_for = ?, owner = NULL, "
            "lease_expires_at = NULL, updated_at = ? WHERE id = ? AND fence = ? "
            "AND status = 'running'"
        )
        self.release = q(
            "UPDATE {t}runs SET status = 'pending', owner = NULL, lease_expires_at = NULL, "
            "updated_at = ? WHERE id = ? AND fence = ? AND status = 'running'"
        )
        # Take an unfinished run from every worker (stalwart.timetravel.move):
        # still as it was read (fence, status), not executing under a live
        # lease; parked with no timer, its fence bumped.
        self.park = q(
            "UPDATE {t}runs SET status = 'suspended', wake_at = NULL, waiting_for = ?, "
            "owner = NULL, lease_expires_at = NULL, fence = fence + 1, updated_at = ? "
            "WHERE id = ? AND fence = ? AND status = ? AND (status <> 'running' "
            "OR lease_expires_at < ? OR owner = ?)"
        )
        self.next_wake = q(
            "SELECT min(wake_at) FROM {t}runs WHERE status IN ('suspended', 'pending') "
            "AND wake_at IS NOT NULL"
        )
        # -- steps
        self.steps_of_run = q(f"SELECT {STEP_COLUMNS} FROM {{t}}steps WHERE run_id = ?")
        self.step_by_key = q(f"SELECT {STEP_COLUMNS} FROM {{t}}steps WHERE run_id = ? AND key = ?")
        # Where a run's steps sit (Store.step_positions): the run's step
        # count (the first branch), and the keys and times of its steps
        # finished at or after a time only when that count is not the one
        # the reader has (the second). One statement, so one snapshot: the
        # rows are the ones the count counted. The count's one row drives
        # the join, so when it equals the reader's the steps are never
        # scanned: a quiet poll costs the count alone. The third branch: the
        # record of the run's generation (key "0", kept by continue-as-new),
        # whatever the count, by its key: a new generation as long as the
        # old still shows as another record. No value column is read.
        self.step_positions = q(
            "WITH c AS (SELECT count(*) AS n FROM {t}steps WHERE run_id = ?) "
            "SELECT n, NULL, NULL FROM c UNION ALL "
            "SELECT NULL, key, finished_at FROM c JOIN {t}steps "
            "ON c.n <> ? AND run_id = ? AND finished_at >= ? UNION ALL "
            "SELECT NULL, key, finished_at FROM {t}steps WHERE run_id = ? AND key = ?"
        )
        self.payloads_of_run = q("SELECT key, field, data FROM {t}payloads WHERE run_id = ?")
        self.payloads_by_key = q(
            "SELECT key, field, data FROM {t}payloads WHERE run_id = ? AND key = ?"
        )
        self._steps_by_keys: dict[int, str] = {}
        # -- queues: a queue without limits has no row.
        self.queue_delete = q("DELETE FROM {t}queues WHERE name = ?")
        self.queue_upsert = q(
            "INSERT INTO {t}queues (name, concurrency, rate, tokens, refilled_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
            "concurrency = excluded.concurrency, rate = excluded.rate"
        )
        # -- signals: ``uid`` makes a send idempotent (a retried send is kept once).
        self.signal_sent = q("SELECT 1 FROM {t}signals WHERE uid = ?")
        self.signal_insert = q(
            "INSERT INTO {t}signals (uid, run_id, name, payload, created_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (uid) DO NOTHING"
        )
        self.signal_named = q("SELECT 1 FROM {t}signals WHERE run_id = ? AND name = ? LIMIT 1")
        self.signal_unread = q(
            "SELECT 1 FROM {t}signals WHERE run_id = ? AND name = ? AND consumed_by IS NULL LIMIT 1"
        )
        self.signal_taken = q(
            "SELECT payload FROM {t}signals WHERE run_id = ? AND consumed_by = ? "
            "ORDER BY id LIMIT 1"
        )
        # -- mailboxes (core/engine/mailbox.py): messages are signals of one
        # name; a delivery wakes a run waiting for mail it matches.
        self.mail_wake = q(
            "UPDATE {t}runs SET status = 'pending', wake_at = NULL, waiting_for = NULL, "
            "updated_at = ? WHERE id = ? AND status = 'suspended' AND waiting_for IN (?, ?, ?, ?)"
        )
        self.mail_unread = q(
            "SELECT id, payload FROM {t}signals WHERE run_id = ? AND name = ? "
            "AND consumed_by IS NULL ORDER BY id"
        )
        self.signal_consume = q(
            "UPDATE {t}signals SET consumed_by = ? WHERE id = ? AND consumed_by IS NULL"
        )
        # continue-as-new: a generation's records move to its archive run.
        self.move_steps = q("UPDATE {t}steps SET run_id = ? WHERE run_id = ?")
        self.move_payloads = q("UPDATE {t}payloads SET run_id = ? WHERE run_id = ?")
        self.move_read_signals = q(
            "UPDATE {t}signals SET run_id = ? WHERE run_id = ? AND consumed_by IS NOT NULL"
        )
        self.new_inputs = q(
            "UPDATE {t}runs SET inputs = ?, updated_at = ? WHERE id = ? AND fence = ? "
            "AND status = 'running'"
        )
        self.insert_step = q(
            "INSERT INTO {t}steps (run_id, key, name, kind, args_hash, args, output, error, "
            "attempts, started_at, finished_at, spilled) VALUES (?,?,?,?,?,?,?,?,?,?,?,0) "
            "ON CONFLICT (run_id, key) DO NOTHING"
        )
        # -- retention: a finished child of an unfinished parent is still
        # needed (the parent reads its outcome when it resumes, S12).
        self.prunable = q(
            f"status IN {FINISHED} AND NOT EXISTS (SELECT 1 FROM {{t}}runs AS parent "
            f"WHERE parent.id = runs.parent_id AND parent.status NOT IN {FINISHED})"
        )
        # -- reads for inspectors (list_runs, count_runs, waiting_for_signals)
        signal_wait = d.starts_with.replace("{col}", "waiting_for")
        self.waiting_for_signals = q(
            f"SELECT {RUN_COLUMNS} FROM {{t}}runs WHERE status = 'suspended' "
            f"AND waiting_for IS NOT NULL AND NOT ({signal_wait}) "
            "ORDER BY updated_at, id LIMIT ?"
        )
        self.children_wait = CHILDREN_WAIT

    def tag_filter(self, tags: Mapping[str, str] | None) -> tuple[str, list[Any]]:
        """`` AND`` the run has every one of ``tags`` (or ""), in this
        dialect, and its parameters: for statements built by hand."""
        where: list[str] = []
        params: list[Any] = []
        _tag_filter(tags, where, params)
        if not where:
            return "", []
        return self.dialect.sql(" AND " + " AND ".join(where)), params

    def steps_by_keys(self, n: int) -> str:
        """The rows of a run's steps at ``n`` keys (parameters: the run's id,
        then the keys), built once for each ``n``."""
        sql = self._steps_by_keys.get(n)
        if sql is None:
            marks = ",".join("?" * n)
            sql = self.dialect.sql(
                f"SELECT {STEP_COLUMNS} FROM {{t}}steps WHERE run_id = ? AND key IN ({marks})"
            )
            self._steps_by_keys[n] = sql
        return sql

    def list_runs(
        self,
        *,
        status: str | None,
        limit: int,
        offset: int,
        queue: str | None,
        policy: str | None,
        id_contains: str | None,
        created_after: float | None,
        created_before: float | None,
        before: tuple[float, str] | None,
        tags: Mapping[str, str] | None = None,
        text: str | None = None,
    ) -> tuple[str, list[Any]]:
        """The query (and parameters) of :meth:`Store.list_runs`.

        Newest first by ``(created_at, id)``, so that ties on the clock still
        have one order and a keyset cursor (``before``) resumes exactly after
        the last row of a page. With no filter the index on
        ``(created_at, id)`` serves it, with a status the one on
        ``(status, created_at, id)``: a page costs its rows, however deep.
        """
        where: list[str] = []
        params: list[Any] = []
        for column, value in (("status", status), ("queue", queue), ("policy", policy)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if id_contains is not None:
            where.append(self.dialect.contains.replace("{col}", "id"))
            params.append(id_contains)
        if created_after is not None:
            where.append("created_at >= ?")
            params.append(created_after)
        if created_before is not None:
            where.append("created_at < ?")
            params.append(created_before)
        _tag_filter(tags, where, params)
        if text is not None:
            where.append(self.dialect.text_match)
            params.append(self.dialect.words(search_words(text)))
        if before is not None:
            created_at, run_id = before
            where.append("(created_at, id) < (?, ?)")
            params += [created_at, run_id]
        sql = f"SELECT {RUN_COLUMNS} FROM {{t}}runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        params.append(limit)
        if offset:
            sql += " OFFSET ?"
            params.append(offset)
        return self.dialect.sql(sql), params

    def count_runs(
        self, *, queue: str | None, policy: str | None, tags: Mapping[str, str] | None = None
    ) -> tuple[str, list[Any]]:
        """The query of :meth:`Store.count_runs`: rows of status, queue, count."""
        where: list[str] = []
        params: list[Any] = []
        for column, value in (("queue", queue), ("policy", policy)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        _tag_filter(tags, where, params)
        sql = "SELECT status, queue, count(*) FROM {t}runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        return self.dialect.sql(sql + " GROUP BY status, queue"), params


def _tag_filter(tags: Mapping[str, str] | None, where: list[str], params: list[Any]) -> None:
    """Add to ``where`` that a run has every one of ``tags``: each one a probe
    of the index on ``run_tags (key, value, run_id)``."""
    for key, value in sorted((tags or {}).items()):
        where.append("id IN (SELECT run_id FROM {t}run_tags WHERE key = ? AND value = ?)")
        params += [key, value]


def counts(rows: Sequence[Sequence[Any]]) -> dict[str, dict[str, int]]:
    """``status -> queue -> count`` from rows of ``status, queue, count``."""
    out: dict[str, dict[str, int]] = {}
    for status, queue, n in rows:
        out.setdefault(str(status), {})[str(queue)] = int(n)
    return out
