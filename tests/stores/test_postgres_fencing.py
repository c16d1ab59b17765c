"""What the PostgreSQL store owes a worker it can no longer trust, and a
caller whose request can never succeed (PostgreSQL side).

* A heartbeat tells the owner which of its runs it lost (taken over,
  finished elsewhere, gone), so the runner stops executing them.
* Every step write checks the fence, the no-op write of an existing key
  included, under a share lock that a takeover has to wait for.
* A failure the server will repeat (a run id too long for its index) fails at
  once as a plain StoreError; only transient failures are retried, and one
  that outlasts the retries is a StoreUnavailable.

These run against the shared server (``STALWART_TEST_PG``) in a schema of
their own, dropped at the end.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from tests.conftest import PG_URL
from tests.records import claimed_run, step_record

from stalwart.core.errors import StaleLeaseError, StoreError, StoreUnavailable
from stalwart.core.ledger import RunRecord, StepRecord

psycopg = pytest.importorskip("psycopg") if not os.environ.get("CI") else __import__("psycopg")

from psycopg import errors as pg_errors  # noqa: E402
from psycopg_pool import PoolTimeout  # noqa: E402

from stalwart.stores import postgres as pg  # noqa: E402
from stalwart.stores.postgres import PostgresStore  # noqa: E402
from stalwart.stores.postgres import schema as postgres_schema  # noqa: E402

A = "host-a:1:a"
B = "host-b:2:b"


@pytest.fixture
def pg_store_options() -> dict[str, object]:
    """The shared store's options, plus a name for its connections of their
    own in pg_stat_activity, where the lock tests below watch backends, so
    the view tells this test's store apart from everything else there."""
    return {"retry_for": 5, "application_name": f"stalwart-trust-{uuid.uuid4().hex[:8]}"}


def _step(key: str, output: str = "1") -> StepRecord:
    return step_record(key, output, args="[]", started_at=1.0, finished_at=2.0)


async def _taken_over(store: PostgresStore, run_id: str) -> tuple[int, int]:
    """A holds ``run_id``, its lease runs out, B claims it: (A's fence, B's)."""
    await store.create_run(RunRecord(run_id, "p", "{}"))
    old = await store.claim(run_id, A, 0.01)
    assert old is not None
    await asyncio.sleep(0.05)  # the lease expires, on the server's clock
    new = await store.claim(run_id, B, 30.0)
    assert new is not None and new.fence == old.fence + 1
    return old.fence, new.fence


def _rid() -> str:
    return f"r-{uuid.uuid4().hex[:12]}"


# -- heartbeats --------------------------------------------------------------------
async def test_the_heartbeat_names_the_runs_its_owner_lost(pg_store: PostgresStore) -> None:
    held, cancel, finished, gone = _rid(), _rid(), _rid(), _rid()
    for run_id in (held, cancel):
        await claimed_run(pg_store, run_id, owner=A, lease=30.0)
    fence = await claimed_run(pg_store, finished, owner=A, lease=30.0)
    await pg_store.finish_run(finished, fence, "succeeded", "1", None)
    await pg_store.request_cancel(cancel)
    taken = _rid()
    await _taken_over(pg_store, taken)

    beat = await pg_store.heartbeat(A, 60.0, [held, cancel, finished, taken, gone])

    assert beat.cancel == [cancel]
    assert sorted(beat.lost) == sorted([finished, taken, gone])
    after = await pg_store.get_run(taken)
    assert after is not None and after.owner == B  # the beat did not take it back
    assert (await pg_store.heartbeat(A, 60.0, [])).lost == []


# -- fencing -------------------------------------------------------------------------
async def test_a_replaced_writer_is_refused_for_new_and_existing_keys(
    pg_store: PostgresStore,
) -> None:
    run_id = _rid()
    old, new = await _taken_over(pg_store, run_id)
    assert (await pg_store.record_step(run_id, new, _step("1", "new"))).output == "new"

    # The stale writer learns it lost the run, whether or not the key has a
    # record: it must never get the new owner's record back as its own.
    with pytest.raises(StaleLeaseError, match="stale"):
        await pg_store.record_step(run_id, old, _step("1", "old"))
    with pytest.raises(StaleLeaseError, match="stale"):
        await pg_store.record_step(run_id, old, _step("2", "old"))
    # In one batch with a valid write of the same key, too.
    results = await asyncio.gather(
        pg_store.record_step(run_id, new, _step("3", "new")),
        pg_store.record_step(run_id, old, _step("3", "old")),
        pg_store.record_step(run_id, old, _step("1", "old")),
        return_exceptions=True,
    )
    assert isinstance(results[0], StepRecord) and results[0].output == "new"
    assert isinstance(results[1], StaleLeaseError)
    assert isinstance(results[2], StaleLeaseError)
    steps = await pg_store.load_steps(run_id)
    assert {k: s.output for k, s in steps.items()} == {"1": "new", "3": "new"}

    # The owner itself still gets the first record back for a key (S3).
    assert (await pg_store.record_step(run_id, new, _step("1", "again"))).output == "new"
    # Once the run has finished, nobody writes to it, the last owner included.
    await pg_store.finish_run(run_id, new, "succeeded", "1", None)
    for key in ("1", "4"):
        with pytest.raises(StaleLeaseError, match="succeeded"):
            await pg_store.record_step(run_id, new, _step(key))


