"""Sybil set up to execute the code blocks of the README and of docs/.

Every page is one document: its blocks run in order in one namespace, so a
page can build a program up block by block, as a reader would type it. Each
page runs in a fresh temporary directory (``examples/`` is linked in), so
``sqlite:///agents.db`` in a snippet is a new file every time.

- ``python`` blocks are executed; top-level ``await`` works (one event loop
  per page, kept between its blocks), so a snippet can be written the way
  it would sit inside an ``async def``.
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
import contextlib
import functools
import os
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

_LOOP = "__docs_loop__"
_UNDO = "__docs_undo__"
_CWD = "__docs_cwd__"
_TMP = "__docs_tmp__"


def _run_python(example: Example) -> None:
    """Execute a block; a block with top-level ``await`` runs on the page's loop."""
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
