"""An experiment killed with SIGKILL halfway and called again by name
resumes: every case is counted once, and no case whose model answered
before the kill is asked again (the new model's live answers are counted
from outside the process), on a SQLite file and on PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.crash import executions, kill, spawn, wait_for_line

import stalwart as sw

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "experiments.py"


def _children(url: str) -> tuple[int, int, int]:
    """(child runs of prompt A's experiment, those finished, those whose
    answer (model step 2) is recorded), read by a runner that executes
    nothing."""

    async def read() -> tuple[int, int, int]:
        async with sw.Runner(url) as runner:
            runs = await runner.list_runs(None, 1000, policy="support_a")
            finished = sum(r.status == "succeeded" for r in runs)
            answered = 0
            for r in runs:
                assert r.parent_id == "eval:prompt-a"
                answered += any(s.key == "2" for s in await runner.steps(r.id))
            return len(runs), finished, answered

    return asyncio.run(read())


def test_a_killed_experiment_resumed_by_name_repays_no_finished_case(
    tmp_path: Path, store_url: str
) -> None:
    log = tmp_path / "model.log"
    env = {"STALWART_MODEL_LOG": str(log), "STALWART_PAUSE_AFTER": "25"}
    proc = spawn(EXAMPLE, store_url, env=env)
    wait_for_line(proc, "paused")  # inside prompt A's 25th live answer
    kill(proc)
    _, finished, answered = _children(store_url)
    assert executions(log).count("a") == 25 and "b" not in executions(log)
    assert 1 <= finished < 50 and answered <= 24  # halfway; the 25th answer never recorded

    again = spawn(EXAMPLE, store_url, env={**env, "STALWART_PAUSE_AFTER": "0"})
    out, err = again.communicate(timeout=180)
    assert again.returncode == 0, err
    assert "experiment prompt-a (support_a on tickets v1): 50 case(s), 50 better" in out
    assert "A: 50 better, 100% passed" in out
    # Each case is one child run, counted once; a case whose answer was
    # recorded before the kill was never asked again.
    assert executions(log).count("a") == 25 + (50 - answered)
    assert _children(store_url) == (50, 50, 50)
    assert executions(log).count("b") == 50
