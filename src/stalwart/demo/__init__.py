"""`stalwart demo`: a research agent that survives ``kill -9``, with no API key.

The agent is a plain tool-calling loop around a heuristic model (a
:class:`~stalwart.testing.ScriptedLLM` whose replies read the tool results)
over a small corpus about Python releases, recorded on SQLite. The demo runs
it in a child process, kills that process with SIGKILL while it is in the
middle of a step, and resumes the run here: the steps the child finished come
back from the ledger, the rest run live. A counter file, written by every real
execution and kept outside both processes, shows that no finished step ran
twice.

The child is this package run as ``python -m stalwart.demo child ...``;
running ``python -m stalwart.demo`` without arguments plays the whole demo,
like ``stalwart demo``.

Inside: the corpus (:mod:`.corpus`), the agent and its proof counter
(:mod:`.agent`), the child process and its lines (:mod:`.child`), how a step
is printed (:mod:`.printout`), and the demo played (:mod:`.play`).
"""

from __future__ import annotations

from .agent import research
from .corpus import CORPUS, QUESTION
from .play import DemoReport, main, run_demo

__all__ = ["CORPUS", "QUESTION", "DemoReport", "main", "research", "run_demo"]
