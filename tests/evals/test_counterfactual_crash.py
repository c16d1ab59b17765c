"""A counterfactual experiment killed with SIGKILL halfway and run again
pays for no finished fork: the new model's live calls, counted from outside
the process, are those of the killed run plus the forks it had not
recorded, and every fork ends succeeded."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.crash import executions, kill, spawn, wait_for_line

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "counterfactual.py"


def _forks(db: Path) -> tuple[int, int]:
    """(forks finished, forks whose second model step is recorded), read
    from the SQLite file."""
    with sqlite3.connect(db) as c:
        finished = c.execute(
            "SELECT count(*) FROM runs WHERE id LIKE '%.dates' AND status = 'succeeded'"
        ).fetchone()[0]
        answered = c.execute(
            "SELECT count(*) FROM steps WHERE run_id LIKE '%.dates' AND key = '2'"
        ).fetchone()[0]
    return int(finished), int(answered)


def test_a_killed_experiment_resumed_repays_no_finished_fork(tmp_path: Path) -> None:
    db, log = tmp_path / "cf.db", tmp_path / "model.log"
    url = f"sqlite:///{db}"
    env = {"STALWART_MODEL_LOG": str(log), "STALWART_PAUSE_AFTER": "10"}
    proc = spawn(EXAMPLE, url, env=env)
    wait_for_line(proc, "paused")  # inside the 10th live call of the new model
    kill(proc)
    finished, answered = _forks(db)
    assert len(executions(log)) == 10
    assert 1 <= finished < 20 and answered <= 9  # halfway, the 10th call unrecorded

    again = spawn(EXAMPLE, url, env={**env, "STALWART_PAUSE_AFTER": "0"})
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert "20 case(s): 20 better, 0 worse, 0 same" in out
    # Every fork whose second model step was recorded is never asked again.
    assert len(executions(log)) == 10 + (20 - answered)
    assert _forks(db) == (20, 20)
