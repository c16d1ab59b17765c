"""The experiments pages: every experiment and counterfactual the store
holds (``/experiments``), and two experiments, or a counterfactual's
recorded runs and their forks, compared case by case
(``/experiments/compare?a=A&b=B``, ``?counterfactual=NAME``), read through
:mod:`stalwart.evals.compare`.

A comparison shows a summary first (how many cases got better, worse or
stayed the same; each side's pass rate and tokens), then a row a case: the
two sides' verdicts and scores side by side, each side's tokens and time,
and links to both runs' pages. ``only=worse`` keeps the regressions
(``only=better``, ``only=changed`` likewise). Names come from the address
and are only looked up, never trusted: anything the store lacks is a 404
that names it.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..evals.compare import (
    KEPT_MOST,
    Row,
    compare_counterfactual,
    compare_experiments,
    kept_evals,
)
from ..runner import Runner
from .views import link, problem, render

__all__ = ["compare_page", "experiments_page"]

#: What ``only=`` keeps, and how the page names it.
FILTERS = {
    "": "all cases",
    "worse": "regressions",
    "better": "improvements",
    "changed": "changed cases",
}


def _store_of(request: Request) -> Any:
    runner: Runner = request.app.state.runner
    return runner.store


async def experiments_page(request: Request) -> Response:
    """Every experiment and counterfactual, the latest scored first, and a
    form to compare two experiments."""
    found = await kept_evals(_store_of(request))
    experiments = [k for k in found if k.kind == "experiment"]
    return render(
        request,
        "experiments.html",
        experiments=experiments,
        counterfactuals=[k for k in found if k.kind == "counterfactual"],
        most=KEPT_MOST,
        listed=len(found),
        # The latest two, the older as A: what one most often compares.
        pick_a=experiments[1].name if len(experiments) > 1 else "",
        pick_b=experiments[0].name if experiments else "",
    )


async def compare_page(request: Request) -> Response:
    """Two experiments (``a``, ``b``) or a counterfactual (``counterfactual``)
    case by case, filtered by ``only``."""
    q = request.query_params
    a, b, only = q.get("a", ""), q.get("b", ""), q.get("only", "")
    fork = q.get("counterfactual", "")
    if only not in FILTERS:
        shown = ", ".join(repr(k) for k in FILTERS if k)
        return problem(request, 400, f"only={only[:40]!r} is not one of {shown}")
    store = _store_of(request)
    try:
        if fork:
            comparison = await compare_counterfactual(store, fork)
        elif a and b:
            comparison = await compare_experiments(store, a, b)
        else:
            return problem(
                request,
                400,
                "name two experiments to compare (?a=NAME&b=NAME) or a counterfactual "
                "(?counterfactual=NAME)",
            )
    except KeyError as exc:
        return problem(request, 404, str(exc.args[0])[:300])
    params = {"counterfactual": fork} if fork else {"a": a, "b": b}
    rows = [r for r in comparison.rows if _kept(r, only)]
    return render(
        request,
        "experiments_compare.html",
        c=comparison,
        rows=rows,
        only=only,
        filters={
            k: (label, link("/experiments/compare", **params, only=k))
            for k, label in FILTERS.items()
        },
        changed=sum(r.change != "same" for r in comparison.rows),
        swap="" if fork else link("/experiments/compare", a=b, b=a, only=only),
    )


def _kept(row: Row, only: str) -> bool:
    if only == "changed":
        return row.change != "same"
    return not only or row.change == only
