"""Randomized crash trials: seeded run shapes killed with SIGKILL at random points.

The way Restate verifies its engine: each seed makes a run (sequential
steps, fan-out, durable sleeps, signals from the test or from a sibling run,
a flow with batch nodes, an agent with parallel tool calls, child runs; on
SQLite or PostgreSQL, with ``durability=commit`` or ``group``; started or
enqueued; with or without a concurrency limit). A real process executes it
and is killed one to three times at a seeded point (after a number of
executed steps, or after a delay), and fresh processes, sometimes two racing
ones, recover it until it finishes. Then it is checked against an uncrashed
run of the same seed (a separate store) and against an execution counter
kept outside the processes (``app.py``):

- every process that finished returned the uncrashed run's result, and every
  run (children too) finished with the uncrashed run's result and the same
  ledger (keys, step names, arguments): no run lost, no step missing or extra;
- at each kill, the ledger is a prefix of the uncrashed ledger with no hole:
  a recorded step has all its own steps recorded, and under a sequential
  parent (a run's root, a chain, an agent, a flow's walk) step s is recorded
  only if step s-1 and everything under it is (S6);
- no step recorded when a kill landed executed again after it (S2); only
  steps in flight at a kill may run twice (S3).

A few dozen seeds run by default; ``STALWART_CHAOS_TRIALS=500`` runs more,
``STALWART_CHAOS_BASE`` shifts the first seed, ``STALWART_CHAOS_SEED=N``
(comma-separated for several) replays chosen seeds, and
``STALWART_CHAOS_STATS=file`` appends one JSON line per trial (its shape,
kills planned and landed, seconds). A failing trial says the exact command
that replays it.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw

from . import shapes

APP = str(Path(__file__).with_name("app.py"))
DEFAULT_TRIALS = 24
FINISH_TIMEOUT = 90.0  # a run that has not finished by then is lost

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")


def _seeds() -> list[int]:
    chosen = os.environ.get("STALWART_CHAOS_SEED")
    if chosen:
        return [int(s) for s in chosen.split(",") if s.strip()]
    count = int(os.environ.get("STALWART_CHAOS_TRIALS", DEFAULT_TRIALS))
    base = int(os.environ.get("STALWART_CHAOS_BASE", 0))
    return list(range(base, base + count))


def _param(seed: int) -> Any:
    t = shapes.trial(seed)
    return pytest.param(seed, t.store, id=f"s{seed}-{t.store}-{t.durability}-{t.focus}")


def replay_command(seed: int) -> str:
    return f"STALWART_CHAOS_SEED={seed} python -m pytest tests/chaos -q"


# -- processes ------------------------------------------------------------------------------
class Phase:
    """One process of a trial; its output goes to files, so no pipe ever fills."""

    def __init__(self, workdir: Path, name: str, url: str, run_id: str, counter: Path, mode: str):
        self.name = name
        self.out = workdir / f"{name}.out"
        self.err = workdir / f"{name}.err"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, APP, url, run_id, str(workdir / "trial.json"), str(counter), mode],
                stdout=out,
                stderr=err,
            )

    def lines(self) -> list[str]:
        return self.out.read_text().splitlines()

    def stderr_tail(self) -> str:
        text = self.err.read_text() if self.err.exists() else ""
        return text[-3000:]

    def wait_ready(self, timeout: float = 30.0) -> bool:
        """Whether the process opened its store (False: it ended first, or hangs)."""
        deadline = time.monotonic() + timeout
        while "READY" not in self.lines():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                return "READY" in self.lines()
            time.sleep(0.005)
        return True

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def finish(self, timeout: float) -> bool:
        """Wait for the process to end by itself; False if it did not in time (then kill it)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return False
        return True

    def result(self) -> tuple[bool, Any]:
        found = [line[len("RESULT ") :] for line in self.lines() if line.startswith("RESULT ")]
        return (True, json.loads(found[-1])) if found else (False, None)


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def drive(phase: Phase, kill: shapes.Kill, counter: Path) -> bool:
    """Let the phase run until its kill point, then SIGKILL it; False if it ended first."""
    start = _lines(counter)
    limit = kill.delay if kill.delay is not None else kill.cap
    deadline = time.monotonic() + limit
    while phase.proc.poll() is None:
        if kill.steps is not None and _lines(counter) - start >= kill.steps:
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(0.002)
    if phase.proc.poll() is not None:
        return False
    phase.kill()
    return True


