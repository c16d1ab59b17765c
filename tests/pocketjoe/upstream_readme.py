"""Run the example of PocketJoe 0.1's README, as its sdist ships it, on Stalwart.

``python tests/pocketjoe/upstream_readme.py [URL] [--sdist DIR]`` reads
``README.md`` of the ``pocket-joe`` 0.1.0.1 sdist (from ``DIR``, an unpacked
sdist, else fetched with :func:`upstream.fetch` into a temporary folder that
is removed afterwards) and runs its example. The README is never kept in
this repository and no line of its code is edited.

Which text is run, and why it is safe to run it:

* The example is the five ``python`` code blocks of the README's section
  ``### Everything is a Policy`` (up to the next heading): the LLM policy,
  the search policy, the orchestrator, ``AppContext`` and ``main``. They are
  joined in order with a newline.
* The joined code must have the SHA-256 :data:`DIGEST` (the text reviewed
  when this launcher was written), else nothing runs and the launcher
  exits with an error naming the README and the digest found. A changed or
  substituted README is therefore never executed.
* Its top level must be only class and ``async def`` definitions (checked
  with :mod:`ast`), so loading it defines the policies and runs nothing but
  their decorators; ``main()`` is then awaited.

The README has no import lines: it leaves its names to the reader. They are
given to the code as the only "imports", bound in the namespace it runs in
before it is loaded, and that is all:

* ``BaseContext``, ``InMemoryRunner``, ``Message``, ``Policy`` and
  ``policy_spec_mcp_tool``: from ``pocket_joe``, which is aliased to
  ``stalwart.pocketjoe`` (``upstream.MODULES["0.1"]``, the alias their test
  suite runs under);
* ``openai``, ``to_completions_messages``, ``to_completions_tools``,
  ``map_response_to_messagess`` (the README's spelling) and ``DDGS``: our
  offline stand-ins of ``examples/pocketjoe_offline.py`` (``offline_openai``,
  ``completions_messages``, ``completions_tools``, ``reply_messages``,
  ``OfflineSearch``): no network, no key, no model.

No text substitution is needed: the code runs as the README has it.

The runner: its ``main`` makes ``InMemoryRunner()`` and is run so without a
URL. Given ``URL`` (``sqlite:///app.db``, a PostgreSQL URL), the name
``InMemoryRunner`` in the code's namespace is bound to a function that makes
``DurableRunner(URL)`` instead, closed when ``main`` returns (the README's
``main`` does not close its runner; memory holds nothing). So the same code
is durable: killed and run again, it resumes by replay.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import importlib
import re
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

# This folder is on sys.path: the launcher is run as a script, never imported.
from upstream import MODULES, fetch

README_VERSION = "0.1.0.1"
HEADING = "### Everything is a Policy"
BLOCKS = 5
DIGEST = "97b391f5a434e34e611c64fca33f0420a7b9e73c1ee2482aa82534ed905a960d"
STAND_INS = Path(__file__).resolve().parents[2] / "examples"

# The README's free names -> where they come from here (module, attribute).
FROM_POCKET_JOE = ("BaseContext", "InMemoryRunner", "Message", "Policy", "policy_spec_mcp_tool")
FROM_OFFLINE = {
    "openai": "offline_openai",
    "to_completions_messages": "completions_messages",
    "to_completions_tools": "completions_tools",
    "map_response_to_messagess": "reply_messages",
    "DDGS": "OfflineSearch",
}


class NotTheReviewedExample(Exception):
    """The README does not hold the example this launcher was written for."""


def section(readme: str) -> list[str]:
    """The lines after :data:`HEADING` up to the next heading (a ``#`` line
    outside a code fence)."""
    lines = readme.splitlines(keepends=True)
    if HEADING + "\n" not in lines:
        raise NotTheReviewedExample(f"README.md has no line {HEADING!r}")
    start = lines.index(HEADING + "\n") + 1
    fenced = False
    for at in range(start, len(lines)):
        if lines[at].startswith("```"):
            fenced = not fenced
        elif not fenced and lines[at].startswith("#"):
            return lines[start:at]
    return lines[start:]


def example(readme: str) -> str:
    """The README's example code, checked (see the module's docstring)."""
    text = "".join(section(readme))
    blocks = re.findall(r"^```python\n(.*?)^```[ \t]*$", text, re.MULTILINE | re.DOTALL)
    if len(blocks) != BLOCKS:
        raise NotTheReviewedExample(
            f"README.md, section {HEADING!r}: {len(blocks)} python blocks, expected {BLOCKS}"
        )
    code = "\n".join(blocks)
    found = hashlib.sha256(code.encode()).hexdigest()
    if found != DIGEST:
        raise NotTheReviewedExample(
            f"README.md, section {HEADING!r}: the code's sha256 is {found}, not the reviewed "
            f"{DIGEST}; it is not run"
        )
    kinds = {type(node).__name__ for node in ast.parse(code).body}
    if not kinds <= {"ClassDef", "AsyncFunctionDef"}:
        raise NotTheReviewedExample(f"README.md: top-level statements {sorted(kinds)}")
    return code


def namespace(url: str | None, made: list[Any]) -> dict[str, Any]:
    """The module the example runs in, with its names bound (its "imports")."""
    for name, module in MODULES["0.1"].items():
        sys.modules[name] = importlib.import_module(module)
    sys.path.insert(0, str(STAND_INS))
    offline = importlib.import_module("pocketjoe_offline")
    pocket_joe = sys.modules["pocket_joe"]
    module = types.ModuleType("pocketjoe_readme")
    sys.modules[module.__name__] = module  # for whatever looks a class's module up
    names = module.__dict__
    names.update({name: getattr(pocket_joe, name) for name in FROM_POCKET_JOE})
    names.update({name: getattr(offline, ours) for name, ours in FROM_OFFLINE.items()})
    if url is not None:
        durable = pocket_joe.DurableRunner

        def durable_runner() -> Any:
            made.append(durable(url))
            return made[-1]

        names["InMemoryRunner"] = durable_runner
    return names


async def launch(sdist: Path, url: str | None) -> None:
    readme = sdist / "README.md"
    code = compile(example(readme.read_text(encoding="utf-8")), str(readme), "exec")
    made: list[Any] = []
    names = namespace(url, made)
    exec(code, names)  # the reviewed text only: checked against DIGEST above
    try:
        await names["main"]()
    finally:
        for runner in made:
            await runner.close()


def main(argv: list[str]) -> int:
    args = list(argv)
    sdist: Path | None = None
    if "--sdist" in args:
        at = args.index("--sdist")
        sdist = Path(args[at + 1])
        del args[at : at + 2]
    if len(args) > 1 or any(a.startswith("-") for a in args):
        print("usage: upstream_readme.py [URL] [--sdist DIR]")
        return 2
    url = args[0] if args else None
    try:
        if sdist is not None:
            asyncio.run(launch(sdist, url))
            return 0
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(launch(fetch(README_VERSION, Path(tmp)), url))
    except NotTheReviewedExample as why:
        print(f"upstream_readme.py: pocket-joe {README_VERSION}: {why}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