async def _wait_until_blocked(pid: int, by: int) -> None:
    """Until backend ``pid`` waits for a lock that backend ``by`` holds."""
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        for _ in range(500):
            cur = await conn.execute("SELECT pg_blocking_pids(%s)", (pid,))
            row = await cur.fetchone()
            if row is not None and by in row[0]:
                return
            await asyncio.sleep(0.01)
    raise AssertionError(f"backend {pid} never waited for {by}")


async def test_a_takeover_waits_for_a_step_write_in_flight(
    pg_store: PostgresStore, pg_schema: str
) -> None:
    """The step write share-locks its run: a claim that bumps the fence in the
    middle of it waits for its commit, so the write lands before the
    takeover (the new owner's replay sees it) instead of after it."""
    run_id = _rid()
    fence = await claimed_run(pg_store, run_id, owner=A, lease=30.0)
    s = f'"{pg_schema}"'
    async with (
        await psycopg.AsyncConnection.connect(PG_URL) as blocker,
        await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as claimer,
    ):
        # An uncommitted row for the same key holds the step write after it
        # has taken its locks, so it stays in flight until we let it go.
        await blocker.execute(
            f"INSERT INTO {s}.steps (run_id, key, name, kind, args_hash, attempts, "
            "started_at, finished_at) VALUES (%s, '1', 'p', 'call', 'h', 1, 0, 0)",
            (run_id,),
        )
        writer = await pg_store._step_connection()
        write = asyncio.create_task(pg_store.record_step(run_id, fence, _step("1", "mine")))
        await _wait_until_blocked(writer.info.backend_pid, by=blocker.info.backend_pid)

        takeover = asyncio.create_task(
            claimer.execute(
                f"UPDATE {s}.runs SET fence = fence + 1, owner = %s WHERE id = %s", (B, run_id)
            )
        )
        await _wait_until_blocked(claimer.info.backend_pid, by=writer.info.backend_pid)
        assert not takeover.done()

        await blocker.rollback()
        assert (await asyncio.wait_for(write, 10)).output == "mine"
        await asyncio.wait_for(takeover, 10)
    assert (await pg_store.load_steps(run_id))["1"].output == "mine"
    for key in ("1", "2"):
        with pytest.raises(StaleLeaseError):
            await pg_store.record_step(run_id, fence, _step(key))


async def test_a_claim_that_commits_first_refuses_the_write(
    pg_store: PostgresStore, pg_schema: str
) -> None:
    """The other order: a takeover holding the run row makes the step write
    wait, and then refuses it on the new fence."""
    run_id = _rid()
    fence = await claimed_run(pg_store, run_id, owner=A, lease=30.0)
    async with await psycopg.AsyncConnection.connect(PG_URL) as claimer:
        await claimer.execute(
            f'UPDATE "{pg_schema}".runs SET fence = fence + 1, owner = %s WHERE id = %s',
            (B, run_id),
        )
        writer = await pg_store._step_connection()
        write = asyncio.create_task(pg_store.record_step(run_id, fence, _step("1")))
        await _wait_until_blocked(writer.info.backend_pid, by=claimer.info.backend_pid)
        await claimer.commit()
        with pytest.raises(StaleLeaseError, match="stale"):
            await asyncio.wait_for(write, 10)
    assert await pg_store.load_steps(run_id) == {}


# -- transient or permanent ------------------------------------------------------------
async def test_a_run_id_too_long_for_the_index_fails_at_once(pg_store: PostgresStore) -> None:
    run_id = secrets.token_hex(5000)  # 10,000 characters that do not compress
    with pytest.raises(StoreError) as caught:
        await pg_store.create_run(RunRecord(run_id, "p", "{}"))
    assert not isinstance(caught.value, StoreUnavailable)
    assert pg_store.retries == 0
    message = str(caught.value)
    assert "ProgramLimitExceeded" in message and "index row" in message
    assert "10000 characters" in message and len(message) < 1000
    assert pg_store.describe()["retries"] == 0


async def test_bad_data_fails_at_once(pg_store: PostgresStore) -> None:
    with pytest.raises(StoreError) as caught:
        await pg_store.create_run(RunRecord(_rid(), "p", '{"a": "\x00"}'))
    assert not isinstance(caught.value, StoreUnavailable)
    assert "NUL" in str(caught.value)
    assert pg_store.retries == 0


async def _kill_backends(app: str) -> None:
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (app,),
        )


