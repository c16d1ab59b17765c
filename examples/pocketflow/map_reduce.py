"""Map-reduce over documents: screen every resume, then summarise the screening.

`EvaluateResumes` is the map (a batch node: one exec per resume, each
journaled on its own under a durable store, so a crash at resume 700 of 1,000
redoes only the one in flight); `ReduceResults` is the reduce. The "model"
that reads a resume is a heuristic, so this runs offline.

    python examples/pocketflow/map_reduce.py
    python examples/pocketflow/map_reduce.py --store sqlite:///screening.db
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

import stalwart as sw
from stalwart.flow import BatchNode, Flow, Node

RESUMES = {
    "ada.txt": "Ada Lovelace. 6 years of Python and statistics; built SQL reporting pipelines.",
    "grace.txt": "Grace Hopper. 12 years of COBOL and compilers; some SQL. Led a large team.",
    "linus.txt": "Linus T. 2 years of Python scripting, kernel work in C.",
    "margaret.txt": "Margaret H. 8 years of Python, SQL and flight software engineering.",
    "alan.txt": "Alan T. 4 years of mathematics and statistics in Python; no SQL yet.",
}

REQUIREMENTS = "Python; SQL or statistics; at least 3 years of experience."


def screen(resume: str) -> dict[str, Any]:
    """The offline "model": check the requirements one by one, with reasons."""
    text = resume.lower()
    years = max((int(y) for y in re.findall(r"(\d+) years?", text)), default=0)
    checks = {
        "python": "python" in text,
        "sql or statistics": "sql" in text.replace("no sql", "") or "statistics" in text,
        "3+ years": years >= 3,
    }
    return {
        "name": resume.split(".")[0],
        "qualified": all(checks.values()),
        "missing": [need for need, ok in checks.items() if not ok],
    }


class EvaluateResumes(BatchNode):
    def prep(self, shared: dict[str, Any]) -> list[str]:
        return list(shared["resumes"].values())

    def exec(self, resume: str) -> dict[str, Any]:
        return screen(resume)

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: list[Any]) -> None:
        shared["evaluations"] = dict(zip(shared["resumes"], exec_res, strict=True))


class ReduceResults(Node):
    def prep(self, shared: dict[str, Any]) -> dict[str, Any]:
        return dict(shared["evaluations"])

    def exec(self, evaluations: dict[str, Any]) -> dict[str, Any]:
        qualified = [e["name"] for e in evaluations.values() if e["qualified"]]
        return {
            "total": len(evaluations),
            "qualified": qualified,
            "rate": round(len(qualified) / len(evaluations), 2) if evaluations else 0.0,
        }

    def post(self, shared: dict[str, Any], prep_res: Any, exec_res: dict[str, Any]) -> None:
        shared["summary"] = exec_res


def screening_flow() -> Flow:
    evaluate = EvaluateResumes()
    evaluate >> ReduceResults()
    flow = Flow(start=evaluate)
    flow.name = "resume_screening"  # type: ignore[attr-defined]
    return flow


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="Map-reduce over resumes, offline.")
    parser.add_argument("--store", default=None, help="e.g. sqlite:///screening.db")
    args = parser.parse_args(argv)
    shared: dict[str, Any] = sw.Runner(args.store).run_sync(
        screening_flow(), shared={"resumes": RESUMES}
    )
    print(f"requirements: {REQUIREMENTS}")
    for file, evaluation in shared["evaluations"].items():
        missing = ", ".join(evaluation["missing"])
        verdict = "yes" if evaluation["qualified"] else f"no ({missing})"
        print(f"  {file:13} {evaluation['name']:15} {verdict}")
    summary = shared["summary"]
    qualified = ", ".join(summary["qualified"])
    print(f"{len(summary['qualified'])} of {summary['total']} qualify: {qualified}")
    return shared


if __name__ == "__main__":
    main()
