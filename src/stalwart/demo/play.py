"""The demo, played: kill the child mid-step, resume the run here, count executions.

Three acts, each printed as it happens: a child process runs the agent until
it is in the middle of a step and is killed with SIGKILL; this process
resumes the run from the ledger (finished steps replayed, the rest live);
and a counter file kept outside both processes shows that no finished step
ran twice. Last, the answer is compared with an uninterrupted run's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.events import CallFinished, RunFinished
from ..core.redact import mask_url
from ..runner import Runner
from .agent import PROBE, research
from .child import run_child, spawn, until_paused
from .corpus import QUESTION
from .printout import describe, sort_key, step_line

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["DemoReport", "main", "run_demo"]


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

    run_id = run_id or f"demo-{uuid.uuid4().hex[:8]}"
    fd, counter = tempfile.mkstemp(prefix="stalwart-demo-", suffix=".counter")
    os.close(fd)
    try:
        console.print("[bold]Stalwart demo[/]: a durable research agent on SQLite, no API key")
        console.print(
            f"  store     {escape(mask_url(store))}\n  run       {run_id}\n  question  {QUESTION}\n"
        )
        before = await _kill_mid_step(store, run_id, counter, pause_at, timeout, console)
        report = DemoReport(run_id, pause_at, before)
        await _resume(store, report, counter, console)
        _prove(report, counter, console)

        PROBE.counter = None
        uninterrupted = await Runner().run(research, question=QUESTION)
        report.same_as_uninterrupted = uninterrupted == report.answer
        mark = "[green]✓[/]" if report.same_as_uninterrupted else "[red]✗[/]"
        console.print(f"{mark} the answer equals an uninterrupted run's\n")
        console.print(Panel(report.answer, title="final answer", title_align="left"))
        console.print(
            f"[dim]See the ledger: stalwart runs show {run_id} --store {escape(mask_url(store))}[/]"
        )
        return report
    finally:
        PROBE.counter = None
        os.unlink(counter)


async def _kill_mid_step(
    store: str, run_id: str, counter: str, pause_at: str, timeout: float, console: Console
) -> list[str]:
    """Act 1: the child runs the agent until it is in the middle of step ``pause_at``,
    and is killed there; the keys of the steps it finished before."""
    proc = await spawn(store, run_id, counter, pause_at)
    console.print(f"[bold]1.[/] a child process (pid {proc.pid}) runs the agent")
    try:
        before, paused = await until_paused(proc, console, time.monotonic() + timeout)
        step_line(console, "[yellow]… running[/]", paused["key"], paused["name"], "", "")
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
    return before


async def _resume(store: str, report: DemoReport, counter: str, console: Console) -> None:
    """Act 2: this process resumes the run; the ledger answers for the finished steps."""
    console.print(f"[bold]2.[/] this process (pid {os.getpid()}) resumes run {report.run_id}")
    PROBE.counter = counter
    async with Runner(store, serving=False) as runner:
        status = (await runner.get_run(report.run_id)).status
        recorded = (await runner.step_page(report.run_id, 0)).count
        console.print(
            f"   ledger after the crash: status [bold]{status}[/] (its holder is dead), "
            f"{recorded} steps recorded"
        )
        async for ev in runner.stream(research, question=QUESTION, run_id=report.run_id):
            if isinstance(ev, CallFinished) and ev.key:
                how = "[cyan]↺ replayed[/]" if ev.replayed else "[green]▶ ran live[/]"
                (report.replayed if ev.replayed else report.live).append(ev.key)
                took = "" if ev.replayed else f"{ev.duration * 1000:.0f} ms"
                step_line(console, how, ev.key, ev.name, took, describe(ev.name, ev.result))
            elif isinstance(ev, RunFinished):
                if ev.status != "succeeded":
                    raise RuntimeError(f"the demo run ended {ev.status}: {ev.error}")
                report.answer = str(ev.result)


def _prove(report: DemoReport, counter: str, console: Console) -> None:
    """Act 3: executions per step, counted outside both processes."""
    from rich.table import Table

    counts = _read_counter(counter)
    report.executions = dict(counts)
    table = Table(title="executions per step (counter file)", title_justify="left")
    for col in ("step", "before the kill", "after", "executions"):
        table.add_column(col)
    for key in sorted(counts, key=sort_key):
        if key in report.before_kill:
            when, after = "finished", "replayed"
        elif key == report.killed_at:
            when, after = "in flight", "ran again"
        else:
            when, after = "-", "ran live"
        table.add_row(key, when, after, str(counts[key]))
    console.print()
    console.print(table)
    if report.ran_twice:
        console.print(f"[red bold]✗ finished steps ran again: {report.ran_twice}[/]")
    else:
        console.print(
            f"[green bold]✓ no finished step ran twice[/]: the {len(report.before_kill)} steps "
            f"finished before the kill ran once each; step {report.killed_at}, in flight at "
            "the kill, ran again (at least once, S3)."
        )


def _read_counter(path: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    if os.path.exists(path):
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            counts[line.split("\t")[0]] += 1
    return counts


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
        PROBE.counter, PROBE.pause_at = args.counter, args.pause_at
        asyncio.run(run_child(args.store, args.run_id))
        return 0
    from rich.console import Console

    report = asyncio.run(run_demo(args.store, Console(), run_id=args.run_id))
    return 1 if report.ran_twice else 0
