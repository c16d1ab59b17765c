"""Every code block of the README and of docs/ runs, offline, as written.

A snippet that rots (a renamed argument, a runner that no longer resumes
someone else's run without ``serving=True``) fails here, naming the page and
the line. Blocks that cannot run say why, in the page itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .snippets import AWAIT_MARK, ROOT, SYBIL, _run_python, await_refusal, pages, run_page

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


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_every_block_runs_as_pasted_or_says_how(page: Path) -> None:
    """Skipped blocks included: a reader copies those too."""
    document = SYBIL.parse(page)
    refused = [
        f"{_name(page)}:{example.line}: {why}"
        for example in document
        if example.region.evaluator is _run_python
        and (why := await_refusal(document.text, example.start, str(example.parsed)))
    ]
    assert not refused, refused


BARE = """# A page

Start a run:

```python
import asyncio

await asyncio.sleep(0)
```
"""


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text)
    return page


def test_a_block_that_awaits_at_its_top_level_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"page\.md:5: this block awaits at its top level"):
        run_page(_page(tmp_path, BARE))


def test_a_marked_block_runs_when_its_section_says_how(tmp_path: Path) -> None:
    told = BARE.replace(
        "Start a run:\n",
        f"Run these lines in `python -m asyncio`:\n\n{AWAIT_MARK}",
    )
    assert run_page(_page(tmp_path, told)) == (1, [])


def test_a_marked_block_whose_section_does_not_say_how_is_refused(tmp_path: Path) -> None:
    # The sentence is in another section: a reader landing here does not see it.
    elsewhere = BARE.replace(
        "Start a run:\n",
        f"Run these in `python -m asyncio`.\n\n## Start\n\n{AWAIT_MARK}",
    )
    with pytest.raises(AssertionError, match="does not say, above it, how to run it"):
        run_page(_page(tmp_path, elsewhere))


def test_a_mark_on_a_block_that_needs_none_is_refused(tmp_path: Path) -> None:
    needless = f"# A page\n\nIn `python -m asyncio`:\n\n{AWAIT_MARK}\n```python\nx = 1\n```\n"
    with pytest.raises(AssertionError, match="has no top-level await"):
        run_page(_page(tmp_path, needless))


def test_a_marked_block_that_the_asyncio_repl_cannot_take_is_refused(tmp_path: Path) -> None:
    # Pasted into `python -m asyncio`, `print` right after the loop's body is
    # a SyntaxError: the REPL ends a compound statement at a blank line only.
    loop = "for n in range(2):\n    await asyncio.sleep(0)\nprint(n)\n"
    told = BARE.replace("Start a run:\n", f"In `python -m asyncio`:\n\n{AWAIT_MARK}").replace(
        "await asyncio.sleep(0)\n", loop
    )
    with pytest.raises(AssertionError, match="fails pasted into `python -m asyncio`"):
        run_page(_page(tmp_path, told))
    assert run_page(_page(tmp_path, told.replace("\nprint(n)", "\n\nprint(n)"))) == (1, [])
