"""PocketJoe 0.2's own example programs (``examples/search_agent.py``,
``examples/youtube_summarizer.py`` of the ``pocket-joe`` sdist), fetched
from PyPI into a temporary folder and run by ``upstream_examples.py`` with
only their imports redirected: in memory, on SQLite, and killed with SIGKILL
then run again, when only the calls that were in flight run a second time.

Opt-in (``STALWART_POCKETJOE=1``), like their test suites: it needs PyPI.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.pocketjoe.upstream import EXAMPLES_VERSION, fetch

pytestmark = pytest.mark.skipif(
    os.environ.get("STALWART_POCKETJOE") != "1",
    reason="opt-in (STALWART_POCKETJOE=1): fetches the pocket-joe sdist from PyPI",
)

LAUNCHER = Path(__file__).with_name("upstream_examples.py")
SEARCH_ANSWER = (
    "Final Result: According to web_seatch_ddgs_policy: "
    "Python 3.14 is the newest Python release (python.org)."
)


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unpacked sdist, fetched once for the module."""
    return fetch(EXAMPLES_VERSION, tmp_path_factory.mktemp("pocket-joe-sdist"))


def command(sdist: Path, program: str, *url: str) -> list[str]:
    return [sys.executable, str(LAUNCHER), program, *url, "--sdist", str(sdist)]


def run(sdist: Path, where: Path, program: str, *url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(sdist, program, *url),
        env={**os.environ, "PJ_LOG": str(where / "log")},
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
    )


def executed(where: Path) -> list[str]:
    log = where / "log"
    return log.read_text().split() if log.exists() else []


def start_and_kill(sdist: Path, where: Path, program: str, url: str, slow: str, event: str,
                   times: int) -> None:  # fmt: skip
    """Start ``program`` on ``url`` with ``slow`` set, and SIGKILL it once
    ``event`` really happened ``times`` times (it is then in the slow part)."""
    proc = subprocess.Popen(
        command(sdist, program, url),
        env={**os.environ, "PJ_LOG": str(where / "log"), slow: "60"},
        cwd=where,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while executed(where).count(event) < times:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, f"{event} never happened: {executed(where)}"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()


# -- the search agent -----------------------------------------------------------------
def test_their_search_agent_runs_in_memory(sdist: Path, tmp_path: Path) -> None:
    done = run(sdist, tmp_path, "search_agent")
    assert done.returncode == 0, done.stderr
    assert SEARCH_ANSWER in done.stdout
    assert executed(tmp_path) == ["llm", "search", "llm"]


def test_their_search_agent_on_sqlite_answers_a_finished_run_from_the_ledger(
    sdist: Path, tmp_path: Path, sqlite_url: str
) -> None:
    url = sqlite_url
    for _ in range(2):
        done = run(sdist, tmp_path, "search_agent", url)
        assert done.returncode == 0, done.stderr
        assert SEARCH_ANSWER in done.stdout
    assert executed(tmp_path) == ["llm", "search", "llm"]  # the second run ran nothing


def test_their_search_agent_killed_during_the_search_resumes_without_asking_again(
    sdist: Path, tmp_path: Path, sqlite_url: str
) -> None:
    url = sqlite_url
    start_and_kill(sdist, tmp_path, "search_agent", url, "PJ_SLOW_SEARCH", "search", 1)
    resumed = run(sdist, tmp_path, "search_agent", url)
    assert resumed.returncode == 0, resumed.stderr
    assert SEARCH_ANSWER in resumed.stdout
    # The model's first answer came from the ledger; the search in flight
    # ran again (at least once); the model then answered once more.
    assert executed(tmp_path) == ["llm", "search", "search", "llm"]


# -- the YouTube summarizer ---------------------------------------------------------------
def summary(where: Path) -> str:
    return (where / "youtube_summary.md").read_text()


def test_their_youtube_summarizer_runs_in_memory(sdist: Path, tmp_path: Path) -> None:
    done = run(sdist, tmp_path, "youtube_summarizer")
    assert done.returncode == 0, done.stderr
    text = summary(tmp_path)
    assert text.lstrip().startswith("# Durable agents")
    assert "## What Durable agents are for, briefly" in text
    assert "### In short: Where does a restarted program pick up?" in text
    assert executed(tmp_path) == ["transcribe", "llm:topics", "llm:answer", "llm:answer"]


def test_their_youtube_summarizer_killed_while_answering_resumes_from_the_ledger(
    sdist: Path, tmp_path: Path, sqlite_url: str
) -> None:
    url = sqlite_url
    # Killed once both topics are being answered, concurrently.
    start_and_kill(sdist, tmp_path, "youtube_summarizer", url, "PJ_SLOW_ANSWER", "llm:answer", 2)
    assert not (tmp_path / "youtube_summary.md").exists()
    resumed = run(sdist, tmp_path, "youtube_summarizer", url)
    assert resumed.returncode == 0, resumed.stderr
    uninterrupted = tmp_path / "memory"
    uninterrupted.mkdir()
    assert run(sdist, uninterrupted, "youtube_summarizer").returncode == 0
    assert summary(tmp_path) == summary(uninterrupted)
    # The transcript and the topics came from the ledger; only the two
    # answers in flight were asked for again.
    assert executed(tmp_path) == ["transcribe", "llm:topics"] + ["llm:answer"] * 4
