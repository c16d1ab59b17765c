"""Every code block of the README and of docs/ runs, offline, as written.

A snippet that rots (a renamed argument, a runner that no longer resumes
someone else's run without ``recover=True``) fails here, naming the page and
the line. Blocks that cannot run say why, in the page itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .snippets import ROOT, pages, run_page

FENCE = re.compile(r"^```(\S*)", re.M)
RUN = {"python", "bash"}
# Data, not programs, and `console` transcripts (a prompt and what it
# printed): shown, not run. A command meant to be run is a `bash` block.
SHOWN = {"text", "toml", "yaml", "json", "sql", "console"}
SKIP = re.compile(r"<!--\s*skip:\s*next(.*?)-->", re.S)


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_every_block_runs(page: Path) -> None:
    ran, skipped = run_page(page)
    text = page.read_text()
    blocks = sum(1 for m in FENCE.finditer(text) if m.group(1) in RUN)
    blocks += text.count("<!-- invisible-code-block: python")  # setup, run too
    assert ran + len(skipped) == blocks, (ran, skipped, blocks)


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_every_block_says_its_language(page: Path) -> None:
    """A block without a language (or in one we neither run nor list as data)
    would silently escape the test above."""
    fences = FENCE.findall(page.read_text())
    openings = fences[::2]  # every other fence closes a block
    assert all(f in RUN | SHOWN for f in openings), openings


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_every_skip_says_why(page: Path) -> None:
    for reason in SKIP.findall(page.read_text()):
        assert reason.strip().startswith('"') and len(reason.strip()) > 5, reason
