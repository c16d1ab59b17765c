"""The ``stalwart`` command: inspect and operate the runs of a store.

Each command opens the store, does one thing through the public
:class:`~stalwart.runner.Runner` API, and closes it. The runner never
recovers runs on its own here (``recover=False``): a command that inspects
or signals a run must not start executing other people's runs as a side
effect. Expected failures (unknown run, bad store, bad input) print one line
on stderr and exit non-zero; only bugs show a traceback.

What a store holds is data, possibly written by someone else (S13): no
command imports a name read from it (a run resumes only under a policy that
``--app`` provides), and everything printed from it has its terminal
controls escaped. A store URL is printed with its password masked.
"""

from __future__ import annotations

import asyncio
import enum
import importlib
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ..core.redact import mask_url, printable, redact

if TYPE_CHECKING:
    from ..core.events import Event
    from ..core.ledger import RunRecord
    from ..core.policy import Policy
    from ..runner import Runner
    from ..stores.base import Store

__all__ = ["CLIError", "app", "parse_duration"]

T = TypeVar("T")

DEFAULT_STORE = "sqlite:///stalwart.db"

app = typer.Typer(
    name="stalwart",
    help="Durable AI agents: inspect, resume, signal and prune the runs of a store.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
runs_app = typer.Typer(help="List, show, resume, cancel and prune runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")

StoreOption = Annotated[
    str,
    typer.Option(
        "--store",
        "-s",
        envvar="STALWART_STORE",
        help="Store URL: sqlite:///path.db or postgresql://…",
        show_envvar=True,
    ),
]


class Status(enum.StrEnum):
    pending = "pending"
    running = "running"
    suspended = "suspended"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


class CLIError(Exception):
    """An expected failure: reported in one line, with an exit code, no traceback."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _out() -> Console:
    return Console(highlight=False)


def _lit(value: object) -> str:
    """Ledger content (or a user's argument) for a markup string: shown as it
    is, neither read as markup nor able to drive the terminal."""
    return escape(printable(str(value)))


def _fail(message: str, code: int) -> NoReturn:
    """One line on stderr. Error messages quote store URLs and ledger content
    (run ids, stored inputs), so passwords are masked here, once for all."""
    text = printable(redact(message.strip()))
    first = text.splitlines()[0] if text else "failed"
    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"[red bold]error:[/] {escape(first)}"
    )
    raise typer.Exit(code)


def _execute(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a command's coroutine; turn expected errors into one line and an exit code."""
    from ..core.errors import StalwartError

    try:
        return asyncio.run(make())
    except CLIError as exc:
        _fail(str(exc), exc.code)
    except StalwartError as exc:  # unknown run, store errors, input mismatch...
        _fail(str(exc), 1)


def _open(url: str, *, must_exist: bool = True) -> Store:
    """The store behind ``url``; a missing SQLite file is an error, not a new ledger."""
    from ..stores import open_store
    from ..stores.sqlite import SQLiteStore

    store = open_store(url)
    if store is None:
        raise CLIError(f"{mask_url(url)!r} keeps runs in memory only; give a durable store URL")
    if must_exist and isinstance(store, SQLiteStore) and not Path(store.path).exists():
        raise CLIError(
            f"no store at {store.path!r}: give --store sqlite:///path.db or set STALWART_STORE"
        )
    return store


def _runner(url: str, policies: Sequence[Policy[Any, Any]] = ()) -> Runner:
    from ..runner import Runner

    return Runner(_open(url), policies=policies, recover=False)


async def _get(runner: Runner, run_id: str) -> RunRecord:
    from ..core.errors import RunNotFound

    try:
        return await runner.get_run(run_id)
    except RunNotFound:
        raise CLIError(f"no run {run_id!r} in {_store_url(runner)}") from None


def _store_url(runner: Runner) -> str:
    return mask_url(runner.store.url) if runner.store is not None else "memory"


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """Seconds in "7d", "12h", "30m", "45s", "2w" or "1h30m"."""
    cleaned = text.strip().lower().replace(" ", "")
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhdw])", cleaned)
    if not parts or "".join(n + u for n, u in parts) != cleaned:
        raise CLIError(
            f"cannot read the duration {text!r}: write it like 7d, 12h, 30m or 1h30m", code=2
        )
    return sum(float(n) * _UNITS[u] for n, u in parts)


