"""Sybil set up to execute the code blocks of the README and of docs/.

Every page is one document: its blocks run in order in one namespace, so a
page can build a program up block by block, as a reader would type it. Each
page runs in a fresh temporary directory (``examples/`` is linked in), so
``sqlite:///agents.db`` in a snippet is a new file every time.

- ``python`` blocks are executed. A block is a program a reader can paste
  into a file: one with ``await`` at its top level (a ``SyntaxError`` in a
  file) is refused, unless ``<!-- top-level-await: next -->`` stands right
  before it and a sentence of its section, above it, tells the reader how
  to run it (naming ``python -m asyncio``; inside an ``async def`` works
  too). A marked block runs on the page's event loop, kept between blocks.
- ``bash`` blocks are run by ``bash -euo pipefail`` with the installed
  ``stalwart`` command on the ``PATH``.
- ``<!-- skip: next "reason" -->`` before a block says why it is not run (an
  install, a server that would never stop, a placeholder); a skip without a
  reason is refused by ``test_every_skip_says_why``.
- ``<!-- invisible-code-block: python ... -->`` is setup the reader does not
  need to see: typically :func:`offline_models`, which makes
  ``llm.openai(...)`` and its siblings scripted models for the rest of the
  page, so a snippet written for a real provider runs without a key.
"""

from __future__ import annotations

import ast
import asyncio
import codeop
import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

import stalwart as sw
from stalwart import llm
from stalwart.testing import Reply, ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]
BASH_TIMEOUT = 60.0

# Before a block that awaits at its top level; its section says how to run it.
AWAIT_MARK = "<!-- top-level-await: next -->"
HOW_TO_RUN = "python -m asyncio"
_COMMENTS = re.compile(r"(?:<!--(?:(?!-->).)*-->\s*)+\Z", re.S)
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^#{1,6}\s")

_LOOP = "__docs_loop__"
_UNDO = "__docs_undo__"
_CWD = "__docs_cwd__"
_TMP = "__docs_tmp__"


def awaits_at_top_level(source: str) -> bool:
    """Whether ``source`` compiles only with top-level ``await`` (``async
    for``, ``async with``): pasted into a file, a ``SyntaxError``."""
    try:
        compile(source, "<block>", "exec", dont_inherit=True)
    except SyntaxError:
        try:
            flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            compile(source, "<block>", "exec", flags=flags, dont_inherit=True)
        except SyntaxError:
            return False  # another syntax error: running the block reports it
        return True
    return False


def repl_error(source: str) -> str | None:
    """Why ``source``, pasted line by line into ``python -m asyncio``, fails
    to compile there, or None. The REPL ends a compound statement at a blank
    line only, so a statement straight after an indented block is an error."""
    compiler = codeop.CommandCompiler()
    compiler.compiler.flags |= ast.PyCF_ALLOW_TOP_LEVEL_AWAIT  # as the asyncio REPL does
    pending: list[str] = []
    for number, line in enumerate([*source.splitlines(), ""], start=1):
        pending.append(line)
        try:
            done = compiler("\n".join(pending), "<console>", "single")
        except (SyntaxError, ValueError, OverflowError) as exc:
            return f"line {number} of the block: {exc}"
        if done is not None:
            pending = []
    return None


def _section_before(text: str, start: int) -> str:
    """The page's text from the heading above ``start`` (outside code blocks) to it."""
    lines = text[:start].splitlines(keepends=True)
    heading, fenced = 0, False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _HEADING.match(line):
            heading = i
    return "".join(lines[heading:])


def await_refusal(text: str, start: int, source: str) -> str | None:
    """Why the python block at ``start`` of a page may not stand as written,
    or None. A reader copies a block into a file: top-level ``await`` there
    is a ``SyntaxError``, so such a block is marked (``AWAIT_MARK``) and its
    section says how to run it; a mark on a block that needs none goes."""
    if text.startswith("<!--", start):
        return None  # an invisible block: setup the reader never copies
    comments = _COMMENTS.search(text[:start].rstrip() + "\n")
    marked = comments is not None and AWAIT_MARK in comments.group(0)
    needs = awaits_at_top_level(source)
    if needs and not marked:
        return (
            "awaits at its top level, a SyntaxError in a file: make it a program "
            "(`async def main(): ...` and `asyncio.run(main())`), or put "
            f"{AWAIT_MARK} before it and say above it, in its section, how to run it "
            f"(`{HOW_TO_RUN}`, or inside an `async def`)"
        )
    if marked and not needs:
        return f"is marked {AWAIT_MARK} but has no top-level await: remove the mark"
    if marked and HOW_TO_RUN not in _section_before(text, start):
        return (
            f"is marked {AWAIT_MARK} but its section does not say, above it, how to "
            f"run it: a sentence naming `{HOW_TO_RUN}` (or an `async def`)"
        )
    if marked and (error := repl_error(source)) is not None:
        return (
            f"is marked {AWAIT_MARK} but fails pasted into `{HOW_TO_RUN}` ({error}): "
            "leave a blank line after each indented block, none inside one"
        )
    return None


