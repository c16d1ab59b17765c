"""Testing agents offline: a scripted model, and replay tests of new code
against recorded runs.

- :class:`ScriptedLLM` plays a script of replies (:mod:`.scripted`).
- :func:`replay` re-executes a policy against a recorded run without
  executing anything live, and reports where its calls diverge from the
  record, or that it reproduces the run (:mod:`.replay`; the recording
  it reads is :mod:`.recording`, the report :mod:`.divergence`).
- :mod:`stalwart.testing.pytest_plugin` makes a folder of exported runs a
  parametrized test suite.
"""

from __future__ import annotations

from ..core.errors import ScriptExhausted
from .divergence import Divergence, ReplayReport
from .recording import Recording, load_recording
from .replay import replay, replay_async
from .scripted import Reply, ScriptedLLM, call

__all__ = [
    "Divergence",
    "Recording",
    "ReplayReport",
    "Reply",
    "ScriptExhausted",
    "ScriptedLLM",
    "call",
    "load_recording",
    "replay",
    "replay_async",
]
