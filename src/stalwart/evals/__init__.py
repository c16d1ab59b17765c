"""Evaluating agents on their own history.

- :func:`counterfactual` forks recorded runs at a step (:func:`find_step`
  reads rules such as ``"2nd model step"``) onto new code or with a step's
  result replaced, and scores each fork against its run
  (:mod:`.counterfactual`); the runs are ids or a :class:`Selection`
  (:mod:`.selection`).
- Scorers (:mod:`.scorers`): :func:`exact_match`, :func:`json_match`,
  :func:`called_tool`, :func:`tokens_used`, and :func:`judge` (any model
  policy, asked in a durable run).

``docs/evals.md`` walks through it; ``stalwart evals counterfactual`` is the
command.
"""

from __future__ import annotations

from .at import find_step, is_model_step
from .counterfactual import Case, Report, counterfactual
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
    "Judge",
    "Outcome",
    "Report",
    "Score",
    "Scorer",
    "Selection",
    "Verdict",
    "as_score",
    "called_tool",
    "counterfactual",
    "exact_match",
    "find_step",
    "is_model_step",
    "json_match",
    "judge",
    "select_runs",
    "tokens_used",
]
