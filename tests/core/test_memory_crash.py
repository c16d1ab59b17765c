"""A run killed with SIGKILL in the middle of a memory write, on a real
SQLite file (and a PostgreSQL schema), leaves exactly one copy of what it
wrote once resumed.

The program (``memory_crash_app.py``) keeps a note with the ``remember``
tool. Killed after the write committed and before the tool's step was
recorded, the resumed run writes again, in place (the note's key comes from
the run and the step): one row. Killed after the step was recorded, the
resumed run replays it and writes nothing.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import pytest
from tests.crash import kill, spawn, wait_for_line

import stalwart as sw

APP = Path(__file__).with_name("memory_crash_app.py")


def _puts(workdir: Path) -> list[str]:
    path = workdir / "puts.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.split()[0] for line in lines]


async def _steps(url: str) -> dict[str, str]:
    async with sw.Runner(url, serving=False) as runner:
        return {s.key: s.name for s in await runner.steps("m")}


async def _notes(url: str) -> list[tuple[str, object]]:
    async with sw.Runner(url, serving=False) as runner:
        memory = sw.Memory(runner.store)
        listed = [(i.key, i.value) for i in await memory.recent(("users", "u-42"))]
        searched = [i.key for i in await memory.search(("users", "u-42"), "peanuts")]
    assert searched == [k for k, _ in listed]  # the text index holds each once too
    return listed


@pytest.mark.parametrize("hold", ["written", "recorded"])
def test_a_run_killed_around_a_memory_write_leaves_one_copy(
    tmp_path: Path, store_url: str, hold: str
) -> None:
    first = spawn(APP, store_url, tmp_path, "run", hold)
    wait_for_line(first, hold)
    kill(first)
    assert first.returncode == -signal.SIGKILL
    assert _puts(tmp_path) == [str(first.pid)]
    before = asyncio.run(_steps(store_url))
    if hold == "written":  # the write committed, its record did not
        assert before == {}
    else:
        assert before == {"1": "remember", "1.1": "stalwart.memory.put"}

    second = spawn(APP, store_url, tmp_path, "recover", hold)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert "answer " + '["allergic to peanuts"]' in out.splitlines()

    # Written again in place by the resumed run, or not at all.
    puts = _puts(tmp_path)
    assert puts == ([str(first.pid), str(second.pid)] if hold == "written" else [str(first.pid)])
    assert asyncio.run(_notes(store_url)) == [("m/1", "allergic to peanuts")]
    if store_url.startswith("sqlite"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            assert conn.execute("SELECT count(*) FROM memory_text").fetchone() == (1,)
    after = asyncio.run(_steps(store_url))
    assert after["1"] == "remember" and after["1.1"] == "stalwart.memory.put"
    assert sorted(after) == ["1", "1.1", "2", "2.1"]
