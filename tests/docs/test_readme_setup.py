"""The README's Install and Test sections are what CI does, and say what the
suite needs: a newcomer who follows them gets the suite CI runs, and learns
before running it what a fresh machine lacks.
"""

from __future__ import annotations

import re

from .snippets import ROOT

README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"
BASH = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


def _section(title: str) -> str:
    """The README's text under ``## title``, up to the next ``## `` heading."""
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _first_commands(title: str) -> list[str]:
    block = BASH.search(_section(title))
    assert block is not None, f"no bash block under '## {title}'"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def _ci_lines() -> set[str]:
    return {line.strip() for line in CI.read_text().splitlines()}


def test_ci_runs_the_readme_install_and_test_commands_as_written() -> None:
    commands = _first_commands("Install") + _first_commands("Test")
    assert commands, "the README shows no install or test command"
    missing = [c for c in commands if c not in _ci_lines()]
    assert not missing, f".ci/run does not run these README commands as written: {missing}"


def test_ci_runs_the_suite_as_the_readme_says_ci_does() -> None:
    assert "export CI=true" in _ci_lines()
    assert "CI=true" in _section("Test")


def test_the_test_section_says_what_the_suite_needs_and_how_to_get_it() -> None:
    test = _section("Test")
    for needed in (
        "127.0.0.1:5432",  # where the PostgreSQL half looks
        "STALWART_TEST_PG",  # how to point it elsewhere
        "trust",  # the authentication the default URL assumes
        "chromium",  # the browser tests' browser
        "apt-get install -y postgresql chromium",  # how to get both
        "pg_ctlcluster",  # how to start the server
        ".ci/run",  # what CI runs
    ):
        assert needed in test, f"the README's Test section does not mention {needed!r}"
    assert "skip" in test and "fail" in test  # what happens without them, here and in CI
