"""What a person types, recorded: ``input()`` inside a durable run.

Under ``stalwart run`` (:mod:`stalwart.flow.program`) ``input`` is
replaced, for the program's process, by :func:`recording_answers`. Called
outside a durable run (at the program's top level, say) it is the original.
Called inside one (a node's ``prep``, ``exec`` or ``post``), each call is a
recorded step, a unit of the run (``docs/journaling.md``) named ``input``,
keyed as a child of the step it runs in (``V.prep.1``,
``V.exec.2``: S1) and identified by its prompt: the first time the person
is asked and the answer recorded before the call returns; on replay the
recorded answer comes back and nobody is asked. A prompt that differs from
the recorded one at that key is nondeterminism (S5).

Only answers are recorded: a call that raises (``EOFError`` when the input
ends, ``KeyboardInterrupt``) records nothing and asks again next time.

Where the answer is typed decides when it is written. From a sync flow's
worker thread (a sync node of a sync ``Flow``) it is written before
``input()`` returns. From the event loop's own thread (any node of an
``AsyncFlow``, whose sync nodes run on the loop as in PocketFlow) the call
cannot wait for the loop it blocks: the record is written at the node's
next await, and a crash before it asks that question again.

``getpass.getpass()`` is never recorded: what it reads is a secret, and a
credential never reaches the ledger. It asks again when the node that
called it runs again (after a crash, the node that was running).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..core.context import Context
from ..core.errors import CorruptedRecord
from ..core.policy import current_context

__all__ = ["recorded_answer", "recording_answers"]

# Records written from the loop's thread, kept until written (a task nobody
# holds may be collected before it runs).
_writing: set[asyncio.Task[Any]] = set()


def recorded_answer(
    kind: str,
    ask: Callable[[Any], str],
    prompt: Any,
    loop: asyncio.AbstractEventLoop | None,
) -> str:
    """``ask(prompt)`` as the step ``kind`` of the durable run this code runs
    in (its recorded answer on replay), or as it is outside one.

    ``loop`` is the event loop the run executes on, which writes the record.
    """
    ctx = current_context()
    if ctx is None or loop is None or loop.is_closed() or not ctx.engine.durable:
        return ask(prompt)
    engine = ctx.engine
    key = ctx.next_key()  # taken before anything else happens (S1)
    identity = {"prompt": str(prompt)}
    found, value = engine.replayed_unit(key, kind, identity)
    if found:
        return _answer_text(ctx, key, value)
    started = time.time()
    answer = ask(prompt)  # raises: nothing recorded, asked again next time

    async def given(unit: Context) -> str:
        return answer

    record = engine.run_unit(key, kind, given, identity, started)
    if _on_thread_of(loop):
        task = loop.create_task(record)
        _writing.add(task)
        task.add_done_callback(_written)
        return answer
    won = asyncio.run_coroutine_threadsafe(record, loop).result()
    return _answer_text(ctx, key, won)  # the answer that won the record (S3)


def _answer_text(ctx: Context, key: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    problem = CorruptedRecord(
        f"step {key} of run {ctx.engine.run_id!r}: the recorded answer is a "
        f"{type(value).__name__}, not a string"
    )
    raise ctx.engine.halt(problem)


def _on_thread_of(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _written(task: asyncio.Task[Any]) -> None:
    _writing.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: a failed write halts the run, which reports it


@contextlib.contextmanager
def recording_answers(loop_of: Callable[[], asyncio.AbstractEventLoop | None]) -> Iterator[None]:
    """Make ``input`` a recorded step inside durable runs, until the block
    ends; ``loop_of()`` names the loop the run executes on. For the whole
    process: a program's own threads included. (``getpass`` is left alone:
    a secret is never recorded.)"""
    original_input = builtins.input

    def recorded_input(prompt: Any = "", /) -> str:
        return recorded_answer("input", original_input, prompt, loop_of())

    recorded_input.__doc__ = original_input.__doc__
    builtins.input = recorded_input
    try:
        yield
    finally:
        builtins.input = original_input
