"""A rolling deploy with real worker processes of two versions of one app
(two modules on disk), on SQLite and PostgreSQL: runs stay with the version
they started on, new runs go to the latest, a run the gate cleared moves to
the new version, and a retired version's runs that nothing else can continue
are stranded, visibly."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import stalwart as sw

V1 = """
import stalwart as sw

@sw.policy
async def double(x: int) -> int:
    return 2 * x

@sw.policy
async def triple(x: int) -> int:
    return 3 * x

@sw.policy
async def job(ctx: sw.Context, x: int) -> str:
    a = await double(x)
    got = await ctx.wait_for("go")
    return f"v1:{a}:{got}"
"""

# v2 triples large inputs: a v1 run of a large input diverges under it, a
# v1 run of a small one replays the same steps.
V2 = V1.replace("a = await double(x)", "a = await (double(x) if x < 10 else triple(x))").replace(
    'f"v1:', 'f"v2:'
)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stalwart.cli", *args], capture_output=True, text=True, timeout=60
    )


def _worker(url: str, app: Path, version: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stalwart.cli",
            "worker",
            "--store",
            url,
            "--app",
            str(app),
            "--version",
            version,
            "--lease",
            "3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    banner = proc.stdout.readline()
    assert f"version {version}" in banner, banner + (proc.stderr.read() if proc.stderr else "")
    return proc


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    return err


@pytest.fixture
def apps(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()
    v1, v2 = tmp_path / "v1" / "rollapp.py", tmp_path / "v2" / "rollapp.py"
    v1.write_text(V1)
    v2.write_text(V2)
    sys.path.insert(0, str(tmp_path / "v1"))
    try:
        yield v1, v2
    finally:
        sys.path.remove(str(tmp_path / "v1"))
        sys.modules.pop("rollapp", None)


async def _until(client: sw.Runner, run_id: str, status: str, timeout: float = 30) -> sw.RunRecord:
    deadline = time.monotonic() + timeout
    while True:
        rec = await client.get_run(run_id)
        if rec.status == status:
            return rec
        assert time.monotonic() < deadline, f"run {run_id} is {rec.status}, not {status}"
        await asyncio.sleep(0.05)


async def _learned(client: sw.Runner, since: float, timeout: float = 30) -> None:
    """Until every live worker has beat since ``since``: each learns the
    versions at its beats (a third of its lease), in the beat that records it."""
    deadline = time.monotonic() + timeout
    while True:
        now = time.time()
        live = [w for w in await client.store.list_workers() if w.live(now)]
        if live and all(w.beat_at > since for w in live):
            return
        assert time.monotonic() < deadline, f"workers not beating since {since}: {live}"
        await asyncio.sleep(0.05)


def test_a_rolling_deploy_keeps_each_run_on_code_that_can_continue_it(
    store_url: str, apps: tuple[Path, Path]
) -> None:
    v1_app, v2_app = apps
    import rollapp  # type: ignore[import-not-found]  # v1, as the client's code

    url = store_url
    old = _worker(url, v1_app, "v1")
    new: subprocess.Popen[str] | None = None
    try:

        async def before_the_deploy() -> None:
            async with sw.Runner(url, serving=False) as client:
                for run_id, x in (("small", 1), ("big", 20), ("big2", 30)):
                    await client.enqueue(rollapp.job, x, run_id=run_id)
                for run_id in ("small", "big", "big2"):
                    rec = await _until(client, run_id, "suspended")
                    assert rec.code_version == "v1"

        asyncio.run(before_the_deploy())
        new = _worker(url, v2_app, "v2")
        named_at = time.time()
        assert _cli("versions", "set-latest", "v2", "--store", url).returncode == 0

        async def during_the_deploy() -> None:
            async with sw.Runner(url, serving=False) as client:
                await _learned(client, named_at)
                # New runs go to the latest version's workers.
                await client.enqueue(rollapp.job, 3, run_id="fresh")
                rec = await _until(client, "fresh", "suspended")
                assert rec.code_version == "v2"
                await client.signal("fresh", "go", "yes")
                assert await sw.RunHandle(client, "fresh").result(timeout=30) == "v2:6:yes"
                # An in-flight v1 run finishes on a v1 worker, with v2 workers up.
                await client.signal("big", "go", "yes")
                assert await sw.RunHandle(client, "big").result(timeout=30) == "v1:40:yes"

        asyncio.run(during_the_deploy())

        # The gate clears the v1 run that v2 replays the same; not the other.
        gate = _cli(
            "deploy", "check", "--app", str(v2_app), "--store", url, "--clear",
            "--version", "v2", "--finished", "0", "--json",
        )  # fmt: skip
        assert gate.returncode == 1, gate.stderr  # big2 diverges: it blocks
        verdicts = {r["run_id"]: r for r in json.loads(gate.stdout)["runs"]}
        assert verdicts["small"]["verdict"] == "compatible"
        assert verdicts["small"]["cleared_for"] == "v2"
        assert verdicts["big2"]["verdict"] == "diverges"
        assert verdicts["big2"]["cleared_for"] is None

        # v1 is drained and retired: big2, which only v1 can continue, is stranded.
        _stop(old)
        retired = _cli("versions", "retire", "v1", "--store", url)
        assert retired.returncode == 0, retired.stderr
        assert "1 unfinished runs are stranded" in retired.stdout
        listed = _cli("runs", "list", "--store", url, "--json")
        why = {r["id"]: r["stranded"] for r in json.loads(listed.stdout)["runs"]}
        assert why["small"] is None
        assert why["big2"] is not None and "retired version v1" in why["big2"]
        versions = json.loads(_cli("versions", "list", "--store", url, "--json").stdout)
        states = {v["version"]: (v["latest"], v["retired"]) for v in versions["versions"]}
        assert states == {"v1": (False, True), "v2": (True, False)}

        # Pinning big2 to v2 by hand is refused: v2 would not continue it the same way.
        pin = _cli("runs", "pin", "big2", "--version", "v2", "--app", str(v2_app), "--store", url)
        assert pin.returncode == 1 and "diverges" in pin.stderr, pin.stderr

        async def after_the_deploy() -> None:
            async with sw.Runner(url, serving=False) as client:
                # The cleared v1 run is taken by a v2 worker, and stays with v2.
                await client.signal("small", "go", "yes")
                assert await sw.RunHandle(client, "small").result(timeout=30) == "v2:2:yes"
                assert (await client.get_run("small")).code_version == "v2"
                assert (await client.get_run("big2")).status == "suspended"

        asyncio.run(after_the_deploy())
        deadline = time.monotonic() + 20
        while "stranded" not in (_cli("runs", "list", "--store", url).stdout):
            assert time.monotonic() < deadline
        err = _stop(new)
        new = None
        assert "run 'big2' is stranded" in err, err
        assert "retired version v1" in err
    finally:
        for proc in (old, new):
            if proc is not None and proc.poll() is None:
                _stop(proc)
