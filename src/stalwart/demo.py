"""`stalwart demo`: a research agent that survives ``kill -9``, with no API key.

The agent is a plain tool-calling loop around a heuristic model (a
:class:`~stalwart.testing.ScriptedLLM` whose replies read the tool results)
over a small corpus about Python releases, recorded on SQLite. The demo runs
it in a child process, kills that process with SIGKILL while it is in the
middle of a step, and resumes the run here: the steps the child finished come
back from the ledger, the rest run live. A counter file, written by every real
execution and kept outside both processes, shows that no finished step ran
twice.

The child is this module run as ``python -m stalwart.demo child ...``; running
``python -m stalwart.demo`` without arguments plays the whole demo, like
``stalwart demo``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core.context import Context
from .core.events import CallFinished, CallInfo, Hook, RunFinished
from .core.message import Message
from .core.policy import policy
from .core.redact import mask_url
from .runner import Runner
from .testing import ScriptedLLM, call

if TYPE_CHECKING:
    from asyncio.subprocess import Process

    from rich.console import Console

__all__ = ["CORPUS", "QUESTION", "DemoReport", "main", "research", "run_demo"]

QUESTION = (
    "Which Python release first offered a build without the GIL, "
    "and which release introduced the walrus operator?"
)

# The corpus the agent searches: one document per release.
CORPUS: dict[str, dict[str, str]] = {
    "python-3.8": {
        "title": "Python 3.8",
        "released": "2019-10-14",
        "text": (
            "Python 3.8 was released on 14 October 2019. It introduced assignment "
            "expressions, the walrus operator :=, which assigns to a variable inside an "
            "expression (PEP 572). Positional-only parameters, marked with a slash in a "
            "signature, arrived in the same release (PEP 570). F-strings gained the = "
            "specifier, which prints an expression together with its value for debugging."
        ),
    },
    "python-3.9": {
        "title": "Python 3.9",
        "released": "2020-10-05",
        "text": (
            "Python 3.9 was released on 5 October 2020. Dictionaries gained the union "
            "operators | and |= (PEP 584), and strings gained removeprefix and removesuffix "
            "(PEP 616). Standard collections such as list and dict can be used as generic "
            "types in annotations (PEP 585). CPython switched to a new PEG-based parser "
            "(PEP 617), and the zoneinfo module brought the IANA time zone database to the "
            "standard library."
        ),
    },
    "python-3.10": {
        "title": "Python 3.10",
        "released": "2021-10-04",
        "text": (
            "Python 3.10 was released on 4 October 2021. Its headline feature is structural "
            "pattern matching with the match and case statements (PEP 634). Union types can "
            "be written as X | Y (PEP 604), context managers can be grouped in parentheses, "
            "and error messages became much more precise."
        ),
    },
    "python-3.11": {
        "title": "Python 3.11",
        "released": "2022-10-24",
        "text": (
            "Python 3.11 was released on 24 October 2022. The Faster CPython project made "
            "it about 25 percent faster than 3.10 on the standard benchmark suite. Exception "
            "groups and except* let a program raise and handle several unrelated exceptions "
            "at once (PEP 654), tracebacks point at the exact expression that failed, and "
            "tomllib reads TOML files (PEP 680). asyncio gained TaskGroup."
        ),
    },
    "python-3.12": {
        "title": "Python 3.12",
        "released": "2023-10-02",
        "text": (
            "Python 3.12 was released on 2 October 2023. A new syntax declares type "
            "parameters and type aliases (PEP 695), and f-strings were given a formal "
            "grammar that lifts most of their old restrictions (PEP 701). Each "
            "subinterpreter can have its own GIL (PEP 684), a step towards parallelism, "
            "though the main interpreter keeps a global lock. The distutils package was "
            "removed."
        ),
    },
    "python-3.13": {
        "title": "Python 3.13",
        "released": "2024-10-07",
        "text": (
            "Python 3.13 was released on 7 October 2024. It was the first release to offer "
            "an experimental free-threaded build without the GIL, the global interpreter "
            "lock, so that threads can run Python code in parallel (PEP 703). It also ships "
            "an experimental JIT compiler (PEP 744) and a new interactive interpreter with "
            "multi-line editing and colour. Many legacy modules, the dead batteries, were "
            "removed (PEP 594)."
        ),
    },
}

_STOP_WORDS = (
    "a an and the of to in on for with which what who when where why how is was were "
    "did does do first python release version introduced offered"
)
_STOP = frozenset(_STOP_WORDS.split())

# Set by the process playing a part of the demo: the child (both) or the parent (counter).
_counter_path: str | None = None
_pause_at: str | None = None


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9][a-z0-9.+*|:=-]*", text.lower())


def _keywords(text: str) -> list[str]:
    return [w for w in _words(text) if w not in _STOP]


def _count(key: str, name: str) -> None:
    """Append one line per real execution, outside the process, for the proof."""
    if _counter_path is None:
        return
    with open(_counter_path, "a", encoding="utf-8") as f:
        f.write(f"{key}\t{name}\t{os.getpid()}\n")


# -- tools ---------------------------------------------------------------------
@policy
async def search_corpus(ctx: Context, query: str, limit: int = 3) -> list[dict[str, Any]]:
    """Search the release notes for documents about a topic.

    Args:
        query: Words to look for.
        limit: How many documents to return at most.
    """
    _count(ctx.step_key, "search_corpus")
    await asyncio.sleep(0.02)  # an index lookup takes a moment
    wanted = set(_keywords(query))
    hits: list[dict[str, Any]] = []
    for doc_id, doc in CORPUS.items():
        score = len(wanted & set(_words(doc["text"])))
        if score:
            snippet = doc["text"].split(". ")[1][:80]
            hits.append({"id": doc_id, "title": doc["title"], "score": score, "snippet": snippet})
    hits.sort(key=lambda h: (-h["score"], h["id"]))
    return hits[:limit]


@policy
async def read_document(ctx: Context, doc_id: str) -> dict[str, str]:
    """Read one document of the release notes in full.

    Args:
        doc_id: The id a search returned, such as "python-3.11".
    """
    _count(ctx.step_key, "read_document")
    await asyncio.sleep(0.02)
    if doc_id not in CORPUS:
        raise KeyError(f"no document {doc_id!r}; search first")
    return {"id": doc_id, **CORPUS[doc_id]}


TOOLS = [search_corpus, read_document]


# -- the heuristic model ---------------------------------------------------------
def _question(observations: Sequence[Message]) -> str:
    return next(m.text for m in observations if m.role == "user")


def _subquestions(observations: Sequence[Message]) -> list[str]:
    parts = re.split(r",?\s+and\s+(?=which|what|who|when)", _question(observations).rstrip("?"))
    return [p.strip() for p in parts if p.strip()]


def _results(observations: Sequence[Message], name: str) -> list[Any]:
    return [
        m.action_result.value
        for m in observations
        if m.action_result is not None
        and m.action_result.name == name
        and not m.action_result.is_error
    ]


def _search(n: int) -> Any:
    def reply(observations: list[Message], options: Sequence[Any]) -> Message:
        query = " ".join(_keywords(_subquestions(observations)[n]))
        return call("search_corpus", query=query)

    return reply


def _read_top_hit(observations: list[Message], options: Sequence[Any]) -> Message:
    hits = _results(observations, "search_corpus")[-1]
    return call("read_document", doc_id=hits[0]["id"])


def _answer(observations: list[Message], options: Sequence[Any]) -> str:
    lines = []
    docs = _results(observations, "read_document")
    for sub, doc in zip(_subquestions(observations), docs, strict=False):
        wanted = set(_keywords(sub))
        sentences = re.split(r"(?<=\.)\s+", doc["text"])
        best = max(sentences, key=lambda s: len(wanted & set(_words(s))))
        claim = re.sub(r"^(which|what)\s+(python\s+)?release\s+", "", sub, flags=re.I)
        lines.append(f"{doc['title']} (released {doc['released']}) {claim}: {best}")
    sources = ", ".join(d["id"] for d in docs)
    return "\n".join([*lines, f"Sources: {sources}."])


BRAIN = ScriptedLLM([_search(0), _read_top_hit, _search(1), _read_top_hit, _answer], name="model")


@policy
async def model(
    ctx: Context, observations: list[Message], options: Sequence[Any] = ()
) -> list[Message]:
    """One turn of the heuristic model: tool calls, or the final answer."""
    _count(ctx.step_key, "model")
    if ctx.step_key == _pause_at:
        # The child's cue: the steps before this one are committed; kill me now.
        line = {"event": "paused", "key": ctx.step_key, "name": "model", "pid": os.getpid()}
        print(json.dumps(line), flush=True)
        await asyncio.Event().wait()
    await asyncio.sleep(0.03)  # a model takes a while to think
    return await BRAIN(ctx, observations, options)


def _stable_ids(messages: list[Message]) -> list[Message]:
    """Name each tool result after its call, the same on every execution.

    The runtime builds result messages afresh when it replays a dispatch, with
    new random ids; fed back to the model they would make its next step differ
    from the record (S5). The call ids come from the recorded model output, so
    ids derived from them are stable.
    """
    return [
        replace(m, id=f"{m.action_result.call_id}:result") if m.action_result is not None else m
        for m in messages
    ]


_INSTRUCTIONS = "Answer from the release notes: search, read the best document, then answer."


@policy
async def research(ctx: Context, question: str, max_turns: int = 8) -> str:
    """A tool-calling agent: ask the model, run the calls it makes, until it answers."""
    # Fixed ids: the conversation is the model step's argument, so it must be
    # the same on every execution for replay to recognise the step (S5).
    conversation = [
        replace(Message.system(_INSTRUCTIONS), id=f"{ctx.run_id}:system"),
        replace(Message.user(question), id=f"{ctx.run_id}:question"),
    ]
    for _ in range(max_turns):
        reply = await ctx.call(model, conversation, options=TOOLS)
        conversation.extend(_stable_ids(reply))
        if not any(m.is_action_call for m in reply):
            return "\n".join(m.text for m in reply if m.role == "assistant")
    raise RuntimeError(f"no answer after {max_turns} turns")


# -- the child ---------------------------------------------------------------------
class _Announce(Hook):
    """Tells the parent, one JSON line per step, how far the child got."""

    async def after_call(self, call: CallInfo, result: Any) -> None:
        if call.key:
            summary = _describe(call.name, result)
            line = {"event": "step", "key": call.key, "name": call.name, "summary": summary}
            print(json.dumps(line), flush=True)


async def _child(store: str, run_id: str) -> None:
    async with Runner(store, hooks=[_Announce()], recover=False) as runner:
        await runner.run(research, question=QUESTION, run_id=run_id)


# -- the parent ----------------------------------------------------------------------
@dataclass
class DemoReport:
    """What the demo saw: the checks its test and its printout rely on."""

    run_id: str
    killed_at: str
    before_kill: list[str]
    replayed: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)
    executions: dict[str, int] = field(default_factory=dict)
    answer: str = ""
    same_as_uninterrupted: bool = False

    @property
    def ran_twice(self) -> list[str]:
        """Finished steps that executed more than once: must be empty."""
        return [k for k in self.before_kill if self.executions.get(k, 0) != 1]


def _message_line(m: Message) -> str:
    if m.action_call is not None:
        args = ", ".join(f"{k}={v!r}" for k, v in m.action_call.arguments.items())
        return f"{m.action_call.name}({args})"
    return m.text


def _describe(name: str, result: Any) -> str:
    """A short account of a step's result for the printout."""
    if isinstance(result, list) and result and all(isinstance(m, Message) for m in result):
        calls = [_message_line(m) for m in result if m.is_action_call]
        if calls:
            return "→ " + ", ".join(calls)
        return "answers"
    if name == "search_corpus" and isinstance(result, list):
        plural = "s" if len(result) != 1 else ""
        return f"{len(result)} hit{plural}: " + ", ".join(h["id"] for h in result)
    if name == "read_document" and isinstance(result, dict):
        return f"read {result['title']} ({result['released']})"
    text = str(result)
    return text if len(text) < 70 else text[:67] + "..."


