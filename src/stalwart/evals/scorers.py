"""Scorers: old outcome against new, side by side.

A scorer is any function (or async function) of the original run's
:class:`Outcome` and the fork's, returning a :class:`Score`, a number (above
0: the new one is better, below: worse, 0: the same) or a bool (true: the
same or better, false: worse). Every ready one here reads recorded data
only; :func:`judge` asks a model, as a durable run of its own.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.context import Context
from ..core.ledger import RunRecord, StepRecord
from ..core.message import Message
from ..core.policy import Policy, as_policy, policy
from ..llm import run_usage
from ..runner.runner import Runner

__all__ = [
    "Judge",
    "Outcome",
    "Score",
    "Scorer",
    "Verdict",
    "as_score",
    "called_tool",
    "exact_match",
    "json_match",
    "judge",
    "score_all",
    "tokens_used",
]

_VERDICTS: tuple[Verdict, ...] = ("better", "worse", "same")

Verdict = Literal["better", "worse", "same"]


@dataclass(frozen=True)
class Outcome:
    """A run as a scorer sees it: its id, status, result as plain JSON (the
    recorded text decoded, messages as ``{"$t": "msg", ...}`` trees), error
    text, and its steps."""

    run_id: str
    status: str
    result: Any
    error: str | None
    steps: Sequence[StepRecord] = field(default=(), repr=False)

    @classmethod
    def of(cls, run: RunRecord, steps: Sequence[StepRecord] = ()) -> Outcome:
        """A recorded run and its steps as a scorer sees them."""
        return cls(run.id, run.status, json.loads(run.result) if run.result else None,
                   run.error, steps)  # fmt: skip

    @property
    def text(self) -> str:
        """The result as text: a string as it is, anything else as JSON."""
        if isinstance(self.result, str):
            return self.result
        return json.dumps(self.result, sort_keys=True)


@dataclass(frozen=True)
class Score:
    """A scorer's verdict on the new outcome against the old, and why."""

    verdict: Verdict
    reason: str = ""
    value: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason, "value": self.value}


Scorer = Callable[[Outcome, Outcome], "Score | float | bool | Awaitable[Score | float | bool]"]


async def as_score(scorer: Scorer, old: Outcome, new: Outcome) -> Score:
    """``scorer``'s answer for ``old`` against ``new``, as a :class:`Score`."""
    got: Any = scorer(old, new)
    if inspect.isawaitable(got):
        got = await got
    if isinstance(got, Score):
        return got
    if isinstance(got, bool):
        return Score("same" if got else "worse", "passed" if got else "failed")
    if isinstance(got, int | float):
        verdict: Verdict = "better" if got > 0 else "worse" if got < 0 else "same"
        return Score(verdict, f"{got:g}", float(got))
    name = getattr(scorer, "__name__", repr(scorer))
    raise TypeError(f"scorer {name}: returned {type(got).__name__}, not a Score, number or bool")


def exact_match(old: Outcome, new: Outcome) -> Score:
    """Same status and the same result; anything else is worse."""
    if (old.status, old.result, old.error) == (new.status, new.result, new.error):
        return Score("same", "the same result")
    return Score("worse", f"was {old.status} {_short(old)}, now {new.status} {_short(new)}")


def json_match(*, ignore: Sequence[str] = ()) -> Scorer:
    """The results compared as JSON trees, keys in any order, the fields
    named in ``ignore`` left out at any depth (``"id"``); a difference is
    worse, named by its path (``['items'][2]['qty']``)."""
    skip = frozenset(ignore)

    def json_match(old: Outcome, new: Outcome) -> Score:
        where = _first_difference(_load(old.result), _load(new.result), "", skip)
        if where is None and old.status == new.status:
            return Score("same", "the same JSON")
        return Score("worse", f"differs at {where or 'the status'}")

    return json_match


def called_tool(tool: str) -> Scorer:
    """Whether each run called ``tool``: better if only the new one did,
    worse if only the old one did."""

    def called(old: Outcome, new: Outcome) -> Score:
        was, now = _calls(old, tool), _calls(new, tool)
        if was == now:
            return Score("same", f"{'both' if now else 'neither'} called {tool}")
        if now:
            return Score("better", f"now calls {tool}", 1.0)
        return Score("worse", f"no longer calls {tool}", -1.0)

    called.__name__ = f"called_tool({tool})"
    return called


