"""Run the benchmarks: ``python -m benchmarks [B1 B2 ...] [--repeat 5] [--smoke]``.

Prints a Markdown table of medians [min, max] and writes JSON plus Markdown to
``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import resource
import statistics
import sys
from pathlib import Path
from typing import Any

from .workloads import SMOKE_SIZES, WORKLOADS


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("ids", nargs="*", help="workload ids (default: all)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results")))
    args = parser.parse_args(argv)
    ids = [i.upper() for i in args.ids] or list(WORKLOADS)
    unknown = [i for i in ids if i not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}")
    repeat = 1 if args.smoke else args.repeat
    rows: list[dict[str, Any]] = []
    for wid in ids:
        for name, fn in WORKLOADS[wid].items():
            kwargs = {"n": SMOKE_SIZES[wid]} if args.smoke else {}
            samples = [fn(**kwargs) for _ in range(repeat)]
            row: dict[str, Any] = {"id": wid, "subject": name}
            for key in samples[0]:
                values = [s[key] for s in samples]
                if all(isinstance(v, int | float) for v in values):
                    row[key] = {
                        "median": statistics.median(values),
                        "min": min(values),
                        "max": max(values),
                    }
            row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            rows.append(row)
            print(_line(row), flush=True)
    if not args.smoke:
        _write(rows, Path(args.out))
    return rows


def _fmt(stat: dict[str, float]) -> str:
    m, lo, hi = stat["median"], stat["min"], stat["max"]
    return f"{m:.4g} [{lo:.3g}, {hi:.3g}]"


def _line(row: dict[str, Any]) -> str:
    cells = [f"{k}={_fmt(v)}" for k, v in row.items() if isinstance(v, dict)]
    return f"{row['id']} {row['subject']}: " + ", ".join(cells)


def _write(rows: list[dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "cpus": __import__("os").cpu_count(),
    }
    stamp = meta["date"].replace(":", "").replace("-", "")[:15]
    (out / f"{stamp}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = ["| id | subject | measurements (median [min, max]) |", "| --- | --- | --- |"]
    for row in rows:
        cells = ", ".join(f"{k}: {_fmt(v)}" for k, v in row.items() if isinstance(v, dict))
        lines.append(f"| {row['id']} | {row['subject']} | {cells} |")
    table = "\n".join(lines)
    (out / "latest.md").write_text(f"{meta}\n\n{table}\n")


if __name__ == "__main__":
    main()
