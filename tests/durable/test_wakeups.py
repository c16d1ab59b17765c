"""Wake-ups across processes: a run enqueued or signalled elsewhere starts at once.

What a user relies on: a worker process (and a process awaiting an outcome)
learns of a new run, a signal or a finished run from another process without
waiting for its poll. Every process here polls only every 30 s, so a run
that finishes within the (generous) timeout below was woken, not polled.
On PostgreSQL the listening connection can be killed: the worker still
finishes the work and listens again; and an outsider's NOTIFY with junk in
it does nothing but make a worker look at the store.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import stalwart as sw

APP = Path(__file__).with_name("wake_app.py")
sys.path.insert(0, str(APP.parent))
import wake_app  # noqa: E402

#: Far below the 30 s poll of every process in these tests.
WOKEN_WITHIN = 10.0


def _serve(url: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(APP), url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "serving":
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"the worker did not start: {line!r}\n{err}")
    return proc


@pytest.fixture
def worker(store_url: str) -> Iterator[subprocess.Popen[str]]:
    proc = _serve(store_url)
    try:
        if "postgresql" in store_url:
            _listener_pid(store_url)  # listening before anyone writes
        yield proc
    finally:  # the worker never outlives the test, even one failing in set-up
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        print(err)  # shown when a test fails


def _client(url: str) -> sw.Runner:
    return sw.Runner(url, policies=wake_app.POLICIES, poll_interval=wake_app.POLL)


def _schema(url: str) -> str:
    return url.rpartition("schema=")[2]


def _listener_pid(url: str, other_than: int | None = None) -> int:
    """The backend of the worker's listening connection, once it listens."""
    import psycopg
    from tests.conftest import PG_URL

    channel = f'LISTEN "stalwart_{_schema(url)}_%'
    deadline = time.monotonic() + 20
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        while time.monotonic() < deadline:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE query LIKE %s AND pid <> %s",
                (channel, other_than or 0),
            ).fetchall()
            if rows:
                return int(rows[0][0])
            time.sleep(0.02)
    raise AssertionError("the worker never listened")


def test_a_run_enqueued_elsewhere_starts_and_its_outcome_arrives_without_a_poll(
    store_url: str, worker: subprocess.Popen[str]
) -> None:
    async def go() -> float:
        async with _client(store_url) as client:
            sent = time.time()
            handle = await client.enqueue(wake_app.started)
            began = await asyncio.wait_for(handle.result(), WOKEN_WITHIN)
            return float(began) - sent

    assert asyncio.run(go()) < WOKEN_WITHIN


def test_a_signal_from_another_process_resumes_a_waiting_run_without_a_poll(
    store_url: str, worker: subprocess.Popen[str]
) -> None:
    async def go() -> dict[str, object]:
        async with _client(store_url) as client:
            handle = await client.enqueue(wake_app.wait_go)
            deadline = time.monotonic() + WOKEN_WITHIN
            while (await client.get_run(handle.run_id)).status != "suspended":
                assert time.monotonic() < deadline, "the worker never took the run"
                await asyncio.sleep(0.02)
            await client.signal(handle.run_id, "go", "approved")
            out: dict[str, object] = await asyncio.wait_for(handle.result(), WOKEN_WITHIN)
            return out

    assert asyncio.run(go())["got"] == "approved"


@pytest.fixture
def pg_url(store_url: str) -> str:
    if "postgresql" not in store_url:
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    return store_url


def test_a_killed_listening_connection_is_replaced_and_the_work_still_gets_done(
    pg_url: str, worker: subprocess.Popen[str]
) -> None:
    import psycopg
    from tests.conftest import PG_URL

    first = _listener_pid(pg_url)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        assert conn.execute("SELECT pg_terminate_backend(%s)", (first,)).fetchone() == (True,)

    async def go() -> float:
        async with _client(pg_url) as client:
            handle = await client.enqueue(wake_app.started)  # maybe before it listens again
            return float(await asyncio.wait_for(handle.result(), WOKEN_WITHIN))

    asyncio.run(go())
    assert _listener_pid(pg_url, other_than=first) != first  # listening again
    assert worker.poll() is None


def test_junk_notifications_from_an_outsider_do_no_harm(
    pg_url: str, worker: subprocess.Popen[str]
) -> None:
    import psycopg
    from tests.conftest import PG_URL

    base = f"stalwart_{_schema(pg_url)}"
    junk = [
        "",
        "default",
        "no such queue",
        "__import__('os').system('touch /tmp/pwned')",
        "'; DROP TABLE runs; --",
        "\x1b[31mred\x1b[0m\nforged log line",
        "é" * 3000,
        "x" * 7999,
    ]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for _ in range(50):  # a flood, on every channel, and on one of ours that is not
            for kind in ("ready", "cancel", "settled", "other"):
                for payload in junk:
                    conn.execute("SELECT pg_notify(%s, %s)", (f"{base}_{kind}", payload))

    async def go() -> tuple[list[object], float]:
        async with _client(pg_url) as client:
            before = await client.list_runs()
            handle = await client.enqueue(wake_app.started)
            began = float(await asyncio.wait_for(handle.result(), WOKEN_WITHIN))
            return before, began

    before, _ = asyncio.run(go())
    assert before == []  # nothing was created or claimed on a notification's word
    assert worker.poll() is None
    assert not os.path.exists("/tmp/pwned")


def test_the_approval_example_resumes_without_a_poll(store_url: str) -> None:
    root = Path(__file__).parents[2]
    out = subprocess.run(
        [sys.executable, "examples/approval_wakeup.py", "--store", store_url],
        capture_output=True,
        text=True,
        timeout=25,  # its processes poll every 30 s: only a wake-up finishes it in time
        cwd=root,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["waiting for approval", "train ticket: approved"]
    assert lines[2].startswith("resumed and finished ")
