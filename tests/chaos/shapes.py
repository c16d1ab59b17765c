"""Seeded trials: what a run does, where it runs, and when it is killed.

A trial is a pure function of its seed, so a failing seed replays exactly
(the kill lands at the same count of executed steps or after the same
delay; where in a step it lands still varies with the machine's timing).
Each seed has a *focus* shape, taken in turn so that a few dozen seeds cover
every shape on both stores in both durability modes, plus a few random
operations around it.

    python tests/chaos/shapes.py 500     # how 500 trials are spread over shapes
"""

from __future__ import annotations

import collections
import random
import sys
from dataclasses import dataclass, field
from typing import Any

FOCUS = ("sequential", "fanout", "sleep", "signal", "flow", "agent", "children", "relay")
EXTRAS = ("step", "chain", "fan", "sleep", "flow", "agent", "map", "spawn")


@dataclass(frozen=True)
class Kill:
    """When to SIGKILL a process: once it executed ``steps`` steps, or ``delay`` s after READY.

    ``cap`` bounds a steps trigger in time (a run asleep or waiting for a
    signal executes nothing for a while).
    """

    steps: int | None = None
    delay: float | None = None
    cap: float = 1.5
    racers: int = 1  # how many processes recover after this kill

    def describe(self) -> str:
        when = f"after {self.steps} steps" if self.steps is not None else f"after {self.delay} s"
        return when if self.racers == 1 else f"{when}, then {self.racers} racing recoverers"


@dataclass(frozen=True)
class Trial:
    seed: int
    store: str  # "sqlite" | "postgres"
    durability: str  # "commit" | "group"
    focus: str
    plan: dict[str, Any]
    kills: tuple[Kill, ...]
    signal_delay: float  # when the test sends the root's signals, after the first READY
    group_delay: float | None  # SQLite's group commit window (None: the store's default)
    concurrency: int | None  # the most runs a process executes at once (None: no limit)
    enqueue: bool  # the run is enqueued for the worker loop, not started by the caller
    shape: tuple[str, ...] = field(default=())

    @property
    def run_id(self) -> str:
        return f"chaos-{self.seed}"

    def settings(self) -> dict[str, Any]:
        """What the app reads: the plan, and how its processes run it."""
        return {"plan": self.plan, "concurrency": self.concurrency, "enqueue": self.enqueue}

    def describe(self) -> str:
        kills = ", ".join(k.describe() for k in self.kills)
        window = "" if self.group_delay is None else f" group_delay={self.group_delay}"
        how = "enqueued" if self.enqueue else "started"
        return (
            f"seed {self.seed}: {self.store} durability={self.durability}{window}, "
            f"ops {'+'.join(self.shape)}, {how}, concurrency {self.concurrency}, kills: {kills}"
        )


def _pauses(rng: random.Random, n: int) -> list[float]:
    return [round(rng.uniform(0.0, 0.03), 3) for _ in range(n)]


def _child_plan(rng: random.Random) -> list[dict[str, Any]]:
    """A child run's operations: small, and never child runs of their own."""
    ops: list[dict[str, Any]] = [{"op": "chain", "pauses": _pauses(rng, rng.randint(1, 3))}]
    if rng.random() < 0.3:
        ops.append({"op": "sleep", "seconds": round(rng.uniform(0.05, 0.8), 2)})
    if rng.random() < 0.5:
        ops.append({"op": "fan", "pauses": _pauses(rng, rng.randint(2, 4))})
    return ops