class SignalSender(threading.Thread):
    """The test sending the root's signals from outside, at a seeded moment.

    The moment may fall before the run waits (the signal must queue), while
    no process is alive, or while one is; a run id not created yet is retried.
    """

    def __init__(self, url: str, run_id: str, signals: list[tuple[str, Any]], delay: float):
        super().__init__(daemon=True)
        self.url, self.run_id, self.signals, self.delay = url, run_id, signals, delay
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._send())
        except BaseException as exc:
            self.error = exc

    async def _send(self) -> None:
        await asyncio.sleep(self.delay)
        async with sw.Runner(self.url, serving=False) as runner:
            deadline = time.monotonic() + 30
            while True:
                try:
                    await runner.get_run(self.run_id)
                    break
                except sw.RunNotFound:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.02)
            for name, payload in self.signals:
                await runner.signal(self.run_id, name, payload)


# -- ledgers ----------------------------------------------------------------------------------
@dataclass
class RunView:
    status: str
    result: Any
    steps: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (name, args hash)


async def _read_ledger(url: str) -> dict[str, RunView]:
    async with sw.Runner(url, serving=False) as runner:
        views = {}
        for rec in await runner.list_runs(limit=100_000):
            steps = await runner.steps(rec.id)
            result = json.loads(rec.result) if rec.result is not None else None
            views[rec.id] = RunView(
                rec.status, result, {s.key: (s.name, s.args_hash) for s in steps}
            )
        return views


def read_ledger(url: str) -> dict[str, RunView]:
    return asyncio.run(_read_ledger(url))


_EXEC = re.compile(r"\.exec(#\d+)?$")


def identity(run_id: str, key: str, name: str) -> str:
    """What the app writes to the counter for the step recorded as (key, name)."""
    m = _EXEC.search(key)
    if m is not None and name.endswith(".exec"):
        return f"{run_id}:{name}{m.group(1) or ''}"
    return f"{run_id}:{key}"


def recorded_identities(ledger: dict[str, RunView]) -> set[str]:
    return {
        identity(run_id, key, name)
        for run_id, view in ledger.items()
        for key, (name, _) in view.steps.items()
    }


def executions(counter: Path) -> list[tuple[int, str]]:
    """(pid, identity) of each counted execution, in order."""
    if not counter.exists():
        return []
    pairs = []
    for line in counter.read_text().splitlines():
        pid, _, ident = line.partition(" ")
        pairs.append((int(pid), ident))
    return pairs


# -- checks -----------------------------------------------------------------------------------
SEQUENTIAL_STEPS = ("chain", "chaos_agent")  # their own steps run one after another


def _seq(prefix: str, key: str) -> int | None:
    """The sequence number of the child of ``prefix`` that ``key`` is (or lies under)."""
    if not key.startswith(prefix):
        return None
    m = re.match(r"\d+", key[len(prefix) :])
    return int(m.group()) if m else None


def _under(prefix: str, seq: int, key: str) -> bool:
    rest = key[len(prefix) :] if key.startswith(prefix) else None
    return rest is not None and re.match(rf"{seq}(?:[.#@]|$)", rest) is not None


def sequential_parents(ref: RunView) -> set[str]:
    """Keys whose own steps run one after another: the run's root, chains, agents, and
    the walks of flows (node after node)."""
    parents = {""} | {k for k, (name, _) in ref.steps.items() if name in SEQUENTIAL_STEPS}
    return parents | {m.group(1) for k in ref.steps if (m := _WALK.match(k))}


_WALK = re.compile(r"(.*\.walk)\.\d+")


def prefix_problems(when: str, run_id: str, got: RunView, ref: RunView) -> list[str]:
    """Why ``got`` (a ledger at a kill) is not a prefix of ``ref`` with no hole."""
    problems = []
    keys, ref_keys = set(got.steps), set(ref.steps)
    extra = sorted(keys - ref_keys)
    if extra:
        problems.append(f"{when}: run {run_id} recorded steps the uncrashed run has not: {extra}")
    for key in sorted(keys & ref_keys):
        missing = sorted(k for k in ref_keys - keys if k.startswith(key + "."))
        if missing:
            problems.append(
                f"{when}: run {run_id} recorded step {key} but not its own steps {missing}"
            )
    parents = sequential_parents(ref)
    for parent in parents:
        prefix = parent + "." if parent else ""
        seqs = {s for k in keys if (s := _seq(prefix, k)) is not None}
        for s in sorted(seqs):
            if s == 1:
                continue
            hole = sorted(k for k in ref_keys - keys if _under(prefix, s - 1, k))
            if hole:
                problems.append(
                    f"{when}: run {run_id} has a hole: step {prefix}{s} is recorded but "
                    f"not {hole}, which come before it (parent {parent or 'root'!r})"
                )
    if got.status == "succeeded" and keys != ref_keys:
        problems.append(
            f"{when}: run {run_id} finished with steps missing: {sorted(ref_keys - keys)}"
        )
    return problems


