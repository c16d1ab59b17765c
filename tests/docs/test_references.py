"""Every file the docs and the code's docstrings point a reader to is in the
repository: a page or a comment that sends a user to a file they cannot
open (a design note kept elsewhere, a file since moved) fails here.

What counts as pointing to a file:

- a Markdown link ``[text](target)`` that is not a URL or an anchor;
- any name ending in ``.md`` (``DESIGN.md``, ``docs/durability.md``): a
  page; one given with a folder must be at that path, a bare one must be a
  page of the repository;
- a path under one of the repository's own folders (``tests/...``,
  ``docs/...``, ``../x``) that names a file (it has an extension) or a
  folder (it ends with ``/``); ``::test_name`` after a file and ``*`` in it
  are allowed.

Code blocks of the pages are left out: they are run by ``test_snippets.py``,
and a path in them may be one the reader makes (``tests/recordings``).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from .snippets import ROOT, pages

TOP = ("src/", "tests/", "docs/", "examples/", "benchmarks/", ".ci/", "../")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A word made of path characters, not glued to a word or path before it.
TOKEN = re.compile(r"(?<![\w/.:-])((?:\.\.?/)*[\w.-]+(?:/[\w.*-]+)*/?)")
FENCE = re.compile(r"^\s*(```|~~~).*?^\s*\1", re.S | re.M)
NAMES_A_FILE = re.compile(r"\.\w+$")


@cache
def _pages_by_name() -> frozenset[str]:
    return frozenset(p.name for p in ROOT.rglob("*.md") if ".git" not in p.parts)


def _exists(base: Path, target: str) -> bool:
    """``target`` relative to ``base`` or to the repository, inside it."""
    for start in (base, ROOT):
        path = (start / target).resolve()
        if path != ROOT and ROOT not in path.parents:
            continue  # outside the repository: a reader of it cannot open it
        if "*" in target:
            if any(path.parent.glob(path.name)):
                return True
        elif path.exists():
            return True
    return False


def missing_files(path: Path, text: str) -> list[str]:
    """The files ``text`` (the content of ``path``) points to that are not there."""
    missing = []
    for match in LINK.finditer(text):
        target = match.group(1).split("#")[0]
        if re.match(r"[a-z]+:", target) or not target or not re.search(r"[./]", target):
            continue  # a URL, an anchor, or code that looks like a link (`f[k](v)`)
        if not _exists(path.parent, target):
            missing.append(f"link to {target}")
    for match in TOKEN.finditer(text):
        token = match.group(1).split("::")[0].rstrip(".")
        if token.endswith(".md"):
            found = _exists(path.parent, token) if "/" in token else token in _pages_by_name()
            if not found:
                missing.append(f"page {token}")
        elif (
            token.startswith(TOP)
            and (NAMES_A_FILE.search(token) or token.endswith("/"))
            and not _exists(path.parent, token)
        ):
            missing.append(f"path {token}")
    return missing


def sources() -> list[Path]:
    return sorted((ROOT / "src").rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_a_page_points_only_to_files_in_the_repository(page: Path) -> None:
    missing = missing_files(page, FENCE.sub("", page.read_text()))
    assert not missing, missing


@pytest.mark.parametrize("source", sources(), ids=_name)
def test_a_docstring_or_comment_points_only_to_files_in_the_repository(source: Path) -> None:
    missing = missing_files(source, source.read_text())
    assert not missing, missing


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("the contract (S1 to S14, in `shared/DESIGN.md`)", ["page shared/DESIGN.md"]),
        ("Each clause of `../shared/DESIGN.md`", ["page ../shared/DESIGN.md"]),
        ("in DESIGN.md's order", ["page DESIGN.md"]),
        ("[the guide](docs/nowhere.md#top)", ["link to docs/nowhere.md", "page docs/nowhere.md"]),
        ("`tests/durable/test_gone.py::test_x`", ["path tests/durable/test_gone.py"]),
        ("[the contract](docs/durability.md#the-contract), `tests/docs/`", []),
        ("`tests/durable/test_crash.py::test_fanout_*`, `docs/*.md`, `x[k](v)`", []),
    ],
)
def test_what_counts_as_pointing_to_a_file(text: str, missing: list[str]) -> None:
    assert missing_files(ROOT / "README.md", text) == missing
