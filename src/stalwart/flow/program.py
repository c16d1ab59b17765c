"""An unmodified PocketFlow program, durable: what ``stalwart run PROGRAM.py`` does.

:meth:`Program.execute` runs a program file as ``python PROGRAM.py ARGS``
would (``__name__ == "__main__"``, ``sys.argv``, its folder first on
``sys.path``), with three things changed for as long as it runs, in this
process only, and put back afterwards:

* ``import pocketflow`` gives ``stalwart.flow`` (an entry of
  ``sys.modules``; an installed ``pocketflow`` is neither imported nor
  changed, and any other process still finds it);
* every flow the program runs outside any run, ``flow.run(shared)`` or
  ``await flow.run_async(shared)``, is a durable run of its own on the
  store (`Program` is the `._seam.TopLevel`): it returns the flow's last
  action and leaves the results in the caller's ``shared``, in place, as
  PocketFlow does;
* ``input()`` is a recorded step inside those runs (:mod:`.answers`);
  ``getpass.getpass()`` is not: a secret never reaches the ledger.

Run ids. The n-th flow the program runs (counted from 1, in the order its
runs start) is the run ``BASE`` for n = 1 and ``BASE.n`` after, where
``BASE`` is ``--run-id`` if given, else ``<stem>-<digest>``: the program
file's name without ``.py`` and the first 12 hex digits of the SHA-256 of
its absolute path and its arguments, each followed by a NUL byte
(:func:`base_run_id`). The same command, from anywhere, gives the same
ids; so running it again after a crash resumes each flow where it stopped,
and running it again after it finished replays its results.

Nothing read from the store decides what is imported or called: the flows
and their nodes are the program's own objects; a run is resumed only under
the flow the program passes (the runner never adopts another process's
abandoned runs here, ``Runner(adopt_abandoned=False)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import runpy
import sys
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import codec
from ..core.ledger import CHILD_MARK, check_run_id
from ..stores.base import Store
from ._seam import use_top_level
from .answers import recording_answers
from .events import flow_name
from .visits import POST

__all__ = ["FlowRun", "Program", "base_run_id", "flow_run_id"]

#: The modules a program imports that ``stalwart.flow`` serves.
SERVED = ("pocketflow",)

_DIGITS = 12


def base_run_id(program: str | Path, args: Sequence[str]) -> str:
    """``<stem>-<digest>``: the base of the run ids of ``program`` run with
    ``args`` (see the module's docstring)."""
    path = Path(program).resolve()
    digest = hashlib.sha256()
    for part in (str(path), *args):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    stem = path.stem.replace(CHILD_MARK, "-")[:100] or "program"
    return f"{stem}-{digest.hexdigest()[:_DIGITS]}"


def flow_run_id(base: str, n: int) -> str:
    """The run id of the ``n``-th flow (from 1) a program runs."""
    return base if n == 1 else f"{base}.{n}"


@dataclass
class FlowRun:
    """One flow a program ran: its run, and how it ended (None: still running)."""

    run_id: str
    flow: str
    status: str | None = None
    error: BaseException | None = None


class Program:
    """Runs a program's top-level flows as durable runs on ``store`` (a URL;
    each flow opens it for its run).

    ``base`` is the base of their run ids (:func:`base_run_id`, or the
    user's ``--run-id``). ``runs`` lists the flows run so far, in order.
    """

    def __init__(self, store: str, base: str) -> None:
        self.base = check_run_id(base)
        check_run_id(flow_run_id(base, 2))  # a longer id: refused here, not mid-program
        self.store = store
        self.runs: list[FlowRun] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    # -- the program ---------------------------------------------------------------
    def execute(self, program: str | Path, args: Sequence[str]) -> None:
        """Run ``program`` (a file) with ``args`` as ``python program args``
        would, its flows durable; whatever it raises goes on up (its
        ``SystemExit`` included)."""
        path = Path(program)
        with self._served(path, args):
            runpy.run_path(str(path), run_name="__main__")

    @contextlib.contextmanager
    def _served(self, path: Path, args: Sequence[str]) -> Iterator[None]:
        from .. import flow as served

        saved_modules = {name: sys.modules.get(name) for name in SERVED}
        saved_argv, saved_path = sys.argv[:], sys.path[:]
        sys.argv[:] = [str(path), *args]
        folder = str(path.resolve().parent)
        if sys.path:
            sys.path[0] = folder  # as `python PROGRAM.py` does
        else:
            sys.path.append(folder)
        for name in SERVED:
            sys.modules[name] = served
        try:
            with use_top_level(self), recording_answers(lambda: self._loop):
                yield
        finally:
            for name, module in saved_modules.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module
            sys.argv[:] = saved_argv
            sys.path[:] = saved_path

    # -- its flows (the seam's TopLevel) -------------------------------------------
    def run(self, flow: Any, shared: Any) -> Any:
        """``flow.run(shared)`` at the program's top level: a durable run."""
        started = self._next(flow)
        if not _in_async_code():
            return asyncio.run(self._run(flow, shared, started))
        # Called from async code: as blocking as in PocketFlow, on a loop of its own.
        with ThreadPoolExecutor(1, thread_name_prefix="stalwart-flow") as pool:
            return pool.submit(asyncio.run, self._run(flow, shared, started)).result()

    async def run_async(self, flow: Any, shared: Any) -> Any:
        """``await flow.run_async(shared)`` at the program's top level: a durable run."""
        return await self._run(flow, shared, self._next(flow))

    def _next(self, flow: Any) -> FlowRun:
        with self._lock:  # the order the runs start in names them
            started = FlowRun(flow_run_id(self.base, len(self.runs) + 1), flow_name(flow))
            self.runs.append(started)
        return started

    async def _run(self, flow: Any, shared: Any, started: FlowRun) -> Any:
        from ..runner import Runner

        self._loop = asyncio.get_running_loop()
        async with Runner(self.store, adopt_abandoned=False) as runner:
            try:
                await runner.run(flow, shared=shared, run_id=started.run_id, in_place=True)
            except BaseException as exc:
                started.error = exc
                with contextlib.suppress(Exception):
                    rec = await runner.store.get_run(started.run_id)
                    started.status = None if rec is None else rec.status
                raise
            started.status = "succeeded"
            return await _last_action(runner.store, started.run_id)


def _in_async_code() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _last_action(store: Store, run_id: str) -> Any:
    """What the flow's ``post`` returned, as ``flow.run`` returns it: the
    record of the run's first visit, the flow itself (``1``, see
    :mod:`.durable`)."""
    step = await store.load_step(run_id, "1.post")
    if step is None or step.output is None or step.name != f"stalwart.{POST}":
        return None
    record = codec.loads(step.output, f"step 1.post of run {run_id!r}")
    return codec.decode(record.get("action")) if isinstance(record, dict) else None