class _Ops:
    """Builds a root plan's operations, keeping names unique and flows one per run."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.signals = 0
        self.has_flow = False

    def make(self, kind: str) -> dict[str, Any]:
        rng = self.rng
        if kind == "step":
            return {"op": "step", "pause": _pauses(rng, 1)[0]}
        if kind in ("chain", "sequential"):
            return {"op": "chain", "pauses": _pauses(rng, rng.randint(3, 8))}
        if kind in ("fan", "fanout"):
            return {"op": "fan", "pauses": _pauses(rng, rng.randint(3, 10))}
        if kind == "sleep":
            return {"op": "sleep", "seconds": round(rng.uniform(0.05, 1.5), 2)}
        if kind == "signal":
            self.signals += 1
            return {"op": "wait", "name": f"go{self.signals}", "k": rng.randint(1, 999)}
        if kind == "flow":
            self.has_flow = True
            return {
                "op": "flow",
                "pauses": _pauses(rng, rng.randint(2, 8)),
                "parallel": rng.random() < 0.5,
            }
        if kind == "agent":
            turns = rng.randint(1, 3)
            return {
                "op": "agent",
                "pauses": [_pauses(rng, rng.randint(1, 3)) for _ in range(turns)],
            }
        if kind in ("map", "children"):
            return {"op": "map", "children": [_child_plan(rng) for _ in range(rng.randint(2, 4))]}
        if kind == "spawn":
            return {"op": "spawn", "children": [_child_plan(rng)]}
        self.signals += 1
        return {
            "op": "relay",
            "name": f"relay{self.signals}",
            "pause": _pauses(rng, 1)[0],
            "sibling": rng.random() < 0.5,
        }

    def extra(self) -> dict[str, Any]:
        kinds = [k for k in EXTRAS if not (k == "flow" and self.has_flow)]
        return self.make(self.rng.choice(kinds))


def _kills(rng: random.Random, steps: int) -> tuple[Kill, ...]:
    """One to three kills: the first on the starting process, the rest on recoverers."""
    count = rng.choices((1, 2, 3), weights=(5, 3, 2))[0]
    kills = []
    for i in range(count):
        racers = 2 if rng.random() < 0.25 else 1
        if rng.random() < 0.6:
            most = steps if i == 0 else max(1, steps // 3)
            kills.append(Kill(steps=rng.randint(1, max(1, most)), racers=racers))
        else:
            kills.append(Kill(delay=round(rng.uniform(0.0, 0.3), 3), racers=racers))
    return tuple(kills)


def count_steps(ops: list[dict[str, Any]]) -> int:
    """Roughly how many counted executions a plan makes (for choosing kill points)."""
    total = 0
    for op in ops:
        if "pauses" in op:
            pauses = op["pauses"]
            flat = [p for turn in pauses for p in turn] if op["op"] == "agent" else pauses
            total += len(flat) * (3 if op["op"] == "flow" else 1)
        elif op["op"] in ("map", "spawn"):
            total += sum(count_steps(child) for child in op["children"])
        elif op["op"] == "relay":
            total += 2  # the signal sent, the child's step
        else:
            total += 1
    return total


def _group_delay(rng: random.Random) -> float | None:
    """A wider window than the default loses more records at a kill: more to re-run,
    and more chances for a hole."""
    return rng.choice((None, 0.02, 0.1))


COMBOS = (("sqlite", "commit"), ("postgres", "commit"), ("sqlite", "group"), ("postgres", "group"))


def trial(seed: int) -> Trial:
    """The trial of ``seed``: the focus shape is ``seed`` mod 8 and the store and
    durability turn with it, so that any 8 seeds in a row cover every shape and
    every 32 every shape on each store in each mode; the rest is random from the seed."""
    rng = random.Random(seed)
    focus = FOCUS[seed % len(FOCUS)]
    store, durability = COMBOS[(seed + seed // len(FOCUS)) % len(COMBOS)]
    ops_maker = _Ops(rng)
    ops = [ops_maker.make(focus)]
    for _ in range(rng.randint(0, 3)):
        ops.insert(rng.randint(0, len(ops)), ops_maker.extra())
    plan = {"x": rng.randint(1, 10_000), "ops": ops}
    return Trial(
        seed=seed,
        store=store,
        durability=durability,
        focus=focus,
        plan=plan,
        kills=_kills(rng, count_steps(ops)),
        signal_delay=round(rng.uniform(0.0, 2.0), 3),
        group_delay=_group_delay(rng) if (store, durability) == ("sqlite", "group") else None,
        concurrency=rng.choice((None, None, 1, 3)),
        enqueue=rng.random() < 0.3,
        shape=tuple(op["op"] for op in ops),
    )


def _stats(n: int) -> None:
    trials = [trial(s) for s in range(n)]
    print(f"{n} trials")
    for title, key in (
        ("focus", lambda t: t.focus),
        ("store/durability", lambda t: f"{t.store}/{t.durability}"),
        ("kills", lambda t: str(len(t.kills))),
        ("racing recoverers", lambda t: str(any(k.racers > 1 for k in t.kills))),
        ("started/enqueued", lambda t: "enqueued" if t.enqueue else "started"),
        ("concurrency", lambda t: str(t.concurrency)),
    ):
        counts = collections.Counter(key(t) for t in trials)
        print(f"  {title}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    ops = collections.Counter(op for t in trials for op in set(t.shape))
    print("  trials with op: " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))


if __name__ == "__main__":
    _stats(int(sys.argv[1]) if len(sys.argv) > 1 else 32)