def _run_python(example: Example) -> None:
    """Execute a block; a marked block with top-level ``await`` runs on the page's loop."""
    why = await_refusal(example.document.text, example.start, str(example.parsed))
    assert why is None, f"{example.path}:{example.line}: this block {why}"
    source = "\n" * (example.line + example.parsed.line_offset) + str(example.parsed)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    code = compile(source, example.path, "exec", flags=flags, dont_inherit=True)
    ns = example.namespace
    result = eval(code, ns)  # the block itself: docs are code we wrote and review
    if asyncio.iscoroutine(result):
        loop: asyncio.AbstractEventLoop = ns[_LOOP]
        loop.run_until_complete(result)
    ns.pop("__builtins__", None)


def _run_bash(example: Example) -> None:
    """Run a shell block in the page's directory; it must exit 0."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("STALWART_STORE", None)
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", str(example.parsed)],
        cwd=example.namespace[_TMP],
        env=env,
        capture_output=True,
        text=True,
        timeout=BASH_TIMEOUT,
        check=False,
    )
    assert out.returncode == 0, (
        f"{example.path}:{example.line}: exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    )


def offline_models(script: Sequence[Reply], namespace: dict[str, Any]) -> None:
    """Make every provider constructor of ``stalwart.llm`` a scripted model,
    until the page ends: a snippet that names a real model runs offline."""

    def scripted(*_args: Any, **_kwargs: Any) -> ScriptedLLM:
        return ScriptedLLM(list(script), name="model")

    undo: list[Callable[[], None]] = namespace[_UNDO]
    for name in ("openai", "anthropic", "model"):
        undo.append(functools.partial(setattr, llm, name, getattr(llm, name)))
        setattr(llm, name, scripted)


def _setup(namespace: dict[str, Any]) -> None:
    tmp = tempfile.mkdtemp(prefix="stalwart-docs-")
    (Path(tmp) / "examples").symlink_to(ROOT / "examples")
    namespace[_TMP] = tmp
    namespace["__name__"] = "__main__"  # a page is a script: its classes live in __main__
    namespace[_CWD] = os.getcwd()
    namespace[_UNDO] = []
    namespace[_LOOP] = asyncio.new_event_loop()
    namespace["offline_models"] = functools.partial(offline_models, namespace=namespace)
    os.chdir(tmp)


async def _close_runners(namespace: dict[str, Any]) -> None:
    for value in list(namespace.values()):
        if isinstance(value, sw.Runner) and not value.closed:
            await value.close()


def _teardown(namespace: dict[str, Any]) -> None:
    loop: asyncio.AbstractEventLoop = namespace[_LOOP]
    try:
        loop.run_until_complete(_close_runners(namespace))
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
        for undo in reversed(namespace[_UNDO]):
            undo()
        os.chdir(namespace[_CWD])
        shutil.rmtree(namespace[_TMP], ignore_errors=True)


SYBIL = Sybil(
    parsers=[
        CodeBlockParser("python", _run_python),
        CodeBlockParser("bash", _run_bash),
        SkipParser(),
    ],
    setup=_setup,
    teardown=_teardown,
)


def pages() -> list[Path]:
    """The README and every page of docs/, each a document of its own."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@contextlib.contextmanager
def _document(path: Path) -> Iterator[Any]:
    document = SYBIL.parse(path)
    _setup(document.namespace)
    try:
        yield document
    finally:
        _teardown(document.namespace)


def run_page(path: Path) -> tuple[int, list[str]]:
    """Evaluate every block of ``path`` in order: how many ran, and the
    reasons of those skipped. The first failing block fails the page."""
    from unittest import SkipTest

    ran, skipped = 0, []
    with _document(path) as document:
        for example in document:
            try:
                example.evaluate()
            except SkipTest as skip:
                skipped.append(f"{path.name}:{example.line}: {skip}")
            else:
                ran += not isinstance(example.parsed, tuple)  # a skip directive is a tuple
    return ran, skipped