def _step_line(console: Console, how: str, key: str, name: str, took: str, what: str) -> None:
    from rich.text import Text

    line = Text.from_markup(f"   {how}")
    line.pad_right(max(0, 15 - len(line)))
    line.append(f"{key:<5}{name:<14}{took:>6}  ")
    line.append(what, style="dim")
    console.print(line, no_wrap=True, overflow="ellipsis")


def _sort_key(key: str) -> list[tuple[int, int]]:
    return [(0 if sep != "#" else 1, int(n)) for sep, n in re.findall(r"(^|[.#])(\d+)", key)]


def _read_counter(path: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    if os.path.exists(path):
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            counts[line.split("\t")[0]] += 1
    return counts


async def _spawn(store: str, run_id: str, counter: str, pause_at: str) -> Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "stalwart.demo",
        "child",
        "--store",
        store,
        "--run-id",
        run_id,
        "--counter",
        counter,
        "--pause-at",
        pause_at,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _child_until_paused(
    proc: Process, console: Console, deadline: float
) -> tuple[list[str], dict[str, Any]]:
    """Relay the child's steps until it says it is paused mid-step."""
    assert proc.stdout is not None and proc.stderr is not None
    finished: list[str] = []
    while True:
        line = b""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                line = await proc.stdout.readline()
        if not line:
            if proc.returncode is None:
                proc.kill()
            err = (await proc.stderr.read()).decode(errors="replace").strip()
            raise RuntimeError(
                "the demo's child process stopped before its pause point"
                + (f":\n{err}" if err else " (timed out)")
            )
        event = json.loads(line)
        if event["event"] == "paused":
            return finished, event
        finished.append(event["key"])
        _step_line(
            console, "[green]✓ finished[/]", event["key"], event["name"], "", event["summary"]
        )


async def run_demo(
    store: str,
    console: Console,
    *,
    run_id: str | None = None,
    pause_at: str = "3",
    timeout: float = 30.0,
) -> DemoReport:
    """Play the demo on ``store`` and print it; the report carries the checks."""
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table

    run_id = run_id or f"demo-{uuid.uuid4().hex[:8]}"
    fd, counter = tempfile.mkstemp(prefix="stalwart-demo-", suffix=".counter")
    os.close(fd)
    global _counter_path
    try:
        console.print("[bold]Stalwart demo[/]: a durable research agent on SQLite, no API key")
        console.print(
            f"  store     {escape(mask_url(store))}\n"
            f"  run       {run_id}\n  question  {QUESTION}\n"
        )

        # 1. The child runs the agent until it is in the middle of step `pause_at`.
        proc = await _spawn(store, run_id, counter, pause_at)
        console.print(f"[bold]1.[/] a child process (pid {proc.pid}) runs the agent")
        try:
            before, paused = await _child_until_paused(proc, console, time.monotonic() + timeout)
            _step_line(console, "[yellow]… running[/]", paused["key"], paused["name"], "", "")
            proc.send_signal(signal.SIGKILL)
            code = await proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        console.print(
            f"   [red bold]✗ SIGKILL[/] while step {pause_at} was running: "
            f"the child is gone (exit code {code})\n"
        )

        # 2. This process resumes the run; the ledger answers for the finished steps.
        console.print(f"[bold]2.[/] this process (pid {os.getpid()}) resumes run {run_id}")
        _counter_path = counter
        report = DemoReport(run_id, pause_at, before)
        async with Runner(store, recover=False) as runner:
            status = (await runner.get_run(run_id)).status
            recorded = len(await runner.steps(run_id))
            console.print(
                f"   ledger after the crash: status [bold]{status}[/] (its holder is dead), "
                f"{recorded} steps recorded"
            )
            async for ev in runner.stream(research, question=QUESTION, run_id=run_id):
                if isinstance(ev, CallFinished) and ev.key:
                    how = "[cyan]↺ replayed[/]" if ev.replayed else "[green]▶ ran live[/]"
                    (report.replayed if ev.replayed else report.live).append(ev.key)
                    took = "" if ev.replayed else f"{ev.duration * 1000:.0f} ms"
                    _step_line(console, how, ev.key, ev.name, took, _describe(ev.name, ev.result))
                elif isinstance(ev, RunFinished):
                    if ev.status != "succeeded":
                        raise RuntimeError(f"the demo run ended {ev.status}: {ev.error}")
                    report.answer = str(ev.result)

        # 3. The proof: executions per step, counted outside both processes.
        counts = _read_counter(counter)
        report.executions = dict(counts)
        table = Table(title="executions per step (counter file)", title_justify="left")
        for col in ("step", "before the kill", "after", "executions"):
            table.add_column(col)
        for key in sorted(counts, key=_sort_key):
            if key in before:
                when, after = "finished", "replayed"
            elif key == pause_at:
                when, after = "in flight", "ran again"
            else:
                when, after = "-", "ran live"
            n = counts[key]
            table.add_row(key, when, after, str(n))
        console.print()
        console.print(table)
        if report.ran_twice:
            console.print(f"[red bold]✗ finished steps ran again: {report.ran_twice}[/]")
        else:
            console.print(
                f"[green bold]✓ no finished step ran twice[/]: the {len(before)} steps "
                f"finished before the kill ran once each; step {pause_at}, in flight at "
                "the kill, ran again (at least once, S3)."
            )

        _counter_path = None
        uninterrupted = await Runner().run(research, question=QUESTION)
        report.same_as_uninterrupted = uninterrupted == report.answer
        mark = "[green]✓[/]" if report.same_as_uninterrupted else "[red]✗[/]"
        console.print(f"{mark} the answer equals an uninterrupted run's\n")
        console.print(Panel(report.answer, title="final answer", title_align="left"))
        console.print(
            f"[dim]See the ledger: stalwart runs show {run_id} "
            f"--store {escape(mask_url(store))}[/]"
        )
        return report
    finally:
        _counter_path = None
        os.unlink(counter)


# -- entry points --------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m stalwart.demo [child ...]``: the demo, or its child's part."""
    parser = argparse.ArgumentParser(prog="python -m stalwart.demo")
    parser.add_argument("role", nargs="?", choices=["demo", "child"], default="demo")
    parser.add_argument(
        "--store", default=os.environ.get("STALWART_STORE", "sqlite:///stalwart.db")
    )
    parser.add_argument("--run-id")
    parser.add_argument("--counter")
    parser.add_argument("--pause-at", default="3")
    args = parser.parse_args(argv)
    if args.role == "child":
        global _counter_path, _pause_at
        _counter_path, _pause_at = args.counter, args.pause_at
        asyncio.run(_child(args.store, args.run_id))
        return 0
    from rich.console import Console

    report = asyncio.run(run_demo(args.store, Console(), run_id=args.run_id))
    return 1 if report.ran_twice else 0


if __name__ == "__main__":
    # Import the module under its own name, so that runs record the policy as
    # "stalwart.demo:research" (importable anywhere), not "__main__:research".
    from stalwart.demo import main as _main

    sys.exit(_main())
