"""docs/architecture.md names where each clause of the contract lives; the
code moves, so every `path.py: Name` it cites must still be defined there.

A name cited bare after a cited one (`path.py: A.f`, `A.g`) is checked in
the same file, and `Class.member` is looked for in the class's own body.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from .snippets import ROOT

PAGE = ROOT / "docs" / "architecture.md"
SRC = ROOT / "src" / "stalwart"
# `core/context.py: Context.call`, then bare names in backticks after it, up
# to the next ';' or the end of the cell.
CITE = re.compile(r"`([\w/]+\.py): ([\w.]+)`((?:,\s*`[\w.]+`)*)")
BARE = re.compile(r"`([\w.]+)`")


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _names(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    found: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = node
    return found


def _defined(path: Path, dotted: str) -> bool:
    body = _tree(path).body
    for part in dotted.split("."):
        node = _names(body).get(part)
        if node is None:
            return False
        body = node.body if isinstance(node, ast.ClassDef) else []
    return True


def citations() -> list[tuple[str, str]]:
    pairs = []
    for m in CITE.finditer(PAGE.read_text()):
        path, first, rest = m.groups()
        pairs.append((path, first))
        owner = first.split(".")[0] if "." in first else None
        for bare in BARE.findall(rest):
            # `A.f`, then `g`: a bare method of the same class is A.g.
            if owner and "." not in bare and not _defined(SRC / path, bare):
                bare = f"{owner}.{bare}"
            pairs.append((path, bare))
    return pairs


def test_the_page_cites_the_contract() -> None:
    assert len(citations()) >= 60  # the table was not emptied by a bad edit


def test_every_cited_name_is_defined_where_the_page_says() -> None:
    missing = [
        f"{path}: {name}"
        for path, name in citations()
        if not (SRC / path).is_file() or not _defined(SRC / path, name)
    ]
    assert not missing, missing