def tokens_used(old: Outcome, new: Outcome) -> Score:
    """Tokens of the whole run from recorded usage (``llm.run_usage``): fewer
    is better. The fork's prefix is the original's, usage and all."""
    was, now = run_usage(old.steps).total_tokens, run_usage(new.steps).total_tokens
    verdict: Verdict = "better" if now < was else "worse" if now > was else "same"
    return Score(verdict, f"{was} -> {now} tokens", float(was - now))


def judge(model: Any, *, criteria: str = "Which answer is more helpful and correct?") -> Judge:
    """An LLM judge: ``model`` (any model policy) reads both answers and
    says ``better``, ``worse`` or ``same`` first, then why. The counterfactual
    runs it as a durable run beside each fork (:attr:`Judge.policy`), so a
    case's judge is paid once, even across a crash."""
    model_pol = as_policy(model)

    @policy(name=f"judge:{model_pol.name}")
    async def judging(ctx: Context, old: str, new: str) -> dict[str, str]:
        question = (
            f"{criteria}\nOLD answer:\n{old}\n\nNEW answer:\n{new}\n\n"
            "Reply with one word first: better (the NEW one is better), worse, or same; "
            "then the reason."
        )
        replies = await ctx.call(model_pol, observations=[Message.user(question)])
        text = " ".join(m.text for m in replies if isinstance(m, Message)).strip()
        first = text.split(maxsplit=1)[0].strip(".:,!").lower() if text else ""
        if first not in ("better", "worse", "same"):
            return {"verdict": "worse", "reason": f"the judge answered {text[:200]!r}"}
        return {"verdict": first, "reason": text[len(first) :].strip(" .:,-")}

    return Judge(judging)


@dataclass(frozen=True)
class Judge:
    """A scorer that asks a model: :func:`~.counterfactual.counterfactual`
    runs :attr:`policy` (``old`` and ``new`` answers as text, to a
    ``{"verdict", "reason"}`` dict) as a durable run of its own per case."""

    policy: Policy[Any, dict[str, str]]

    @property
    def __name__(self) -> str:
        return self.policy.name

    def __call__(self, old: Outcome, new: Outcome) -> Score:
        raise TypeError("a judge asks a model in a durable run: pass it to counterfactual()")


def _calls(outcome: Outcome, tool: str) -> bool:
    return any(s.name == tool and "#" in s.key.rsplit(".", 1)[-1] for s in outcome.steps)


def _short(outcome: Outcome) -> str:
    text = outcome.error if outcome.status != "succeeded" else outcome.text
    text = text or ""
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _load(value: Any) -> Any:
    """A string holding JSON is compared as the JSON it holds."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _first_difference(a: Any, b: Any, path: str, skip: frozenset[str]) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted((set(a) | set(b)) - skip):
            if k not in a or k not in b:
                return f"{path}[{k!r}]"
            found = _first_difference(a[k], b[k], f"{path}[{k!r}]", skip)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path} (length {len(a)} vs {len(b)})"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}[{i}]", skip)
            if found is not None:
                return found
        return None
    return None if a == b and type(a) is type(b) else (path or "the top")


async def score_all(
    runner: Runner,
    scorers: Sequence[Scorer],
    old: Outcome,
    new: Outcome,
    judge_run_id: Callable[[str], str],
) -> tuple[dict[str, Score], Verdict]:
    """Each scorer's :class:`Score` by its name, and the verdict of them all:
    worse if any says worse, better if any says better (and none worse),
    else the same. A :class:`Judge` is asked as the durable run
    ``judge_run_id(<its policy's name>)``, so it is paid once; a verdict it
    gives outside better, worse and same counts as worse."""
    scores: dict[str, Score] = {}
    for scorer in scorers:
        label = getattr(scorer, "__name__", repr(scorer))
        if isinstance(scorer, Judge):
            said = await runner.run(
                scorer.policy, old.text, new.text, run_id=judge_run_id(scorer.policy.name)
            )
            verdict_said: Verdict = said["verdict"] if said["verdict"] in _VERDICTS else "worse"
            scores[label] = Score(verdict_said, said["reason"])
        else:
            scores[label] = await as_score(scorer, old, new)
    verdicts = {s.verdict for s in scores.values()}
    verdict: Verdict = (
        "worse" if "worse" in verdicts else "better" if "better" in verdicts else "same"
    )
    return scores, verdict
