"""PostgreSQL specifics of the store: pooling, migrations, fencing, SKIP LOCKED
claims across workers, group commit, unreachable servers and retries.

Behaviour shared with SQLite lives in the conformance suite (tests/durable);
these tests exercise what only a server with many connections can get wrong.
They run against a real PostgreSQL (``STALWART_TEST_PG``, by default
postgresql://postgres@127.0.0.1:5432/test) in a schema of their own, dropped
at the end. Without a server they skip, except under CI (``CI`` set), where
they fail.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from tests.conftest import PG_URL
from tests.records import step_record

import stalwart as sw
from stalwart.core.errors import RunNotFound, StaleLeaseError, StoreError, StoreUnavailable
from stalwart.core.ledger import RunRecord, StepRecord

psycopg = pytest.importorskip("psycopg") if not os.environ.get("CI") else __import__("psycopg")

from stalwart.stores import postgres as pg  # noqa: E402
from stalwart.stores.base import SPILL_BYTES  # noqa: E402
from stalwart.stores.postgres import PostgresStore  # noqa: E402
from stalwart.stores.postgres.statements import PgStatements  # noqa: E402


def _rid() -> str:
    return f"r-{uuid.uuid4().hex[:12]}"


def _step(key: str, output: str = "1") -> StepRecord:
    return step_record(key, output, args="[]", started_at=1.0, finished_at=2.0)


async def _running(store: PostgresStore, owner: str = "host-a:1:x") -> RunRecord:
    rec, created = await store.create_run(RunRecord(_rid(), "p", "{}"))
    assert created
    claimed = await store.claim(rec.id, owner, 30)
    assert claimed is not None
    return claimed


# -- URL, pool -------------------------------------------------------------------
def test_url_options_are_ours_and_the_rest_goes_to_libpq() -> None:
    s = PostgresStore.from_url(
        "postgresql://u:secret@db.example:6543/app?schema=agents&pool_min=2&pool_max=7"
        "&sslmode=prefer&retry_for=3&durability=group"
    )
    assert (s.schema, s.pool_min, s.pool_max, s.retry_for, s.durability) == (
        "agents",
        2,
        7,
        3.0,
        "group",
    )
    assert "schema" not in s.conninfo and "pool_max" not in s.conninfo
    assert "sslmode=prefer" in s.conninfo
    assert s.where == "db.example:6543/app"
    assert "secret" not in str(s.describe())
    standby = PostgresStore.from_url(
        "postgresql://u@db1:6543,db2/app?target_session_attrs=read-write&schema=agents"
    )
    assert standby.where == "db1:6543,db2:5432/app"  # each server of a failover URL
    assert "target_session_attrs=read-write" in standby.conninfo
    for bad, match in [
        ("?pool_max=lots", "pool_max must be a whole number"),
        ("?pool_min=5&pool_max=2", "pool_min <= pool_max"),
        ("?schema=a;drop", "plain identifier"),
        ("?durability=maybe", "durability"),
        ("?retry_for=soon", "retry_for must be a number"),
    ]:
        with pytest.raises(StoreError, match=match):
            PostgresStore.from_url(f"postgresql://u@h/db{bad}")


async def test_pool_serves_more_concurrent_calls_than_connections(
    pg_schema: str, pg_url: Callable[..., str]
) -> None:
    s = PostgresStore.from_url(pg_url(pg_schema, pool_min=1, pool_max=2))
    await s.open()
    try:
        ids = [_rid() for _ in range(40)]
        made = await asyncio.gather(*(s.create_run(RunRecord(i, "p", "{}")) for i in ids))
        assert all(created for _, created in made)
        got = await asyncio.gather(*(s.get_run(i) for i in ids))
        assert [g.id for g in got if g is not None] == ids
        stats = s.describe()["pool"]
        assert stats["pool_max"] == 2 and stats["pool_size"] <= 2
    finally:
        await s.close()


# -- schema ----------------------------------------------------------------------
async def test_concurrent_opens_migrate_once(
    pg_fresh_schema: str, pg_url: Callable[..., str]
) -> None:
    stores = [PostgresStore.from_url(pg_url(pg_fresh_schema, pool_min=0)) for _ in range(8)]
    try:
        await asyncio.gather(*(s.open() for s in stores))
        with psycopg.connect(PG_URL) as conn:
            rows = conn.execute(
                f'SELECT version FROM "{pg_fresh_schema}".stalwart_schema ORDER BY version'
            ).fetchall()
        assert [r[0] for r in rows] == list(range(1, pg.SCHEMA_VERSION + 1))
        # Every store works on the one schema.
        rec, _ = await stores[0].create_run(RunRecord(_rid(), "p", "{}"))
        assert await stores[-1].get_run(rec.id) == rec
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_a_newer_schema_is_refused(pg_fresh_schema: str, pg_url: Callable[..., str]) -> None:
    s = PostgresStore.from_url(pg_url(pg_fresh_schema))
    await s.open()
    await s.close()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(
            f'INSERT INTO "{pg_fresh_schema}".stalwart_schema VALUES (%s, 0)',
            (pg.SCHEMA_VERSION + 1,),
        )
    with pytest.raises(StoreError, match="newer than this Stalwart"):
        await PostgresStore.from_url(pg_url(pg_fresh_schema)).open()


# -- fencing ---------------------------------------------------------------------
async def test_a_stale_fence_is_refused_everywhere(pg_store: PostgresStore) -> None:
    first = await pg_store.claim(
        (await pg_store.create_run(RunRecord(_rid(), "p", "{}")))[0].id, "a:1:x", 0.01
    )
    assert first is not None
    await asyncio.sleep(0.05)  # the lease expires (on the server's clock)
    second = await pg_store.claim(first.id, "b:2:y", 30)
    assert second is not None and second.fence == first.fence + 1
    with pytest.raises(StaleLeaseError, match="stale"):
        await pg_store.record_step(first.id, first.fence, _step("1"))
    with pytest.raises(StaleLeaseError):
        await pg_store.finish_run(first.id, first.fence, "succeeded", "1", None)
    with pytest.raises(StaleLeaseError):
        await pg_store.suspend_run(first.id, first.fence, time.time() + 60, None)
    await pg_store.release(first.id, first.fence)  # ignored: not ours any more
    assert (await pg_store.get_run(first.id)).owner == "b:2:y"  # type: ignore[union-attr]
    # The new holder writes; a second result for the key loses (S3).
    assert (await pg_store.record_step(first.id, second.fence, _step("1", "7"))).output == "7"
    assert (await pg_store.record_step(first.id, second.fence, _step("1", "8"))).output == "7"
    assert (await pg_store.load_steps(first.id))["1"].output == "7"


async def test_a_stale_write_in_a_batch_does_not_sink_the_others(pg_store: PostgresStore) -> None:
    ok = await _running(pg_store)
    old = await pg_store.claim(
        (await pg_store.create_run(RunRecord(_rid(), "p", "{}")))[0].id, "a:1:x", 0.01
    )
    assert old is not None
    await asyncio.sleep(0.05)
    assert await pg_store.claim(old.id, "b:2:y", 30) is not None
    results = await asyncio.gather(
        pg_store.record_step(ok.id, ok.fence, _step("1")),
        pg_store.record_step(old.id, old.fence, _step("1")),
        pg_store.record_step(ok.id, ok.fence, _step("2")),
        return_exceptions=True,
    )
    assert isinstance(results[1], StaleLeaseError)
    assert sorted(await pg_store.load_steps(ok.id)) == ["1", "2"]
    assert await pg_store.load_steps(old.id) == {}


async def test_two_stale_writes_in_one_batch_are_each_refused(pg_store: PostgresStore) -> None:
    ok = await _running(pg_store)
    olds = []
    for _ in range(2):
        rec = (await pg_store.create_run(RunRecord(_rid(), "p", "{}")))[0]
        old = await pg_store.claim(rec.id, "a:1:x", 0.01)
        assert old is not None
        olds.append(old)
    await asyncio.sleep(0.05)
    for old in olds:
        assert await pg_store.claim(old.id, "b:2:y", 30) is not None
    # The first write goes at once; the two that arrive while it is in
    # flight are written together, and both are refused.
    async with asyncio.timeout(30):  # a refusal that is not settled leaves its writer waiting
        results = await asyncio.gather(
            pg_store.record_step(ok.id, ok.fence, _step("1")),
            pg_store.record_step(olds[0].id, olds[0].fence, _step("1")),
            pg_store.record_step(olds[1].id, olds[1].fence, _step("1")),
            return_exceptions=True,
        )
    for old, refused in zip(olds, results[1:], strict=True):  # each its own refusal
        assert isinstance(refused, StaleLeaseError) and repr(old.id) in str(refused)
    assert sorted(await pg_store.load_steps(ok.id)) == ["1"]


async def test_with_durability_group_a_second_record_at_a_key_gets_the_first(
    pg_schema: str, pg_url: Callable[..., str]
) -> None:
    store = PostgresStore.from_url(pg_url(pg_schema, durability="group", retry_for=5))
    await store.open()
    try:
        run = await _running(store)
        assert (await store.record_step(run.id, run.fence, _step("k", "1"))).output == "1"
        async with asyncio.timeout(30):
            again = await store.record_step(run.id, run.fence, _step("k", "2"))
        assert again.output == "1"  # first write wins (S3), also when commits are grouped
    finally:
        await store.close()


# -- claims across workers -----------------------------------------------------------
async def test_two_workers_never_claim_the_same_run(
    pg_schema: str, pg_url: Callable[..., str]
) -> None:
    a = PostgresStore.from_url(pg_url(pg_schema, pool_max=4))
    b = PostgresStore.from_url(pg_url(pg_schema, pool_max=4))
    await a.open()
    await b.open()
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        ids = [_rid() for _ in range(300)]
        await a.create_runs([RunRecord(i, "p", "{}", queue=queue) for i in ids])
        got: Counter[str] = Counter()
        owners: dict[str, set[str]] = {}

        async def drain(store: PostgresStore, owner: str) -> None:
            while True:
                # accept() is how a runner skips the runs it executes already.
                claimed = await store.claim_due(owner, 30, 7, lambda r: r.id not in got, [queue])
                if not claimed:
                    return
                for rec in claimed:
                    got[rec.id] += 1
                    owners.setdefault(rec.id, set()).add(owner)
                    assert rec.status == "running" and rec.owner == owner and rec.fence == 1

        await asyncio.gather(
            *(drain(s, f"{name}:{i}:w") for i in range(4) for s, name in ((a, "a"), (b, "b")))
        )
        assert set(got) == set(ids)
        assert max(got.values()) == 1
        assert {o.split(":")[0] for os_ in owners.values() for o in os_} == {"a", "b"}
    finally:
        await a.close()
        await b.close()


async def test_racing_claims_of_one_run_have_one_winner(
    pg_schema: str, pg_url: Callable[..., str]
) -> None:
    stores = [PostgresStore.from_url(pg_url(pg_schema)) for _ in range(3)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        for _ in range(5):
            rid = (await stores[0].create_run(RunRecord(_rid(), "p", "{}")))[0].id
            wins = await asyncio.gather(
                *(s.claim(rid, f"h{i}:{j}:x", 30) for i, s in enumerate(stores) for j in range(4))
            )
            assert sum(w is not None for w in wins) == 1
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_abandoned_runs_are_taken_over_and_cancel_requests_honoured(
    pg_store: PostgresStore,
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    ids = []
    for _ in range(2):
        rec, _ = await pg_store.create_run(RunRecord(_rid(), "p", "{}", queue=queue))
        assert await pg_store.claim(rec.id, "gone-host:1:x", 0.01) is not None
        ids.append(rec.id)
    await pg_store.request_cancel(ids[1])
    await asyncio.sleep(0.05)
    claimed = await pg_store.claim_due("here:2:y", 30, 10, lambda r: True, [queue])
    assert [c.id for c in claimed] == [ids[0]] and claimed[0].fence == 2
    assert (await pg_store.get_run(ids[1])).status == "cancelled"  # type: ignore[union-attr]
    # A live holder elsewhere keeps its runs.
    assert await pg_store.claim_due("there:3:z", 30, 10, lambda r: True, [queue]) == []


async def test_priority_delay_and_queue_filter(pg_store: PostgresStore) -> None:
    q = f"q-{uuid.uuid4().hex[:8]}"
    now = time.time()
    await pg_store.create_runs(
        [
            RunRecord("lo-" + q, "p", "{}", queue=q, priority=0, created_at=now - 2),
            RunRecord("hi-" + q, "p", "{}", queue=q, priority=5, created_at=now),
            RunRecord("later-" + q, "p", "{}", queue=q, priority=9, wake_at=now + 60),
            RunRecord("elsewhere-" + q, "p", "{}", queue=q + "x", priority=9),
        ]
    )
    claimed = await pg_store.claim_due("w:1:x", 30, 10, lambda r: True, [q])
    assert [c.id for c in claimed] == ["hi-" + q, "lo-" + q]
    assert await pg_store.claim("later-" + q, "w:1:x", 30) is None  # delayed start
    wake = await pg_store.next_wake()
    assert wake is not None and wake <= now + 60


async def test_queue_concurrency_limit_holds_across_workers(
    pg_schema: str, pg_url: Callable[..., str]
) -> None:
    a = PostgresStore.from_url(pg_url(pg_schema))
    b = PostgresStore.from_url(pg_url(pg_schema))
    await a.open()
    await b.open()
    q = f"q-{uuid.uuid4().hex[:8]}"
    try:
        await a.set_queue(q, concurrency=3)
        await a.create_runs([RunRecord(_rid(), "p", "{}", queue=q) for _ in range(20)])
        got = await asyncio.gather(
            *(
                s.claim_due(f"w{i}:{i}:x", 30, 10, lambda r: True, [q])
                for i, s in enumerate([a, b] * 3)
            )
        )
        assert sum(len(g) for g in got) == 3
        first = next(r for g in got for r in g)
        await a.finish_run(first.id, first.fence, "succeeded", "1", None)
        assert len(await b.claim_due("w9:9:x", 30, 10, lambda r: True, [q])) == 1
        with pytest.raises(ValueError):
            await a.set_queue(q, concurrency=0)
    finally:
        await a.close()
        await b.close()


async def test_queue_rate_limit(pg_store: PostgresStore) -> None:
    q = f"q-{uuid.uuid4().hex[:8]}"
    await pg_store.set_queue(q, rate=5)
    await pg_store.create_runs([RunRecord(_rid(), "p", "{}", queue=q) for _ in range(20)])
    live: set[str] = set()

    async def claim() -> int:
        got = await pg_store.claim_due("w:1:x", 30, 20, lambda r: r.id not in live, [q])
        live.update(r.id for r in got)
        return len(got)

    assert 1 <= await claim() <= 5  # at most one second's worth at once
    assert await claim() == 0
    await asyncio.sleep(0.45)
    assert 1 <= await claim() <= 3


# -- steps -------------------------------------------------------------------------
async def test_concurrent_steps_share_commits(pg_store: PostgresStore) -> None:
    run = await _running(pg_store)
    statements = 0
    original = PgStatements.record

    def counting(self: PgStatements, n: int, big: bool) -> str:
        nonlocal statements
        statements += 1
        return original(self, n, big)

    big = '"' + "x" * (SPILL_BYTES + 1) + '"'
    outputs = [big if i % 100 == 7 else str(i) for i in range(500)]  # some spill
    PgStatements.record = counting  # type: ignore[method-assign]
    try:
        won = await asyncio.gather(
            *(
                pg_store.record_step(run.id, run.fence, _step(str(i), outputs[i]))
                for i in range(500)
            )
        )
    finally:
        PgStatements.record = original  # type: ignore[method-assign]
    assert [w.output for w in won] == outputs
    steps = await pg_store.load_steps(run.id)
    assert [steps[str(i)].output for i in range(500)] == outputs
    assert statements <= 5  # not 500 round trips


async def test_one_key_twice_in_one_batch_gives_one_winner(pg_store: PostgresStore) -> None:
    run = await _running(pg_store)
    a, b = await asyncio.gather(
        pg_store.record_step(run.id, run.fence, _step("k", "1")),
        pg_store.record_step(run.id, run.fence, _step("k", "2")),
    )
    assert a.output == b.output == "1"


async def test_large_values_are_kept_out_of_the_hot_table(
    pg_store: PostgresStore, pg_schema: str
) -> None:
    run = await _running(pg_store)
    big = '"' + "x" * (SPILL_BYTES + 10) + '"'
    step = step_record("1", big, args=big, started_at=1.0, finished_at=2.0)
    assert (await pg_store.record_step(run.id, run.fence, step)) is step
    loser = step_record("1", '"other"', args=big, started_at=1.0, finished_at=2.0)
    assert (await pg_store.record_step(run.id, run.fence, loser)).output == big
    assert (await pg_store.load_steps(run.id))["1"].args == big
    with psycopg.connect(PG_URL) as conn:
        row = conn.execute(
            f'SELECT args, output, spilled FROM "{pg_schema}".steps WHERE run_id = %s', (run.id,)
        ).fetchone()
        n = conn.execute(
            f'SELECT count(*) FROM "{pg_schema}".payloads WHERE run_id = %s', (run.id,)
        ).fetchone()
    assert row == (None, None, 3) and n == (2,)


# -- signals -------------------------------------------------------------------------
async def test_signals_wake_and_are_taken_once_per_key(pg_store: PostgresStore) -> None:
    run = await _running(pg_store)
    assert await pg_store.suspend_run(run.id, run.fence, None, "go") is True
    woken = await pg_store.send_signal(run.id, "go", '"a"')
    assert woken.status == "pending" and woken.waiting_for is None
    await pg_store.send_signal(run.id, "go", '"b"')
    assert await pg_store.take_signal(run.id, "go", "k1") == '"a"'
    assert await pg_store.take_signal(run.id, "go", "k1") == '"a"'  # idempotent per key
    assert await pg_store.take_signal(run.id, "go", "k2") == '"b"'
    assert await pg_store.take_signal(run.id, "go", "k3") is None
    again = await pg_store.claim(run.id, "host-a:1:x", 30)
    assert again is not None
    await pg_store.send_signal(run.id, "go", '"c"')
    # The awaited signal is already there: the run is not parked.
    assert await pg_store.suspend_run(run.id, again.fence, None, "go") is False
    assert (await pg_store.get_run(run.id)).status == "pending"  # type: ignore[union-attr]
    with pytest.raises(RunNotFound):
        await pg_store.send_signal("no-such-run", "go", "1")


# -- failures ------------------------------------------------------------------------
async def test_unreachable_server_is_a_clear_error() -> None:
    s = PostgresStore.from_url("postgresql://postgres@127.0.0.1:1/test?connect_timeout=2")
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"cannot reach PostgreSQL at 127\.0\.0\.1:1/test"):
        await s.open()
    assert time.monotonic() - started < 10
    runner = sw.Runner("postgresql://postgres@127.0.0.1:1/test")
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:1"):
        await runner.open()


async def _kill_backends(app: str) -> int:
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s",
            (app,),
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def test_connections_killed_mid_run_are_retried(
    pg_schema: str, pg_url: Callable[..., str]
) -> None:
    """Server-side disconnects (what a restart does) cost a retry, not a result."""
    app = f"stalwart-test-{uuid.uuid4().hex[:8]}"
    s = PostgresStore.from_url(pg_url(pg_schema, application_name=app, pool_min=3, retry_for=10))
    await s.open()
    try:
        run = await _running(s)
        for i in range(30):
            if i % 5 == 0:
                assert await _kill_backends(app) >= 1
            won = await asyncio.gather(
                *(s.record_step(run.id, run.fence, _step(f"{i}.{j}", str(j))) for j in range(3))
            )
            assert [w.output for w in won] == ["0", "1", "2"]
            assert (await s.get_run(run.id)) is not None
        steps = await s.load_steps(run.id)
        assert len(steps) == 90
        await s.finish_run(run.id, run.fence, "succeeded", "1", None)
    finally:
        await s.close()


async def test_a_step_whose_commit_reply_is_lost_is_not_duplicated(
    pg_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await _running(pg_store)
    real = psycopg.AsyncCursor.execute
    failed = []

    async def flaky(cur: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        await real(cur, query, params, **kw)
        if not failed and "INSERT INTO" in str(query):
            failed.append(cur.rowcount)  # it committed...
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return cur  # ...but the caller never heard

    # Every statement goes through a cursor, whichever way the store sends it.
    monkeypatch.setattr(psycopg.AsyncCursor, "execute", flaky)
    step = _step("1", "42")
    won = await pg_store.record_step(run.id, run.fence, step)
    assert failed and won is step  # the retry found its own record
    assert list(await pg_store.load_steps(run.id)) == ["1"]


async def test_retries_are_bounded_and_name_the_server(
    pg_schema: str, monkeypatch: pytest.MonkeyPatch, pg_url: Callable[..., str]
) -> None:
    s = PostgresStore.from_url(pg_url(pg_schema, retry_for=0.5))
    await s.open()
    try:
        assert s._pool is not None
        calls = 0

        def down(*a: Any, **k: Any) -> Any:
            nonlocal calls
            calls += 1
            raise psycopg.OperationalError("connection refused")

        monkeypatch.setattr(s._pool, "connection", down)
        with pytest.raises(
            StoreUnavailable, match=r"127\.0\.0\.1:5432/test: reading run .* attempts"
        ):
            await s.get_run("x")
        assert calls > 2 and s.retries == calls - 1
    finally:
        monkeypatch.undo()
        await s.close()


async def test_a_retried_signal_is_delivered_once(
    pg_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await _running(pg_store)
    original = pg_store._with_conn
    lost = []

    async def lose_first_reply(what: str, fn: Any) -> Any:
        async def wrapped(conn: Any, n: int) -> Any:
            out = await fn(conn, n)
            if not lost and what.startswith("sending signal"):
                lost.append(n)
                return await fn(conn, 2)  # as if the reply were lost and retried
            return out

        return await original(what, wrapped)

    monkeypatch.setattr(pg_store, "_with_conn", lose_first_reply)
    await pg_store.send_signal(run.id, "go", '"once"')
    monkeypatch.undo()
    assert lost
    assert await pg_store.take_signal(run.id, "go", "a") == '"once"'
    assert await pg_store.take_signal(run.id, "go", "b") is None


async def test_a_runner_on_postgres_end_to_end(pg_schema: str, pg_url: Callable[..., str]) -> None:
    @sw.policy
    async def add(a: int, b: int) -> int:
        return a + b

    @sw.policy
    async def total(ctx: sw.Context, n: int) -> int:
        parts = await asyncio.gather(*(add(i, i) for i in range(n)))
        return sum(parts)

    rid = _rid()
    async with sw.Runner(pg_url(pg_schema), policies=[total]) as runner:
        assert await runner.run(total, 50, run_id=rid) == 2450
        assert len(await runner.steps(rid)) == 50


async def test_two_closes_at_once_both_return_and_leave_it_closed(
    pg_schema: str, pg_url: Callable[..., str]
) -> None:
    """A runner whose serve() is cancelled closes its store while the code
    that owns the runner closes it too: neither may fail half-way."""
    s = PostgresStore.from_url(pg_url(pg_schema))
    await s.open()
    await s.create_run(RunRecord(_rid(), "p", "{}"))  # a write announces: a task to stop
    await asyncio.gather(s.close(), s.close())
    with pytest.raises(StoreError):
        await s.get_run("anything")