def final_problems(ref: dict[str, RunView], final: dict[str, RunView]) -> list[str]:
    problems = []
    lost, extra = sorted(set(ref) - set(final)), sorted(set(final) - set(ref))
    if lost or extra:
        problems.append(
            f"runs missing after recovery: {lost}; runs the uncrashed run has not: {extra}"
        )
    for run_id in sorted(set(ref) & set(final)):
        want, got = ref[run_id], final[run_id]
        if got.status != "succeeded":
            problems.append(f"run {run_id} is lost: status {got.status!r} after recovery")
            continue
        if got.result != want.result:
            problems.append(f"run {run_id} returned {got.result!r}, uncrashed {want.result!r}")
        if got.steps != want.steps:
            missing = sorted(set(want.steps) - set(got.steps))
            extra_steps = sorted(set(got.steps) - set(want.steps))
            differ = sorted(
                k for k in set(got.steps) & set(want.steps) if got.steps[k] != want.steps[k]
            )
            problems.append(
                f"run {run_id}: ledger differs from the uncrashed run's: missing {missing}, "
                f"extra {extra_steps}, other name or arguments at {differ}"
            )
    return problems


def execution_problems(
    ref_runs: list[tuple[int, str]], runs: list[tuple[int, str]], kills: list[Killed]
) -> list[str]:
    """What the execution counts say against S2 and S3 (see the module docstring)."""
    problems = []
    ref_counts = collections.Counter(ident for _, ident in ref_runs)
    twice = sorted(i for i, n in ref_counts.items() if n != 1)
    if twice:
        problems.append(f"harness: the uncrashed run executed these other than once: {twice}")
    counts = collections.Counter(ident for _, ident in runs)
    never = sorted(set(ref_counts) - set(counts))
    foreign = sorted(set(counts) - set(ref_counts))
    if never or foreign:
        problems.append(f"steps never executed: {never}; executed but unknown: {foreign}")
    # One executor holds a run at a time, so each execution but the first
    # needs a kill that interrupted the one before.
    too_many = sorted(i for i, n in counts.items() if n > 1 + len(kills))
    if too_many:
        problems.append(f"executed more often than once plus once per kill: {too_many}")
    for n, kill in enumerate(kills, 1):
        for pid, ident in runs[kill.offset :]:
            if ident in kill.recorded:
                problems.append(
                    f"step {ident} was recorded when kill {n} ({kill.what}) landed, "
                    f"and executed again after it (by pid {pid})"
                )
    return problems


# -- the trial ---------------------------------------------------------------------------------
def store_url_for(trial: shapes.Trial, base: str) -> str:
    options = f"durability={trial.durability}"
    if trial.group_delay is not None:
        options += f"&group_delay={trial.group_delay}"
    return f"{base}{'&' if '?' in base else '?'}{options}"


@dataclass
class Killed:
    """A kill that landed: what the ledger held then, and how many executions were counted
    when it was read (the ledger first, so a step recorded by then has its line before)."""

    what: str
    recorded: set[str]
    offset: int


