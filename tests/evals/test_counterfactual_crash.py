"""A counterfactual experiment killed with SIGKILL halfway and run again
pays for no finished fork: the new model's live calls, counted from outside
the process, are those of the killed run plus the forks it had not
recorded, and every fork ends succeeded (SQLite file and PostgreSQL)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.crash import executions, kill, spawn, wait_for_line

import stalwart as sw

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "counterfactual.py"


def _forks(url: str) -> tuple[int, int]:
    """(forks finished, forks whose second model step is recorded), read
    from the store by a runner that executes nothing."""

    async def read() -> tuple[int, int]:
        async with sw.Runner(url) as runner:
            forks = await runner.list_runs(None, 100, policy="support_v2")
            finished = sum(r.status == "succeeded" for r in forks)
            answered = 0
            for r in forks:
                answered += any(s.key == "2" for s in await runner.steps(r.id))
            return finished, answered

    return asyncio.run(read())


def test_a_killed_experiment_resumed_repays_no_finished_fork(
    tmp_path: Path, store_url: str
) -> None:
    log = tmp_path / "model.log"
    url = store_url
    env = {"STALWART_MODEL_LOG": str(log), "STALWART_PAUSE_AFTER": "10"}
    proc = spawn(EXAMPLE, url, env=env)
    wait_for_line(proc, "paused")  # inside the 10th live call of the new model
    kill(proc)
    finished, answered = _forks(url)
    assert len(executions(log)) == 10
    assert 1 <= finished < 20 and answered <= 9  # halfway, the 10th call unrecorded

    again = spawn(EXAMPLE, url, env={**env, "STALWART_PAUSE_AFTER": "0"})
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert "20 case(s): 20 better, 0 worse, 0 same" in out
    # Every fork whose second model step was recorded is never asked again.
    assert len(executions(log)) == 10 + (20 - answered)
    assert _forks(url) == (20, 20)
