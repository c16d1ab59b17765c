"""A run moved from under a worker, by a mover SIGKILLed halfway and run
again, finishes exactly once on the target: no step executed twice, the
source keeps it as moved and no worker there takes it again. Real worker
processes, SQLite to PostgreSQL and back."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import _fresh_url, opened_store
from tests.crash import kill, spawn, wait_for_line

from stalwart.core.redact import mask_url
from stalwart.timetravel import moved_to

HERE = Path(__file__).parent
APP = HERE / "move_app.py"
MOVER = HERE / "move_mover.py"
STEPS = 40  # move_app starts chain(40): ticks 0..39, then children 1 and 2
RESULT = str(sum(range(STEPS)) + 10 + 20)


@pytest.fixture(params=["sqlite-postgres", "postgres-sqlite"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(source, target) URLs: fresh stores of two kinds."""
    kinds = request.param.split("-")
    made = []
    for kind, folder in zip(kinds, ("source", "target"), strict=True):
        (tmp_path / folder).mkdir()
        made.append(_fresh_url(kind, tmp_path / folder))
    urls = [next(gen) for gen in made]
    yield urls[0], urls[1]
    for gen in made:
        next(gen, None)


def _lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def _wait(what: str, ok: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ok() if callable(ok) else not ok:
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _status(url: str) -> tuple[str, str | None, str | None]:
    """Run "R" in the store at ``url``: its status, result and where it moved."""

    async def read() -> tuple[str, str | None, str | None]:
        async for store in opened_store(url):
            rec = await store.get_run("R")
            assert rec is not None
            return rec.status, rec.result, moved_to(rec)
        raise AssertionError("the store did not open")

    return asyncio.run(read())


@pytest.mark.parametrize(("stage", "left"), [("parked", "suspended"), ("copied", "cancelled")])
def test_a_run_moved_from_under_a_worker_by_a_killed_mover_finishes_once_on_the_target(
    stores: tuple[str, str], stage: str, left: str, tmp_path: Path
) -> None:
    source, target = stores
    marks = tmp_path / "marks"
    marks.mkdir()
    worker = spawn(APP, source, marks, "start")
    wait_for_line(worker, "serving")
    _wait("two steps on the source", lambda: len(_lines(marks / "ticks")) >= 2)

    mover = spawn(MOVER, source, target, stage)  # the worker is executing the run
    wait_for_line(mover, "halfway")
    kill(mover)
    assert _status(source)[0] == left  # parked or moved: no worker there takes it

    again = subprocess.run(
        [sys.executable, "-m", "stalwart", "runs", "move", "R", "--to", target, "--store", source],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("moved R to ")

    there = spawn(APP, target, marks, "serve")
    try:
        wait_for_line(there, "serving")
        _wait("the run's end on the target", lambda: (marks / "finished").exists())
        _wait("the run's outcome on the target", lambda: _status(target)[0] == "succeeded")
    finally:
        kill(there)
        kill(worker)

    finished = _lines(marks / "finished")
    assert [(line[0], line[2]) for line in finished] == [(RESULT, "serve")]
    ticks = Counter(int(line[0]) for line in _lines(marks / "ticks"))
    assert ticks == Counter(range(STEPS))  # each step executed once, on either store
    assert {line[2] for line in _lines(marks / "ticks")} == {"start", "serve"}
    children = sorted((line[0], line[2]) for line in _lines(marks / "children"))
    assert children == [("1", "serve"), ("2", "serve")]
    assert _status(target) == ("succeeded", RESULT, None)
    status, _, where = _status(source)
    assert (status, where) == ("cancelled", mask_url(target))
