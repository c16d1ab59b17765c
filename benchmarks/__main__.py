"""Run the benchmarks: ``python -m benchmarks [B1 B2 ...] [--repeat 5] [--smoke]``.

Each subject (Stalwart on a backend, a floor, a peer) runs in a child process
of its own, all its repetitions there, so its peak memory is its own and one
framework's imports or global state never touch another's. Prints a line per
subject, then writes ``benchmarks/results/<date>.json`` and ``<date>.md``, and
``latest.md`` when every workload ran.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from ._util import ROOT, Unavailable, postgres_problem
from .report import machine_info, render, versions
from .suite import SPECS, Spec, Subject

RESULTS = Path(__file__).with_name("results")
KINDS = ("stalwart", "floor", "peer")


def run_here(spec: Spec, subject: Subject, n: int | None, repeat: int) -> dict[str, Any]:
    """Run one subject's repetitions in this process; never raises."""
    kwargs = {} if n is None else {"n": n}
    samples: list[dict[str, Any]] = []
    try:
        if subject.postgres:
            why = postgres_problem()
            if why is not None:
                raise Unavailable(why)
        fn = subject.load()
        for _ in range(repeat):
            samples.append(fn(**kwargs))
    except Unavailable as exc:
        return {"status": "unavailable", "reason": str(exc)}
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {
            "status": "error",
            "reason": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "status": "ok",
        "samples": samples,
        "peak_rss_mb": own,
        "children_peak_rss_mb": kids,
    }


def run_child(spec: Spec, subject: Subject, n: int | None, repeat: int) -> dict[str, Any]:
    """Run one subject in a fresh interpreter and read back its result."""
    cmd = [sys.executable, "-m", "benchmarks", "--one", spec.id, subject.name]
    cmd += ["--repeat", str(repeat)] + ([] if n is None else ["--n", str(n)])
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    except subprocess.TimeoutExpired:
        return {"status": "error", "reason": "timed out after 1800 s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            return result
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
    return {"status": "error", "reason": f"exit code {proc.returncode}", "traceback": tail}


def summarize(spec: Spec, subject: Subject, raw: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"id": spec.id, "subject": subject.name, "kind": subject.kind, **raw}
    samples = row.pop("samples", None)
    if samples:
        stats: dict[str, dict[str, float]] = {}
        for key in samples[0]:
            values = [s[key] for s in samples if isinstance(s.get(key), int | float)]
            if len(values) == len(samples):
                stats[key] = {
                    "median": statistics.median(values),
                    "min": min(values),
                    "max": max(values),
                }
        row["stats"] = stats
        row["samples"] = samples
        row["peak_rss_mb"] = max(row.get("peak_rss_mb", 0), row.pop("children_peak_rss_mb", 0))
    return row


def _line(row: dict[str, Any]) -> str:
    head = f"{row['id']} {row['subject']}"
    if row["status"] != "ok":
        return f"{head}: {row['status']}: {row.get('reason', '')}"
    cells = [
        f"{k}={v['median']:.4g} [{v['min']:.3g}, {v['max']:.3g}]" for k, v in row["stats"].items()
    ]
    return f"{head}: " + ", ".join(cells) + f", peak_rss={row['peak_rss_mb']:.0f}MB"


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("ids", nargs="*", help="workload ids, e.g. B2 B3 (default: all)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition")
    parser.add_argument("--n", type=int, help="size of every chosen workload")
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help="subjects to run: stalwart,floor,peer"
    )
    parser.add_argument("--match", default="", help="only subjects whose name contains this")
    parser.add_argument("--inline", action="store_true", help="run in this process (profiling)")
    parser.add_argument("--out", default=str(RESULTS), help="where results go")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--render", metavar="JSON", help="rewrite the .md of a results file")
    parser.add_argument("--one", nargs=2, metavar=("ID", "SUBJECT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.one:  # a child: run one subject, print its result as JSON
        spec = SPECS[args.one[0]]
        subject = next(s for s in spec.subjects if s.name == args.one[1])
        raw = run_here(spec, subject, args.n, args.repeat)
        print("RESULT " + json.dumps(raw), flush=True)
        return []

    if args.render:  # regenerate the report of an earlier run
        path = Path(args.render)
        data = json.loads(path.read_text())
        path.with_suffix(".md").write_text(render(data["rows"], data["meta"]))
        return list(data["rows"])

    ids = [i.upper() for i in args.ids] or list(SPECS)
    unknown = [i for i in ids if i not in SPECS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; known: {', '.join(SPECS)}")
    kinds = {k.strip() for k in args.kinds.split(",") if k.strip()}
    repeat = 1 if args.smoke else args.repeat
    meta = machine_info()
    meta["argv"] = sys.argv[1:] if argv is None else argv
    rows: list[dict[str, Any]] = []
    started = time.time()
    for wid in ids:
        spec = SPECS[wid]
        n = spec.smoke_n if args.smoke else args.n
        for subject in spec.subjects:
            if subject.kind not in kinds or args.match not in subject.name:
                continue
            run = run_here if args.inline else run_child
            row = summarize(spec, subject, run(spec, subject, n, repeat))
            row["n"] = n
            rows.append(row)
            print(_line(row), flush=True)
    meta["seconds"] = round(time.time() - started, 1)
    meta["load_after"] = os.getloadavg()
    meta["versions"] = versions()
    if not args.smoke and not args.no_write:
        everything = set(ids) == set(SPECS) and kinds >= set(KINDS) and not args.match
        _write(rows, meta, Path(args.out), complete=everything)
    return rows


def _write(rows: list[dict[str, Any]], meta: dict[str, Any], out: Path, complete: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stamp = meta["date"].replace(":", "").replace("-", "")[:15]
    data = {"meta": meta, "rows": rows}
    (out / f"{stamp}.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    (out / f"{stamp}.md").write_text(render(rows, meta))
    if complete:
        shutil.copyfile(out / f"{stamp}.md", out / "latest.md")
    print(f"wrote {out / stamp}.json and .md" + (" and latest.md" if complete else ""))


if __name__ == "__main__":
    main()
