"""Helpers shared by the workloads: PostgreSQL schemas, stored bytes, memory, peers."""

from __future__ import annotations

import contextlib
import importlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# The server the PostgreSQL workloads use (trust auth, as in the test suite).
PG_URL = os.environ.get(
    "STALWART_BENCH_PG",
    os.environ.get("STALWART_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"),
)

Result = dict[str, Any]

# The repository root: child processes run there, so ``benchmarks`` imports.
ROOT = Path(__file__).resolve().parent.parent


class Unavailable(Exception):
    """A subject that cannot run here: a peer not installed, no PostgreSQL."""


def require(*modules: str) -> None:
    """Raise Unavailable("not installed") unless every module imports."""
    missing = []
    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError:
            missing.append(m)
    if missing:
        raise Unavailable(f"not installed ({', '.join(missing)})")


def postgres_problem() -> str | None:
    """None if PostgreSQL answers (and psycopg is installed), else why not."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed"
    try:
        with psycopg.connect(PG_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"PostgreSQL unreachable ({type(exc).__name__})"
    return None


def require_postgres() -> None:
    why = postgres_problem()
    if why is not None:
        raise Unavailable(why)


def new_schema_name(tag: str) -> str:
    return f"bench_{tag}_{uuid.uuid4().hex[:10]}"


@contextlib.contextmanager
def pg_schema(tag: str, create: bool = False) -> Iterator[str]:
    """A fresh schema name (created if asked), dropped afterwards with its tables."""
    import psycopg

    name = new_schema_name(tag)
    if create:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def pg_url_with(**params: str) -> str:
    """PG_URL with query parameters added (``schema=`` for Stalwart, ``options=`` for libpq)."""
    from urllib.parse import urlencode

    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}{urlencode(params)}"


def pg_schema_bytes(schema: str) -> int:
    """Bytes the schema's tables take on disk, indexes and TOAST included."""
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'm', 'p')",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


def sqlite_bytes(path: str | Path) -> int:
    """Bytes a SQLite database takes once compacted, WAL content included.

    ``VACUUM INTO`` reads a consistent snapshot (main file plus WAL) through a
    connection of our own, so it works while the framework keeps its own open.
    """
    path = Path(path)
    if not path.exists():
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "copy.db"
        db = sqlite3.connect(path)
        try:
            db.execute("VACUUM INTO ?", (str(out),))
        finally:
            db.close()
        return out.stat().st_size


def rss_mb() -> float:
    """This process's resident memory now, in MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def python_startup_s(repeat: int = 3) -> float:
    """How long a bare interpreter takes to start and exit (the best of a few)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        best = min(best, time.perf_counter() - t)
    return best


def import_time_s(module: str, repeat: int = 5) -> float:
    """Median time to import ``module`` in a fresh interpreter (import only)."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    times = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        times.append(float(out.split()[-1]))
    times.sort()
    return times[len(times) // 2]


def read_until(stream: Any, prefix: str, at_least: int) -> None:
    """Read lines ``prefix N`` from a child's stdout until N >= at_least."""
    for line in stream:
        if line.startswith(prefix) and int(line.split()[1]) >= at_least:
            return
    raise RuntimeError(f"the child ended before printing {prefix} {at_least}")


def re_executed(counter: Path) -> int:
    """Steps that ran more than once, from a file each execution appended to."""
    seen = counter.read_text().split() if counter.exists() else []
    return len(seen) - len(set(seen))


# A fixed benchmark key: what is measured is the cost of sealing, not the key.
BENCH_KEY = ("bench", bytes(range(32)))


def encrypted_store(url: str) -> Any:
    """The store at ``url`` with every value encrypted at rest (AES-256-GCM):
    the "encrypted" variants of B2, B3 and B9."""
    from stalwart.stores import open_store
    from stalwart.stores.encryption import EncryptedStore, StaticKeys

    return EncryptedStore(open_store(url, keys=False), StaticKeys([BENCH_KEY]))
