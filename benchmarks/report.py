"""The Markdown report of a run: one table per workload, the aims, versions, machine."""

from __future__ import annotations

import datetime as dt
import os
import platform
import sqlite3
import sys
from importlib import metadata
from typing import Any

from .suite import SPECS, Spec, aims

PACKAGES = (
    "stalwart",
    "pocketflow",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "dbos",
    "SQLAlchemy",
    "aiosqlite",
    "psycopg",
    "psycopg-binary",
    "psycopg-pool",
    "pydantic",
)


def versions() -> dict[str, str]:
    out: dict[str, str] = {"python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    try:
        import psycopg

        from ._util import PG_URL

        with psycopg.connect(PG_URL, connect_timeout=3) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            out["postgresql server"] = str(row[0]) if row else "?"
    except Exception as exc:
        out["postgresql server"] = f"unreachable ({type(exc).__name__})"
    return out


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            mem_gib = int(f.readline().split()[1]) / 2**20
    except OSError:
        mem_gib = 0.0
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{cpu}, {os.cpu_count()} cores, {mem_gib:.0f} GiB",
        "os": platform.platform(),
        "load_before": os.getloadavg(),
    }


def _num(x: float) -> str:
    ax = abs(x)
    if float(x).is_integer():
        return f"{int(x):,}"
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    if ax >= 0.01:
        return f"{x:.3f}"
    return f"{x:.2g}"


def _cell(stat: dict[str, float] | None) -> str:
    if stat is None:
        return ""
    m, lo, hi = stat["median"], stat["min"], stat["max"]
    if lo == hi:
        return _num(m)
    return f"{_num(m)} [{_num(lo)}, {_num(hi)}]"


def _ratio(x: float) -> str:
    return f"{x:.2g}x" if x < 10 else f"{x:,.0f}x"


def _speed(spec: Spec, row: dict[str, Any]) -> float | None:
    """The headline measurement as a speed (higher is better)."""
    stat = row.get("stats", {}).get(spec.metric.key)
    if row.get("status") != "ok" or stat is None or stat["median"] <= 0:
        return None
    m = float(stat["median"])
    return m if spec.higher_is_better else 1 / m


def _table(spec: Spec, rows: list[dict[str, Any]]) -> list[str]:
    by = {r["subject"]: r for r in rows}
    subjects = {s.name: s for s in spec.subjects}
    floors = {s.floor or spec.floor for s in spec.subjects} | {spec.floor}
    head = [f"{spec.metric.label}, median [min, max]"]
    if spec.floor:
        head.append("vs floor")
    head.append("Stalwart's lead")
    head += [c.label for c in spec.columns]
    head += ["peak RSS, MB"]
    lines = ["| subject | " + " | ".join(head) + " |", "|" + " --- |" * (len(head) + 1)]
    for row in rows:
        if row["status"] != "ok":
            reason = row.get("reason", row["status"])
            if row["status"] == "unavailable" and reason.startswith("not installed"):
                reason = "not installed"
            cells = [reason] + [""] * (len(head) - 1)
            lines.append(f"| {row['subject']} | " + " | ".join(cells) + " |")
            continue
        stats = row["stats"]
        cells = [_cell(stats.get(spec.metric.key))]
        speed = _speed(spec, row)
        subject = subjects.get(row["subject"])
        floor = (subject.floor if subject else None) or spec.floor
        floor_speed = _speed(spec, by[floor]) if floor in by else None
        if spec.floor:
            if row["subject"] in floors or speed is None or floor_speed is None:
                cells.append("—" if row["subject"] in floors else "")
            elif spec.higher_is_better:
                cells.append(f"{speed / floor_speed:.0%} of floor")
            else:
                cells.append(f"{_ratio(floor_speed / speed)} floor")
        leads = []
        for ours_name in (subject.compare_to, subject.equal) if subject else ():
            if ours_name and ours_name in by:
                ours = _speed(spec, by[ours_name])
                if ours is not None and speed is not None:
                    leads.append(f"{_ratio(ours / speed)} ({ours_name})")
        cells.append("; ".join(leads))
        cells += [_cell(stats.get(c.key)) for c in spec.columns]
        cells.append(f"{row['peak_rss_mb']:.0f}")
        lines.append(f"| {row['subject']} | " + " | ".join(cells) + " |")
    return lines


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    keyed = {(r["id"], r["subject"]): r for r in rows}
    out = [
        "# Stalwart benchmarks",
        "",
        f"Run {meta['date']} on {meta['machine']} ({meta['os']}); load average "
        f"{meta['load_before'][0]:.2f} before, {meta['load_after'][0]:.2f} after; "
        f"{meta['seconds']:.0f} s in all. Command: `python -m benchmarks "
        f"{' '.join(meta.get('argv', []))}`.",
        "",
        "Each subject runs in a fresh process; times are `time.perf_counter()` around "
        "the workload only; each cell is the median of the repetitions with [min, max]. "
        '"vs floor": a rate as a share of the floor\'s, a time as a multiple of it. '
        '"Stalwart\'s lead": how many times faster the named Stalwart subject is than '
        "this one (below 1x: slower). Peak RSS is the process's (interpreter and "
        "imports included), or its largest child's for B5 and B6.",
        "",
    ]
    found = aims(keyed)
    if found:
        out += ["## Aims", "", "| id | aim | measured | met |", "| --- | --- | --- | --- |"]
        for wid, aim, measured, ok in found:
            out.append(f"| {wid} | {aim} | {measured} | {'yes' if ok else '**no**'} |")
        out.append("")
    for wid, spec in SPECS.items():
        these = [r for r in rows if r["id"] == wid]
        if not these:
            continue
        sizes = {r.get("n") for r in these}
        size = "" if sizes == {None} else f" (n = {', '.join(str(s) for s in sizes)})"
        out += [f"## {wid}: {spec.title}{size}", "", f"Aim: {spec.aim}.", ""]
        out += _table(spec, these)
        out.append("")
    out += ["## Versions", "", "| package | version |", "| --- | --- |"]
    out += [f"| {k} | {v} |" for k, v in meta.get("versions", {}).items()]
    out.append("")
    return "\n".join(out)
