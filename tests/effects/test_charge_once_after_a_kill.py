"""A payment API that dedupes by Idempotency-Key charges once, even when the
worker is killed with SIGKILL after the API took the charge and before the
step was recorded, and the resumed run charges again.

Three real processes: the payment API (``payment_server.py``), which counts
charges by key and outlives the worker; the worker (``charge_app.py``),
killed mid-step; a second worker that resumes the run from the ledger (a
SQLite file, a PostgreSQL schema).
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import httpx
import pytest
from tests.crash import kill, spawn, wait_for_line

import stalwart as sw

HERE = Path(__file__).parent
SERVER = HERE / "payment_server.py"
APP = HERE / "charge_app.py"


async def _recorded(url: str, run_id: str) -> dict[str, str]:
    async with sw.Runner(url, serving=False) as runner:
        return {s.key: s.name for s in await runner.steps(run_id)}


@pytest.mark.parametrize(
    "moment",
    [
        "in_flight",  # the API took the charge; its answer never reached the worker
        "answered",  # the worker read the answer; the step had not returned
    ],
)
def test_a_worker_killed_mid_charge_is_charged_once_when_the_run_resumes(
    store_url: str, moment: str
) -> None:
    server = spawn(SERVER, "hold" if moment == "in_flight" else "answer")
    started = [server]
    try:
        port = wait_for_line(server, "listening")[-1].split()[1]
        api = f"http://127.0.0.1:{port}"
        worker = spawn(APP, store_url, api, "run", "order-42", moment)
        started.append(worker)
        if moment == "in_flight":
            wait_for_line(server, "received order-42:1/1")
        else:
            wait_for_line(worker, "charged ch_1")
        kill(worker)
        assert worker.returncode == -signal.SIGKILL
        assert "charge" not in asyncio.run(_recorded(store_url, "order-42")).values()

        resumed = spawn(APP, store_url, api, "recover", "order-42")
        started.append(resumed)
        out, err = resumed.communicate(timeout=60)
        assert resumed.returncode == 0, err
        result = next(line for line in out.splitlines() if line.startswith("result "))
        assert json.loads(result.removeprefix("result ")) == "order-42 paid by ch_1"

        ledger = httpx.get(f"{api}/charges").json()
        assert ledger == {
            "charges": {"order-42:1/1": "ch_1"},  # one charge
            "requests": {"order-42:1/1": 2},  # asked twice, with one key
        }
        assert asyncio.run(_recorded(store_url, "order-42")) == {"1": "charge"}
    finally:
        for proc in started:
            if proc.poll() is None:
                kill(proc)