async def test_a_dropped_connection_is_retried(pg_schema: str, pg_url: Callable[..., str]) -> None:
    app = f"stalwart-trust-{uuid.uuid4().hex[:8]}"
    s = PostgresStore.from_url(pg_url(pg_schema, retry_for=10, application_name=app, pool_min=2))
    await s.open()
    try:
        run_id = _rid()
        fence = await claimed_run(s, run_id, owner=A, lease=30.0)
        before = s.retries
        await _kill_backends(app)  # AdminShutdown, then a lost connection
        assert (await s.record_step(run_id, fence, _step("1", "7"))).output == "7"
        assert s.retries > before
    finally:
        await s.close()


async def test_a_store_down_past_the_retries_is_unavailable(
    pg_schema: str, monkeypatch: pytest.MonkeyPatch, pg_url: Callable[..., str]
) -> None:
    s = PostgresStore.from_url(pg_url(pg_schema, retry_for=0.3))
    await s.open()
    try:
        assert s._pool is not None

        def down(*a: Any, **k: Any) -> Any:
            raise pg_errors.CannotConnectNow("the database system is starting up")

        monkeypatch.setattr(s._pool, "connection", down)
        with pytest.raises(StoreUnavailable, match="attempts"):
            await s.get_run("x")
        assert s.retries >= 1
    finally:
        monkeypatch.undo()
        await s.close()


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (PoolTimeout("no connection in 10 s"), True),
        (pg_errors.AdminShutdown("terminating connection"), True),
        (pg_errors.CrashShutdown("crash"), True),
        (pg_errors.CannotConnectNow("starting up"), True),
        (pg_errors.TooManyConnections("too many clients"), True),
        (pg_errors.SerializationFailure("could not serialize"), True),
        (pg_errors.DeadlockDetected("deadlock"), True),
        (pg_errors.LockNotAvailable("lock timeout"), True),
        (pg_errors.QueryCanceled("statement timeout"), True),
        (pg_errors.ConnectionFailure("connection failure"), True),
        (pg_errors.ProgramLimitExceeded("index row requires 10016 bytes"), False),
        (pg_errors.StringDataRightTruncation("value too long"), False),
        (pg_errors.InvalidTextRepresentation("invalid input syntax"), False),
        (pg_errors.UniqueViolation("duplicate key"), False),
        (pg_errors.UndefinedTable("no such table"), False),
        (pg_errors.InsufficientPrivilege("permission denied"), False),
        (psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_errors_are_told_apart_by_what_a_retry_would_do(
    exc: psycopg.Error, transient: bool
) -> None:
    assert postgres_schema.transient(exc) is transient
    assert isinstance(postgres_schema.classified(exc, "doing it"), StoreUnavailable) is transient


async def test_a_long_run_id_is_cut_short_in_messages(pg_store: PostgresStore) -> None:
    run_id = "x" * 5000
    with pytest.raises(StaleLeaseError) as caught:
        await pg_store.record_step(run_id, 1, _step("1"))
    assert "no longer in the store" in str(caught.value) and len(str(caught.value)) < 500


# -- group mode: which life of the server ----------------------------------------------
async def test_stores_opening_together_agree_on_the_server_life(
    pg_fresh_schema: str, pg_url: Callable[..., str]
) -> None:
    """Group mode tells a crash by the token in an unlogged table; stores
    that make it at the same moment must still end up with one token, or
    each would take the other's records for lost."""
    stores = [
        PostgresStore.from_url(pg_url(pg_fresh_schema, durability="group", pool_min=0))
        for _ in range(6)
    ]
    try:
        await asyncio.gather(*(s.open() for s in stores))
        tokens = {s._token for s in stores}
        assert len(tokens) == 1 and None not in tokens
        with psycopg.connect(PG_URL) as conn:
            rows = conn.execute(f'SELECT token FROM "{pg_fresh_schema}".incarnation').fetchall()
        assert [r[0] for r in rows] == list(tokens)
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_a_schema_of_the_previous_version_is_migrated(
    pg_fresh_schema: str, pg_url: Callable[..., str]
) -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        s = f'"{pg_fresh_schema}"'
        conn.execute(f"CREATE SCHEMA {s}")
        conn.execute(
            f"CREATE TABLE {s}.stalwart_schema (version INTEGER PRIMARY KEY, "
            "applied_at DOUBLE PRECISION NOT NULL)"
        )
        for statement in postgres_schema.MIGRATIONS[1]:
            conn.execute(statement.format(s=s))
        conn.execute(f"INSERT INTO {s}.stalwart_schema VALUES (1, 0)")
    store = PostgresStore.from_url(pg_url(pg_fresh_schema, durability="group"))
    await store.open()
    try:
        run_id = _rid()
        fence = await claimed_run(store, run_id, owner=A, lease=30.0)
        await store.record_step(run_id, fence, _step("1"))
        await store.finish_run(run_id, fence, "succeeded", "1", None)
        assert list(await store.load_steps(run_id)) == ["1"]
    finally:
        await store.close()
    with psycopg.connect(PG_URL) as conn:
        versions = conn.execute(
            f'SELECT version FROM "{pg_fresh_schema}".stalwart_schema ORDER BY version'
        ).fetchall()
    assert [v[0] for v in versions] == list(range(1, pg.SCHEMA_VERSION + 1))
