"""`stalwart serve --metrics-port` and `stalwart ui --metrics-port`: /metrics
on a port of its own beside the app, read with prometheus_client's parser."""

from __future__ import annotations

import asyncio
import socket
import urllib.error
import urllib.request

import pytest
from tests.metrics import app
from tests.metrics.scraping import APP, free_port, scrape, start_cli, stop, value

import stalwart as sw


def greet_all(url: str, *names: str) -> list[str]:
    async def go() -> list[str]:
        async with sw.Runner(url) as client:
            handles = [await client.enqueue(app.greet, n) for n in names]
            return [str(await h.result(timeout=60)) for h in handles]

    return asyncio.run(go())


def test_stalwart_serve_executing_runs_serves_their_metrics(sqlite_url: str) -> None:
    api, port = free_port(), free_port()
    proc = start_cli(
        "serve", "--app", APP, "--store", sqlite_url, "--no-auth", "--execute",
        "--port", str(api), "--metrics-port", str(port),
    )  # fmt: skip
    try:
        assert value(scrape(proc, port), "stalwart_leases_taken_total") == 0
        assert greet_all(sqlite_url, "ann", "bo") == ["ann 6", "bo 4"]
        samples = scrape(proc, port)
        assert (
            value(
                samples,
                "stalwart_runs_finished_total",
                policy="greet",
                queue="default",
                status="succeeded",
            )
            == 2
        )
        assert (
            value(samples, "stalwart_step_seconds_count", policy="greet", outcome="succeeded") == 2
        )
        assert value(samples, "stalwart_leases_taken_total") == 2
        assert value(samples, "stalwart_runs", status="succeeded", queue="default") == 2
        assert value(samples, "stalwart_store_up") == 1
        # Not on the API's port: that one keeps its own access rules.
        with pytest.raises(urllib.error.HTTPError) as got:
            urllib.request.urlopen(f"http://127.0.0.1:{api}/metrics", timeout=10)
        assert got.value.code == 404
    finally:
        stop(proc, server=True)


def test_stalwart_ui_serves_the_stores_metrics(sqlite_url: str) -> None:
    assert greet_all(sqlite_url) == []  # makes the store
    ui, port = free_port(), free_port()
    proc = start_cli("ui", "--store", sqlite_url, "--port", str(ui), "--metrics-port", str(port))
    try:

        async def park() -> None:
            async with sw.Runner(sqlite_url) as client:
                await client.enqueue(app.greet, "cy", queue="parked")  # nobody serves it

        asyncio.run(park())
        samples = scrape(proc, port)
        assert value(samples, "stalwart_store_up") == 1
        assert value(samples, "stalwart_runs", status="pending", queue="parked") == 1
        assert value(samples, "stalwart_oldest_pending_seconds", queue="parked") >= 0
        # The inspector executes nothing: no lease of its own.
        assert value(samples, "stalwart_leases_taken_total") == 0
    finally:
        stop(proc, server=True)


@pytest.mark.parametrize("command", ["serve", "ui"])
def test_a_metrics_port_already_taken_fails_at_once(command: str, sqlite_url: str) -> None:
    greet_all(sqlite_url)
    args = ["--store", sqlite_url, "--port", str(free_port())]
    if command == "serve":
        args += ["--app", APP, "--no-auth"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = start_cli(command, *args, "--metrics-port", str(port))
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert f"--metrics-port {port}" in err
