"""The regression suite: every exported run in ``recordings/`` is replayed
against the agent's current code, executing nothing live.

    python -m pytest examples/replay_suite

passes while the code reproduces the recorded runs; after a change that
alters what the agent does, it fails naming the step that diverges.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from replay_agent import AGENT

from stalwart.testing import replay
from stalwart.testing.pytest_plugin import recordings


@pytest.mark.parametrize("recording", recordings(Path(__file__).parent / "recordings"))
def test_the_agent_reproduces_its_recorded_runs(recording: Path) -> None:
    replay(recording, AGENT).check()  # AssertionError with the report, step by step