@dataclass
class Outcome:
    results: list[tuple[str, Any]] = field(default_factory=list)  # each finishing process's
    kills: list[Killed] = field(default_factory=list)
    snapshots: list[tuple[str, dict[str, RunView]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)


def run_trial(trial: shapes.Trial, url: str, workdir: Path) -> Outcome:
    """Start the run, kill it per the trial, recover until it finishes.

    Each kill lands on the newest process; after it, one or two fresh
    processes recover (two race for the runs; a later kill may take one of
    them while the other lives on and must take over its runs).
    """
    counter = workdir / "executions.txt"
    out = Outcome()
    alive = [Phase(workdir, "p1", url, trial.run_id, counter, "run")]
    started = 1
    sender: SignalSender | None = None
    for n, kill in enumerate(trial.kills, 1):
        target = alive[-1]
        if not target.wait_ready():
            break  # reported below with the process's stderr
        sender = sender or _start_sender(trial, url)
        if not drive(target, kill, counter):
            out.log.append(f"{target.name} ended before kill {n} ({kill.describe()})")
            break
        alive.remove(target)
        ledger = read_ledger(url)
        what = f"{target.name} {kill.describe()}"
        out.kills.append(Killed(what, recorded_identities(ledger), len(executions(counter))))
        out.snapshots.append((f"at kill {n} ({what})", ledger))
        out.log.append(f"killed {what}")
        for _ in range(kill.racers):
            started += 1
            alive.append(Phase(workdir, f"p{started}", url, trial.run_id, counter, "recover"))
    for phase in alive:
        _finish(phase, url, out)
    if sender is not None:
        sender.join(30)
        if sender.error is not None:
            out.problems.append(f"sending the signals failed: {sender.error!r}")
    return out


def _finish(phase: Phase, url: str, out: Outcome) -> None:
    if not phase.finish(FINISH_TIMEOUT):
        out.problems.append(
            f"{phase.name} did not finish the run in {FINISH_TIMEOUT} s (a lost run?); "
            f"statuses: {_statuses(url)}\n{phase.stderr_tail()}"
        )
    elif phase.proc.returncode != 0:
        out.problems.append(
            f"{phase.name} failed ({phase.proc.returncode}):\n{phase.stderr_tail()}"
        )
    else:
        found, result = phase.result()
        if found:
            out.results.append((phase.name, result))
        else:
            out.problems.append(f"{phase.name} ended without a result:\n{phase.stderr_tail()}")


def _start_sender(trial: shapes.Trial, url: str) -> SignalSender | None:
    signals = [(op["name"], {"k": op["k"]}) for op in trial.plan["ops"] if op["op"] == "wait"]
    if not signals:
        return None
    sender = SignalSender(url, trial.run_id, signals, trial.signal_delay)
    sender.start()
    return sender


def _statuses(url: str) -> dict[str, str]:
    try:
        return {run_id: view.status for run_id, view in read_ledger(url).items()}
    except Exception as exc:
        return {"?": repr(exc)}


def _note_stats(trial: shapes.Trial, out: Outcome, seconds: float, problems: list[str]) -> None:
    """With STALWART_CHAOS_STATS=file, append what this trial did (one JSON line)."""
    path = os.environ.get("STALWART_CHAOS_STATS")
    if not path:
        return
    line = {
        "seed": trial.seed,
        "store": trial.store,
        "durability": trial.durability,
        "focus": trial.focus,
        "shape": trial.shape,
        "kills_planned": len(trial.kills),
        "kills_landed": len(out.kills),
        "seconds": round(seconds, 2),
        "failed": bool(problems),
    }
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")


@pytest.mark.parametrize(
    ("seed", "store_url"), [_param(s) for s in _seeds()], indirect=["store_url"]
)
def test_trial(seed: int, store_url: str, tmp_path: Path) -> None:
    began = time.monotonic()
    trial = shapes.trial(seed)
    url = store_url_for(trial, store_url)
    ref_dir = tmp_path / "reference"
    ref_dir.mkdir()
    (tmp_path / "trial.json").write_text(json.dumps(trial.settings()))
    uncrashed = {"plan": trial.plan, "concurrency": None, "enqueue": False}
    (ref_dir / "trial.json").write_text(json.dumps(uncrashed))
    ref_url = f"sqlite:///{ref_dir / 'ledger.db'}"
    reference = Phase(
        ref_dir, "reference", ref_url, trial.run_id, ref_dir / "executions.txt", "reference"
    )

    out = run_trial(trial, url, tmp_path)

    problems = list(out.problems)
    ref = Outcome()
    _finish(reference, ref_url, ref)
    if ref.problems:
        problems += [f"harness: the uncrashed run: {p}" for p in ref.problems]
    else:
        problems += check(ref.results[0][1], read_ledger(ref_url), out, url, tmp_path)
    _note_stats(trial, out, time.monotonic() - began, problems)
    assert not problems, (
        f"chaos trial failed: {trial.describe()}\n"
        + "\n".join(f"- {p}" for p in problems)
        + f"\nphases: {'; '.join(out.log)}\nworkdir: {tmp_path}\n"
        + f"replay: {replay_command(seed)}"
    )


def check(
    ref_result: Any, ref_ledger: dict[str, RunView], out: Outcome, url: str, workdir: Path
) -> list[str]:
    """Everything the trial must show against the uncrashed run (module docstring)."""
    problems = [
        f"{name} returned {result!r}, the uncrashed run {ref_result!r}"
        for name, result in out.results
        if result != ref_result
    ]
    for when, ledger in out.snapshots:
        for run_id, view in ledger.items():
            ref_view = ref_ledger.get(run_id)
            if ref_view is None:
                problems.append(f"{when}: run {run_id} exists; the uncrashed run has none")
            else:
                problems.extend(prefix_problems(when, run_id, view, ref_view))
    if out.results and not out.problems:
        problems.extend(final_problems(ref_ledger, read_ledger(url)))
        problems.extend(
            execution_problems(
                executions(workdir / "reference" / "executions.txt"),
                executions(workdir / "executions.txt"),
                out.kills,
            )
        )
    return problems
