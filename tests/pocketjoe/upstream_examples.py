"""Run one of PocketJoe 0.2's own example programs, as its sdist ships it,
on Stalwart.

``python tests/pocketjoe/upstream_examples.py search_agent [URL] [--sdist DIR]``
(or ``youtube_summarizer``) runs ``examples/<name>.py`` of the ``pocket-joe``
0.2 sdist: from ``DIR`` (an unpacked sdist; the tests fetch it once), else
fetched with :func:`upstream.fetch` into a temporary folder that is removed
afterwards. Their program is never kept in this repository and no line of
it is edited, not even in the temporary folder. Three names are redirected
in ``sys.modules`` before it is loaded, and that is all:

* ``pocket_joe`` and its submodules: Stalwart's ``stalwart.pocketjoe.v02``
  (``upstream.MODULES["0.2"]``, the alias their test suite runs under);
* ``examples.utils`` (a DuckDuckGo search, an OpenAI client, a YouTube
  transcript fetcher: network and keys): ``examples/pocketjoe_offline.py``,
  our offline stand-ins with the same names;
* ``examples``: a bare package over the sdist's ``examples/`` folder, so
  their modules are found there without running their ``utils/__init__``.

The runner: their ``main`` makes ``InMemoryRunner()`` and is run unchanged
without a URL. Given ``URL`` (``sqlite:///app.db``, a PostgreSQL URL), the
launcher rebinds the name ``InMemoryRunner`` in the loaded program's own
namespace to a function that makes ``DurableRunner(URL)``, and closes that
runner when ``main`` returns (theirs need not: memory holds nothing). So the
same program is durable: killed and run again, it resumes by replay.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

# This folder is on sys.path: the launcher is run as a script, never imported.
from upstream import EXAMPLES_VERSION, MODULES, fetch

PROGRAMS = ("search_agent", "youtube_summarizer")  # which files may be run (never a path)
STAND_INS = Path(__file__).resolve().parents[2] / "examples"


def alias(sdist: Path) -> None:
    """Point ``pocket_joe``, ``examples`` and ``examples.utils`` at what runs them here."""
    for name, module in MODULES["0.2"].items():
        sys.modules[name] = importlib.import_module(module)
    sys.path.insert(0, str(STAND_INS))
    offline = importlib.import_module("pocketjoe_offline")
    package = types.ModuleType("examples")
    package.__path__ = [str(sdist / "examples")]
    package.utils = offline  # type: ignore[attr-defined]
    sys.modules["examples"] = package
    sys.modules["examples.utils"] = offline


async def launch(sdist: Path, program: str, url: str | None) -> None:
    alias(sdist)
    module = importlib.import_module(f"examples.{program}")
    made: list[Any] = []
    if url is not None:
        durable = sys.modules["pocket_joe"].DurableRunner

        def durable_runner() -> Any:
            made.append(durable(url))
            return made[-1]

        module.InMemoryRunner = durable_runner
    try:
        await module.main()
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
    if not args or args[0] not in PROGRAMS or len(args) > 2:
        print(f"usage: upstream_examples.py {{{','.join(PROGRAMS)}}} [URL] [--sdist DIR]")
        return 2
    program, url = args[0], (args[1] if len(args) == 2 else None)
    if sdist is not None:
        asyncio.run(launch(sdist, program, url))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(launch(fetch(EXAMPLES_VERSION, Path(tmp)), program, url))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
