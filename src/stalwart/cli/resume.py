"""``stalwart runs resume``: claim one run and drive it to its end in this process.

The run executes under a policy ``--app`` provides, found by the name its
row records (S13). Finished steps are replayed from the ledger; the rest run
live, and each is printed as it finishes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from ..core.errors import CLIError
from ..core.ledger import TERMINAL
from ..core.redact import printable
from ..stores.base import children_prefix
from .apps import AppOption, app_policies, policy_for
from .command import (
    DEFAULT_STORE,
    StoreOption,
    console,
    execute,
    get_run,
    lit,
    runner_for,
)

if TYPE_CHECKING:
    from ..core.events import Event
    from ..core.ledger import RunRecord
    from ..core.policy import Policy
    from ..runner import Runner

__all__ = ["resume_run"]


def _recorded_inputs(pol: Policy[Any, Any], rec: RunRecord) -> tuple[list[Any], dict[str, Any]]:
    """The run's arguments, read back as the types its policy declares.

    Starting the run again with them is how it is claimed and resumed; the
    runner finds them equal to the recorded ones. A row naming any other type
    is refused by the codec (nothing is imported).
    """
    from ..core import codec

    pol.declare_types()
    inputs = codec.loads(rec.inputs, f"inputs of run {rec.id!r}")
    args = inputs.get("args") if isinstance(inputs, dict) else None
    kwargs = inputs.get("kwargs") if isinstance(inputs, dict) else None
    if not isinstance(args, list) or not isinstance(kwargs, dict) or "run_id" in kwargs:
        raise CLIError(f"run {rec.id!r} has inputs that are not a call's arguments")
    return args, kwargs


async def _drive(
    runner: Runner, target: Policy[Any, Any], rec: RunRecord, out: Console, quiet: bool
) -> RunRecord:
    """Claim the run and execute it here until it finishes, sleeps or waits.

    ``Runner.stream`` listens before it starts the run, so replayed steps are
    seen too. Its stream ends by itself only when the run finishes (a run
    that suspends just goes quiet), so the store's record says when this
    execution is over: the claim taken here (a new fence) is gone.
    """
    from ..stores.base import owner_is_dead

    now = time.time()
    lease_live = (rec.lease_expires_at or 0) > now
    if rec.status == "running" and lease_live and not owner_is_dead(rec.owner):
        raise CLIError(_held(rec))
    if rec.cancel_requested:
        raise CLIError(f"run {rec.id!r} has a cancel request pending; it cannot be resumed")
    args, kwargs = _recorded_inputs(target, rec)
    events = runner.stream(target, *args, run_id=rec.id, **kwargs)
    consumer = asyncio.create_task(_print_events(events, out, quiet))
    deadline = now + 10.0
    try:
        while True:
            done, _ = await asyncio.wait({consumer}, timeout=0.05)
            current = await runner.get_run(rec.id)
            if current.status in ("succeeded", "failed", "cancelled"):
                await asyncio.wait({consumer}, timeout=1.0)  # the last lines
                return current
            if current.fence == rec.fence:  # not claimed yet
                if done:
                    consumer.result()  # start() failed: raise its error
                    return current
                if time.time() > deadline:
                    raise CLIError(f"could not claim run {rec.id!r} ({current.status})")
                continue
            if current.status == "running" and current.owner == runner.owner:
                continue
            if current.status == "running":
                raise CLIError(_held(current))
            return current  # suspended (or handed back): this execution is over
    finally:
        if not consumer.done():
            consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)


def _held(rec: RunRecord) -> str:
    lease = time.strftime("%H:%M:%S", time.localtime(rec.lease_expires_at or 0))
    return f"run {rec.id!r} is being executed by {rec.owner} (lease until {lease})"


async def _print_events(events: AsyncIterator[Event], out: Console, quiet: bool) -> None:
    from ..core.events import CallFailed, CallFinished
    from .render.times import duration
    from .render.values import short

    async for ev in events:
        if not quiet and isinstance(ev, CallFinished | CallFailed) and ev.key:
            line = Text("  ")
            step = printable(f"  {ev.key:<8} {ev.name}  ")
            if isinstance(ev, CallFinished):
                line.append(*(("↺ replayed", "cyan") if ev.replayed else ("▶ ran live", "green")))
                line.append(step + ("" if ev.replayed else duration(ev.duration)))
            else:
                line.append("↺ replayed" if ev.replayed else "✗ failed  ", "red")
                line.append(step)
                error = printable(f"{ev.error_type}: {ev.error_message}")
                line.append(short(error, 80), "red")
            out.print(line, no_wrap=True, overflow="ellipsis")


def resume_run(
    run_id: Annotated[str, typer.Argument(help="The run's id.", metavar="RUN")],
    app_spec: AppOption = "",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the outcome.")] = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Claim a run and drive it to its end in this process, under a policy from --app.

    Finished steps are replayed from the ledger; the rest run live. A durable
    sleep is waited out; a wait for a signal ends the command (send the
    signal, then resume again).
    """
    out = console()

    async def go() -> int:
        policies = app_policies(app_spec) if app_spec else []
        async with runner_for(store, policies) as runner:
            rec = await get_run(runner, run_id)
            target: Policy[Any, Any] | None = None
            if rec.parent_id is not None and rec.status not in TERMINAL:
                raise CLIError(
                    f"run {run_id!r} is a child run of {rec.parent_id!r}: a worker executes it "
                    f"(`stalwart worker --app MODULE`), or resume its parent"
                )
            while rec.status not in TERMINAL:
                if rec.status == "suspended" and children_prefix(rec.waiting_for) is not None:
                    out.print(
                        f"run {lit(run_id)} waits for its child runs: a worker executes them "
                        "(`stalwart worker --app MODULE` on this store), and the last one to "
                        "finish wakes it; resume it then"
                    )
                    return 0
                if rec.status == "suspended" and rec.waiting_for:
                    out.print(
                        f"run {lit(run_id)} waits for the signal {lit(repr(rec.waiting_for))}: "
                        f"send it with `stalwart signal {lit(run_id)} {lit(rec.waiting_for)} "
                        "JSON`, then resume again"
                    )
                    return 0
                if target is None:
                    target = policy_for(runner, rec, app_spec, policies)
                    out.print(f"resuming run [bold]{lit(run_id)}[/] ({lit(rec.policy)})")
                if rec.status == "suspended" and rec.wake_at is not None:
                    delay = rec.wake_at - time.time()
                    if delay > 0:
                        out.print(f"  sleeping {delay:.1f} s, until the run's wake time")
                        await asyncio.sleep(delay)
                rec = await _drive(runner, target, rec, out, quiet)
        return _print_outcome(rec, out)

    code = execute(go)
    if code:
        raise typer.Exit(code)


def _print_outcome(rec: RunRecord, out: Console) -> int:
    """The run's recorded outcome, as stored (nothing is rebuilt); the exit code."""
    from .render.values import error_text, stored, value_text

    if rec.status == "succeeded":
        out.print(Text.assemble(("succeeded", "green"), ": ", value_text(stored(rec.result), None)))
        return 0
    detail = error_text(rec.error) if rec.error else ""
    out.print(Text.assemble((printable(rec.status), "red"), ": ", detail))
    return 1
