"""examples/counterfactual.py records 20 runs, forks each at its second
model step with new instructions, and scores them; run again, it forks
nothing new and calls no model."""

from __future__ import annotations

from pathlib import Path

from tests.crash import spawn

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "counterfactual.py"


def test_the_counterfactual_example_scores_twenty_forks_and_pays_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cf.db'}"
    outputs = []
    for _ in range(2):
        proc = spawn(EXAMPLE, url)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append(out)
    first, second = outputs
    assert "20 case(s): 20 better, 0 worse, 0 same" in first
    assert "ticket-0   ticket-0.dates   2   better   68/174" in first
    assert "new model calls in this process: 20" in first  # one per fork: step 2
    assert "new model calls in this process: 0" in second


EXPERIMENTS = Path(__file__).resolve().parents[2] / "examples" / "experiments.py"


def test_the_experiments_example_compares_two_prompts_on_fifty_recorded_cases(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'ex.db'}"
    outputs = []
    for _ in range(2):
        proc = spawn(EXPERIMENTS, url)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append(out)
    first, second = outputs
    assert "dataset tickets v1: 50 cases" in first  # of 60 recorded: 5 chats and 5 refunds left out
    assert "ticket-0   succeeded  better   0       gives_date: names the day" in first
    assert "A: 50 better, 100% passed" in first and "B: 0 better, 100% passed" in first
    assert "better prompt: support_a" in first
    assert "new model calls in this process: 100 (A), 100 (B)" in first
    assert "dataset tickets v1: 50 cases" in second  # the same cases: the same version
    assert "new model calls in this process: 0 (A), 0 (B)" in second
