"""`stalwart worker`: a real process executing enqueued runs until SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import stalwart as sw

APP = """
import stalwart as sw

@sw.policy
async def hello(name: str) -> str:
    return f"hello {name}"
"""


def test_worker_executes_enqueued_runs_and_stops_on_sigterm(
    tmp_path: Path, sqlite_url: str
) -> None:
    (tmp_path / "wapp.py").write_text(APP)
    url = sqlite_url
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stalwart.cli",
            "worker",
            "--store",
            url,
            "--app",
            str(tmp_path / "wapp.py") + ":hello",
            "--concurrency",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert "worker" in banner and "concurrency 2" in banner
        sys.path.insert(0, str(tmp_path))
        import wapp  # type: ignore[import-not-found]

        async def use() -> list[str]:
            async with sw.Runner(url, serving=False) as client:
                handles = [await client.enqueue(wapp.hello, n, run_id=n) for n in ("a", "b", "c")]
                return [await h.result(timeout=20) for h in handles]

        assert asyncio.run(use()) == ["hello a", "hello b", "hello c"]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        if str(tmp_path) in sys.path:
            sys.path.remove(str(tmp_path))
    assert proc.returncode == 0, err
    assert "worker stopped" in out


def test_worker_with_a_missing_app_fails_clearly(sqlite_url: str) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "stalwart.cli",
            "worker",
            "--store",
            sqlite_url,
            "--app",
            "no_such_module_xyz",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 1
    assert "cannot import the app module 'no_such_module_xyz'" in out.stderr
    assert "Traceback" not in out.stderr
