"""Crash tests: real child processes killed with SIGKILL, then recovered.

What a user relies on: after ``kill -9`` at any point, a fresh process
finishes the run with the result an uncrashed run gives, each step is recorded
exactly once, and no step whose record was written before the kill runs again
(only the steps in flight at the kill may run twice).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import random
import signal
import subprocess
from pathlib import Path

import pytest
from tests.crash import kill, spawn

import stalwart as sw

APP = str(Path(__file__).with_name("crash_app.py"))


def _spawn(
    url: str, counter: Path, mode: str, action: str, run_id: str, n: int
) -> subprocess.Popen[str]:
    return spawn(APP, url, counter, mode, action, run_id, n)


def _kill_after(proc: subprocess.Popen[str], lines: int) -> list[str]:
    """Read ``lines`` progress lines, then SIGKILL the child."""
    seen: list[str] = []
    assert proc.stdout is not None
    while len(seen) < lines:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("done"):
            seen.append(line.strip())
    kill(proc)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    return seen


def _finish(url: str, counter: Path, mode: str, run_id: str, n: int) -> tuple[object, str]:
    proc = _spawn(url, counter, mode, "recover", run_id, n)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    result = next(json.loads(line[7:]) for line in out.splitlines() if line.startswith("result "))
    return result, out


async def _recorded_keys(url: str, run_id: str) -> dict[str, str]:
    async with sw.Runner(url, serving=False) as runner:
        return {s.key: s.name for s in await runner.steps(run_id)}


def _executions(counter: Path) -> collections.Counter[str]:
    return (
        collections.Counter(counter.read_text().split())
        if counter.exists()
        else collections.Counter()
    )


@pytest.mark.parametrize("seed", range(5))
def test_sequential_run_killed_at_a_random_step_recovers(
    store_url: str, tmp_path: Path, seed: int
) -> None:
    n = 30
    kill_at = random.Random(seed).randint(1, n - 2)
    counter = tmp_path / "count.txt"
    _kill_after(_spawn(store_url, counter, "sequential", "run", "seq", n), kill_at)
    before = asyncio.run(_recorded_keys(store_url, "seq"))
    assert 0 < len(before) < n
    result, _ = _finish(store_url, counter, "sequential", "seq", n)

    assert result == sum(i * i for i in range(n))  # what an uncrashed run returns
    after = asyncio.run(_recorded_keys(store_url, "seq"))
    assert sorted(after, key=int) == [str(i) for i in range(1, n + 1)]  # each step once
    runs = _executions(counter)
    for key in before:  # finished before the kill: never executed again
        assert runs[f"square:{int(key) - 1}"] == 1, (key, runs)
    assert all(1 <= runs[f"square:{i}"] <= 2 for i in range(n))
    assert sum(runs.values()) - n <= 1  # at most the one step in flight re-ran


@pytest.mark.parametrize("seed", range(3))
def test_fanout_killed_with_steps_in_flight_recovers(
    store_url: str, tmp_path: Path, seed: int
) -> None:
    n = 40
    kill_at = random.Random(100 + seed).randint(3, n - 5)
    counter = tmp_path / "count.txt"
    _kill_after(_spawn(store_url, counter, "fanout", "run", "fan", n), kill_at)
    before = asyncio.run(_recorded_keys(store_url, "fan"))
    result, _ = _finish(store_url, counter, "fanout", "fan", n)

    assert result == sum(i * i for i in range(n))
    after = asyncio.run(_recorded_keys(store_url, "fan"))
    assert len(after) == n
    runs = _executions(counter)
    # The keys of gathered calls are stable: a step recorded before the kill
    # is the same call after it, and it did not run again.
    recorded_items = {int(k) - 1 for k in before}
    for i in recorded_items:
        assert runs[f"slow:{i}"] == 1
    assert all(1 <= runs[f"slow:{i}"] <= 2 for i in range(n))


def test_sleeping_run_survives_a_restart(store_url: str, tmp_path: Path) -> None:
    counter = tmp_path / "count.txt"
    proc = _spawn(store_url, counter, "sleeper", "run", "nap", 5)
    _kill_after(proc, 1)
    result, _ = _finish(store_url, counter, "sleeper", "nap", 5)
    assert result == 1 + 4 + 5
    runs = _executions(counter)
    assert runs["square:1"] == 1 and runs["square:2"] == 1


def test_run_waiting_for_a_signal_survives_a_restart(store_url: str, tmp_path: Path) -> None:
    counter = tmp_path / "count.txt"
    _kill_after(_spawn(store_url, counter, "waiter", "run", "wait", 5), 1)

    async def send() -> None:
        async with sw.Runner(store_url, serving=False) as runner:
            await runner.signal("wait", "go", {"k": 3})

    asyncio.run(send())
    result, _ = _finish(store_url, counter, "waiter", "wait", 5)
    assert result == 1 + 9 + 5
    assert _executions(counter)["square:1"] == 1


def test_two_processes_racing_to_recover_one_run(store_url: str, tmp_path: Path) -> None:
    n = 30
    counter = tmp_path / "count.txt"
    _kill_after(_spawn(store_url, counter, "sequential", "run", "race", n), 10)
    before = asyncio.run(_recorded_keys(store_url, "race"))
    a = _spawn(store_url, counter, "sequential", "recover", "race", n)
    b = _spawn(store_url, counter, "sequential", "recover", "race", n)
    out_a, err_a = a.communicate(timeout=60)
    out_b, err_b = b.communicate(timeout=60)
    assert a.returncode == 0 and b.returncode == 0, (err_a, err_b)
    expected = f"result {sum(i * i for i in range(n))}"
    assert expected in out_a.splitlines() and expected in out_b.splitlines()
    recovered = [int(o.split("recovered ")[1].split()[0]) for o in (out_a, out_b)]
    assert sorted(recovered) == [0, 1]  # exactly one of them resumed it
    runs = _executions(counter)
    for key in before:
        assert runs[f"square:{int(key) - 1}"] == 1
    assert sum(runs.values()) - n <= 1
    assert len(asyncio.run(_recorded_keys(store_url, "race"))) == n


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs POSIX processes")
def test_killed_process_is_dead_not_just_slow(store_url: str, tmp_path: Path) -> None:
    """Recovery takes over from a dead holder at once, without waiting for its lease."""
    counter = tmp_path / "count.txt"
    _kill_after(_spawn(store_url, counter, "sequential", "run", "fast", 10), 3)

    async def status() -> str:
        async with sw.Runner(store_url, serving=False) as runner:
            return (await runner.get_run("fast")).status

    assert asyncio.run(status()) == "running"  # the dead holder's lease is still valid
    result, _ = _finish(store_url, counter, "sequential", "fast", 10)
    assert result == sum(i * i for i in range(10))


def test_cancelling_a_run_whose_holder_died(store_url: str, tmp_path: Path) -> None:
    counter = tmp_path / "count.txt"
    _kill_after(_spawn(store_url, counter, "sequential", "run", "gone", 30), 3)

    async def cancel() -> tuple[str, str]:
        async with sw.Runner(store_url, serving=False) as runner:
            await runner.cancel("gone")
            status = (await runner.get_run("gone")).status
        async with sw.Runner(store_url, poll_interval=0.05) as runner:
            await runner.recover()  # nothing to resume: it is cancelled
            with pytest.raises(sw.CancelledRun):
                await sw.RunHandle(runner, "gone").result(timeout=5)
            return status, (await runner.get_run("gone")).status

    assert asyncio.run(cancel()) == ("cancelled", "cancelled")
