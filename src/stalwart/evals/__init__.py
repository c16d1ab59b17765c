"""Evaluating agents on their own history.

- :func:`counterfactual` forks recorded runs at a step (:func:`find_step`
  reads rules such as ``"2nd model step"``) onto new code or with a step's
  result replaced, and scores each fork against its run
  (:mod:`.counterfactual`); the runs are ids or a :class:`Selection`
  (:mod:`.selection`).
- Datasets (:mod:`.dataset`): :class:`DatasetCase` and :class:`Dataset`,
  drawn from recorded runs (:func:`cases_from_runs`) or written by hand,
  read and written as JSON Lines, kept in the run store as versions that
  never change (:class:`DatasetStore`, :mod:`.dataset_store`).
- :func:`experiment` runs a saved dataset against a policy as durable child
  runs, resumed by name after a crash, each case scored against its
  reference (:mod:`.experiment`).
- :func:`compare_experiments` sets two experiments' cases side by side,
  :func:`compare_counterfactual` a counterfactual's runs and their forks,
  and :func:`kept_evals` lists what the store holds (:mod:`.compare`, the
  inspector's read model).
- Scorers (:mod:`.scorers`): :func:`exact_match`, :func:`json_match`,
  :func:`called_tool`, :func:`tokens_used`, and :func:`judge` (any model
  policy, asked in a durable run).

``docs/evals.md`` walks through it; ``stalwart evals counterfactual``,
``stalwart evals dataset`` and ``stalwart evals run`` are the commands.
"""

from __future__ import annotations

from .at import find_step, is_model_step
from .compare import (
    Comparison,
    KeptEval,
    Row,
    Side,
    compare_counterfactual,
    compare_experiments,
    kept_evals,
)
from .counterfactual import Case, Report, counterfactual
from .dataset import Dataset, DatasetCase, cases_from_runs
from .dataset_store import DatasetInfo, DatasetStore
from .experiment import CaseResult, ExperimentReport, experiment
from .scorers import (
    Judge,
    Outcome,
    Score,
    Scorer,
    Verdict,
    as_score,
    called_tool,
    exact_match,
    json_match,
    judge,
    tokens_used,
)
from .selection import Selection, select_runs

__all__ = [
    "Case",
    "CaseResult",
    "Comparison",
    "Dataset",
    "DatasetCase",
    "DatasetInfo",
    "DatasetStore",
    "ExperimentReport",
    "Judge",
    "KeptEval",
    "Outcome",
    "Report",
    "Row",
    "Score",
    "Scorer",
    "Selection",
    "Side",
    "Verdict",
    "as_score",
    "called_tool",
    "cases_from_runs",
    "compare_counterfactual",
    "compare_experiments",
    "counterfactual",
    "exact_match",
    "experiment",
    "find_step",
    "is_model_step",
    "json_match",
    "judge",
    "kept_evals",
    "select_runs",
    "tokens_used",
]
