"""PocketJoe 0.1's README example (the code blocks of the ``pocket-joe``
0.1.0.1 sdist's README), run by ``upstream_readme.py`` with only the names it
leaves to the reader bound: in memory, on SQLite, and killed with SIGKILL
then run again, when only the call that was in flight runs a second time.

The runs are opt-in (``STALWART_POCKETJOE=1``), like the other upstream
tests: they need PyPI. That the launcher refuses a README it was not written
for needs no PyPI and always runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.pocketjoe.upstream import fetch

LAUNCHER = Path(__file__).with_name("upstream_readme.py")
README_VERSION = "0.1.0.1"
ANSWER = "Final Result: According to web_search: Title: Python 3.14 is out"

opt_in = pytest.mark.skipif(
    os.environ.get("STALWART_POCKETJOE") != "1",
    reason="opt-in (STALWART_POCKETJOE=1): fetches the pocket-joe sdist from PyPI",
)


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unpacked sdist, fetched once for the module."""
    return fetch(README_VERSION, tmp_path_factory.mktemp("pocket-joe-0.1-sdist"))


def command(sdist: Path, *url: str) -> list[str]:
    return [sys.executable, str(LAUNCHER), *url, "--sdist", str(sdist)]


def run(sdist: Path, where: Path, *url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(sdist, *url),
        env={**os.environ, "PJ_LOG": str(where / "log")},
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
    )


def executed(where: Path) -> list[str]:
    log = where / "log"
    return log.read_text().split() if log.exists() else []


@opt_in
def test_their_readme_example_runs_in_memory(sdist: Path, tmp_path: Path) -> None:
    done = run(sdist, tmp_path)
    assert done.returncode == 0, done.stderr
    assert ANSWER in done.stdout
    assert executed(tmp_path) == ["llm", "search", "llm"]


@opt_in
def test_their_readme_example_on_sqlite_answers_a_finished_run_from_the_ledger(
    sdist: Path, tmp_path: Path, sqlite_url: str
) -> None:
    url = sqlite_url
    for _ in range(2):
        done = run(sdist, tmp_path, url)
        assert done.returncode == 0, done.stderr
        assert ANSWER in done.stdout
    assert executed(tmp_path) == ["llm", "search", "llm"]  # the second run ran nothing


@opt_in
def test_their_readme_example_killed_during_the_search_resumes_without_asking_again(
    sdist: Path, tmp_path: Path, sqlite_url: str
) -> None:
    url = sqlite_url
    proc = subprocess.Popen(
        command(sdist, url),
        env={**os.environ, "PJ_LOG": str(tmp_path / "log"), "PJ_SLOW_SEARCH": "60"},
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while "search" not in executed(tmp_path):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, f"the search never started: {executed(tmp_path)}"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    resumed = run(sdist, tmp_path, url)
    assert resumed.returncode == 0, resumed.stderr
    assert ANSWER in resumed.stdout
    # The model's first answer came from the ledger; the search in flight
    # ran again (at least once); the model then answered once more.
    assert executed(tmp_path) == ["llm", "search", "search", "llm"]


# -- what is run: only the reviewed text --------------------------------------------------
README = """# Something

### Everything is a Policy

```python
{code}
```

## Getting Started
"""


def test_a_readme_whose_code_is_not_the_reviewed_one_is_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    code = (
        "class Anything:\n"
        f"    open({str(marker)!r}, 'w').write('the code ran')\n"
        "async def main():\n    pass\n"
    )
    (tmp_path / "README.md").write_text(README.format(code=code))
    done = subprocess.run(
        [sys.executable, str(LAUNCHER), "--sdist", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3
    assert "1 python blocks, expected 5" in done.stderr
    five = "\n".join(["```python\n" + code + "```"] * 5)
    (tmp_path / "README.md").write_text(README.format(code=code).replace(
        "```python\n" + code + "\n```", five
    ))  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(LAUNCHER), "--sdist", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3
    assert "sha256" in done.stderr and "it is not run" in done.stderr
    assert not marker.exists()