# -- runs list / show ----------------------------------------------------------
@runs_app.command("list")
def list_runs(
    status: Annotated[
        Status | None, typer.Option("--status", help="Only runs with this status.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")] = 50,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """List runs, newest first."""
    from .render import runs_table

    async def go() -> None:
        async with _runner(store) as runner:
            runs = await runner.list_runs(status.value if status else None, limit)
        kind = f"{status.value} " if status else ""
        if not runs:
            _out().print(f"no {kind}runs in {_lit(mask_url(store))}")
            return
        plural = "s" if len(runs) != 1 else ""
        _out().print(runs_table(runs, f"{len(runs)} {kind}run{plural} in {mask_url(store)}"))

    _execute(go)


@runs_app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    full: Annotated[bool, typer.Option("--full", help="Do not shorten values.")] = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Show a run: status, inputs, outcome, and its steps as a tree by key."""
    from .render import run_header, steps_tree

    limit = None if full else 100

    async def go() -> None:
        async with _runner(store) as runner:
            rec = await _get(runner, run_id)
            steps = await runner.steps(run_id)
        out = _out()
        out.print(run_header(rec, limit=None if full else 300))
        if steps:
            out.print(steps_tree(steps, f"{len(steps)} recorded steps", limit=limit))
        else:
            out.print("no recorded steps")

    _execute(go)


# -- the application: where policies come from ------------------------------------------
AppOption = Annotated[
    str,
    typer.Option(
        "--app",
        help=(
            "Your policies: a module or .py file (every policy in it), or module:attr "
            "(a policy, a list or dict of them, or a Context subclass)."
        ),
    ),
]


def _import_app(module: str) -> ModuleType:
    """Import ``package.module``, or a file ``path/to/agents.py`` (its folder joins the path)."""
    if module.endswith(".py") or os.sep in module:
        path = Path(module)
        if not path.is_file():
            raise CLIError(f"cannot import the app {module!r}: no such file")
        folder = str(path.resolve().parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        module = path.stem
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # `--app myproject.agents` from the project root
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise CLIError(f"cannot import the app module {module!r}: {exc}") from None
    except Exception as exc:
        raise CLIError(
            f"importing the app module {module!r} failed: {type(exc).__name__}: {exc}"
        ) from None


def _app_policies(spec: str) -> list[Policy[Any, Any]]:
    """The policies ``--app`` names: the only ones a run may be resumed under (S13).

    ``module`` gives every policy defined or imported at its top level (and
    those of its Context subclasses); ``module:attr`` gives what ``attr``
    holds. The store never adds to this list: a run row naming a policy
    that is not here is refused, not imported.
    """
    from ..core.policy import as_policy

    module, _, attr = spec.partition(":")
    mod = _import_app(module)
    if not attr:
        return _unique(p for value in vars(mod).values() for p in _policies_in(value))
    try:
        target = getattr(mod, attr)
    except AttributeError:
        raise CLIError(f"the app module {module!r} has no attribute {attr!r}") from None
    found = _policies_in(target, nested=True)
    if not found and callable(target) and not isinstance(target, type):
        found = [as_policy(target)]  # a plain async function, named on purpose
    if not found:
        raise CLIError(f"--app {spec!r} holds no policy")
    return _unique(found)


def _policies_in(value: Any, *, nested: bool = False) -> list[Policy[Any, Any]]:
    """The policies ``value`` is or holds: a policy (or an object that carries
    one, like a model or an agent), an application Context subclass, and, when
    ``nested``, the items of a list, tuple, set or dict."""
    from ..core.context import Context
    from ..core.policy import Policy

    if isinstance(value, Policy):
        return [value]
    if isinstance(value, type):
        if not issubclass(value, Context) or value is Context:
            return []
        own = [k for k in value.__mro__ if issubclass(k, Context) and k is not Context]
        return [p for klass in own for v in vars(klass).values() for p in _policies_in(v)]
    carried = getattr(value, "__stalwart_policy__", None)
    if isinstance(carried, Policy):
        return [carried]
    if nested and isinstance(value, dict):
        value = list(value.values())
    if nested and isinstance(value, list | tuple | set | frozenset):
        return [p for v in value for p in _policies_in(v, nested=True)]
    return []


def _unique(policies: Iterable[Policy[Any, Any]]) -> list[Policy[Any, Any]]:
    """Each policy once (a module may hold one under two names)."""
    return list({id(p): p for p in policies}.values())


def _policy_for(runner: Runner, rec: RunRecord, app_spec: str) -> Policy[Any, Any]:
    """The policy ``--app`` gave for this run, looked up by the name the row records."""
    pol = runner.find_policy(rec.policy)  # registered policies only; never an import
    if pol is not None:
        return pol
    if app_spec:
        raise CLIError(
            f"run {rec.id!r} needs policy {rec.policy!r}, which --app {app_spec!r} did not provide"
        )
    raise CLIError(
        f"run {rec.id!r} needs policy {rec.policy!r}: "
        "give the module that defines it with --app MODULE"
    )


# -- runs resume -----------------------------------------------------------------
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
    from .render import duration, short

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


@runs_app.command("resume")
def resume_run(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    app_spec: AppOption = "",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the outcome.")] = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Claim a run and drive it to its end in this process, under a policy from --app.

    Finished steps are replayed from the ledger; the rest run live. A durable
    sleep is waited out; a wait for a signal ends the command (send the
    signal, then resume again).
    """
    out = _out()

    async def go() -> int:
        policies = _app_policies(app_spec) if app_spec else []
        async with _runner(store, policies) as runner:
            rec = await _get(runner, run_id)
            target: Policy[Any, Any] | None = None
            while rec.status not in ("succeeded", "failed", "cancelled"):
                if rec.status == "suspended" and rec.waiting_for:
                    out.print(
                        f"run {_lit(run_id)} waits for the signal {_lit(repr(rec.waiting_for))}: "
                        f"send it with `stalwart signal {_lit(run_id)} {_lit(rec.waiting_for)} "
                        "JSON`, then resume again"
                    )
                    return 0
                if target is None:
                    target = _policy_for(runner, rec, app_spec)
                    out.print(f"resuming run [bold]{_lit(run_id)}[/] ({_lit(rec.policy)})")
                if rec.status == "suspended" and rec.wake_at is not None:
                    delay = rec.wake_at - time.time()
                    if delay > 0:
                        out.print(f"  sleeping {delay:.1f} s, until the run's wake time")
                        await asyncio.sleep(delay)
                rec = await _drive(runner, target, rec, out, quiet)
        return _print_outcome(rec, out)

    code = _execute(go)
    if code:
        raise typer.Exit(code)


def _print_outcome(rec: RunRecord, out: Console) -> int:
    """The run's recorded outcome, as stored (nothing is rebuilt); the exit code."""
    from .render import error_text, stored, value_text

    if rec.status == "succeeded":
        out.print(Text.assemble(("succeeded", "green"), ": ", value_text(stored(rec.result), None)))
        return 0
    detail = error_text(rec.error) if rec.error else ""
    out.print(Text.assemble((printable(rec.status), "red"), ": ", detail))
    return 1


# -- runs cancel / prune, signal ----------------------------------------------------
@runs_app.command("cancel")
def cancel_run(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Cancel a run: at once if nobody executes it, else at its next await."""

    async def go() -> None:
        async with _runner(store) as runner:
            before = await _get(runner, run_id)
            if before.status == "cancelled":
                _out().print(f"run {_lit(run_id)} was already cancelled")
                return
            if before.status in ("succeeded", "failed"):
                raise CLIError(f"run {run_id!r} has already finished ({before.status})")
            await runner.cancel(run_id)
            after = await _get(runner, run_id)
        if after.status == "cancelled":
            _out().print(f"cancelled run {_lit(run_id)}")
        else:
            _out().print(
                f"cancel requested: run {_lit(run_id)} is {_lit(after.status)} on "
                f"{_lit(after.owner or '?')}; it stops at its next await, within a heartbeat"
            )

    _execute(go)


@runs_app.command("prune")
def prune_runs(
    older_than: Annotated[
        str | None,
        typer.Option("--older-than", help="Delete finished runs older than this: 7d, 12h, 30m."),
    ] = None,
    keep: Annotated[
        int | None, typer.Option("--keep", min=0, help="Keep only the N most recent finished runs.")
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Delete finished runs (and their steps and signals) by age or count."""
    if older_than is None and keep is None:
        _fail("say what to prune: --older-than 7d, --keep N, or both", 2)
    try:
        seconds = None if older_than is None else parse_duration(older_than)
    except CLIError as exc:
        _fail(str(exc), exc.code)

    async def go() -> None:
        async with _runner(store) as runner:
            count = await runner.prune(older_than=seconds, keep=keep)
        _out().print(f"pruned {count} finished run{'s' if count != 1 else ''}")

    _execute(go)


@app.command("signal")
def send_signal(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    name: Annotated[str, typer.Argument(help="The signal's name, as the run waits for it.")],
    payload: Annotated[str, typer.Argument(help="The payload, as JSON (e.g. '{\"ok\": true}').")],
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Send a signal to a run; it is queued if the run does not wait for it yet."""
    try:
        value = json.loads(payload)
    except ValueError as exc:
        _fail(f"the payload is not valid JSON ({exc}): {payload!r}", 2)

    async def go() -> None:
        async with _runner(store) as runner:
            before = await _get(runner, run_id)
            await runner.signal(run_id, name, value)
            after = await _get(runner, run_id)
        out = _out()
        out.print(f"sent signal {_lit(repr(name))} to run {_lit(run_id)}")
        if (
            before.status == "suspended"
            and before.waiting_for == name
            and after.status == "pending"
        ):
            out.print(
                "the run was waiting for it and is ready: a runner on this store resumes it, "
                f"or run `stalwart runs resume {_lit(run_id)} --app YOUR_MODULE`"
            )
        else:
            out.print(
                f"queued: the run ({_lit(after.status)}) takes it when it waits for "
                f"{_lit(repr(name))}"
            )

    _execute(go)


# -- demo ----------------------------------------------------------------------------
@app.command("demo")
def demo(store: StoreOption = DEFAULT_STORE) -> None:
    """Run a research agent, kill it with SIGKILL mid-run, and resume it from the ledger."""

    async def go() -> bool:
        from ..demo import run_demo

        probe = _open(store, must_exist=False)
        await probe.open()  # a bad store fails here, before any process is started
        await probe.close()
        try:
            report = await run_demo(store, _out())
        except RuntimeError as exc:  # the child failed to start or to reach its pause
            raise CLIError(str(exc)) from None
        return not report.ran_twice and report.same_as_uninterrupted

    if not _execute(go):
        raise typer.Exit(1)


# -- worker ----------------------------------------------------------------------------
@app.command("worker")
def worker(
    store: StoreOption = DEFAULT_STORE,
    app_spec: AppOption = "",
    queue: Annotated[
        list[str] | None,
        typer.Option("--queue", "-q", help="queue to take runs from (repeat; default: all)"),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="most runs this worker executes at once")] = 50,
    lease: Annotated[float, typer.Option(help="seconds a claim lasts without a heartbeat")] = 30.0,
    shutdown_timeout: Annotated[
        float, typer.Option(help="seconds held runs may finish after SIGTERM")
    ] = 30.0,
) -> None:
    """Execute runs from the store's queues until SIGTERM (then finish or hand back)."""

    async def go() -> None:
        from ..runner import Runner

        policies = _app_policies(app_spec) if app_spec else []
        runner = Runner(
            _open(store, must_exist=False),
            policies=policies,
            queues=queue or None,
            concurrency=concurrency,
            lease=lease,
            shutdown_timeout=shutdown_timeout,
        )
        names = ", ".join(sorted({p.name for p in policies})) or "(none)"
        _out().print(
            f"worker {_lit(runner.owner)}: store {_lit(_store_url(runner))}, queues "
            f"{_lit(', '.join(queue) if queue else 'all')}, concurrency {concurrency}, "
            f"policies {_lit(names)}",
            soft_wrap=True,
        )
        await runner.serve()
        _out().print("worker stopped")

    _execute(go)
