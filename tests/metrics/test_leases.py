"""Lease and store-outage metrics from real events: a worker stopped past
its lease (SIGSTOP) while another takes its run, and a PostgreSQL whose
port goes down under a runner; read from a real /metrics with
prometheus_client's parser, and through OpenTelemetry."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from tests.conftest import PG_URL, drop_schema, pg_schema_url, require_postgres
from tests.crash import kill, wait_for_files
from tests.metrics import app
from tests.metrics.scraping import free_port, read, scrape, start_worker, stop, value

import stalwart as sw
from stalwart.metrics import Metrics

LEASE = 1.0


@pytest.fixture
def pg_schema() -> Iterator[str]:
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield schema
    drop_schema(schema)


def eventually(check: object, what: str, timeout: float = 30) -> None:
    """Wait until ``check()`` is true (a condition on another process)."""
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def test_a_worker_stopped_past_its_lease_counts_the_lease_lost(
    tmp_path: Path, pg_schema: str
) -> None:
    url, gate, port = pg_schema_url(pg_schema), tmp_path / "gate", free_port()
    first = start_worker(url, port, lease=LEASE)
    try:

        async def enqueue() -> None:
            async with sw.Runner(url) as client:
                await client.enqueue(app.held, str(gate), run_id="held")

        asyncio.run(enqueue())
        wait_for_files(first, Path(f"{gate}.reached"))
        eventually(
            lambda: value(scrape(first, port), "stalwart_leases_renewed_total") >= 1,
            "a heartbeat renewed the lease",
        )
        before = scrape(first, port)
        assert value(before, "stalwart_leases_taken_total") == 1
        assert value(before, "stalwart_leases_lost_total") == 0

        first.send_signal(signal.SIGSTOP)  # holds the run, beats no more
        try:
            time.sleep(LEASE * 2)  # past its lease

            async def take_over() -> int:
                async with sw.Runner(url, policies=[app.held], serving=True, lease=LEASE) as second:
                    while (await second.get_run("held")).fence < 2:
                        await asyncio.sleep(0.05)
                    first.send_signal(signal.SIGCONT)  # it wakes up to a run that is not its own
                    await asyncio.to_thread(
                        eventually,
                        lambda: value(read(port), "stalwart_leases_lost_total") == 1,
                        "the stopped worker counted its lease lost",
                    )
                    gate.write_text("open")
                    return int(await second.outcome("held"))

            assert asyncio.run(take_over()) == 42
        finally:
            first.send_signal(signal.SIGCONT)
        after = scrape(first, port)
        assert value(after, "stalwart_leases_lost_total") == 1
        assert value(after, "stalwart_leases_taken_total") == 1  # it took nothing since
        assert (
            value(
                after,
                "stalwart_runs_stopped_total",
                policy="held",
                queue="default",
                reason="lease_lost",
            )
            == 1
        )
        stop(first)
    finally:
        if first.poll() is None:
            kill(first)


class Proxy:
    """A TCP port in front of PostgreSQL that the test takes down (every
    connection cut, new ones refused) and brings back."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    async def up(self) -> None:
        self._server = await asyncio.start_server(
            self._link, "127.0.0.1", self.port, reuse_address=True
        )

    async def down(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._links):
            writer.transport.abort()
        await self._server.wait_closed()
        self._server = None

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._links |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort()
                self._links.discard(dst)

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


def through(proxy: Proxy, url: str) -> str:
    """``url`` with its server replaced by the proxy."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    netloc = f"{user}@127.0.0.1:{proxy.port}" if user else f"127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=netloc))


async def test_a_store_outage_counts_the_seconds_it_could_not_be_reached(
    pg_schema: str,
) -> None:
    otel = pytest.importorskip("opentelemetry.sdk.metrics")
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    server = urlsplit(PG_URL)
    proxy = Proxy((server.hostname or "127.0.0.1", server.port or 5432))
    await proxy.up()
    url = through(proxy, pg_schema_url(pg_schema, retry_for=0.5, pool_timeout=0.5))
    reader = InMemoryMetricReader()
    metrics = Metrics(meter_provider=otel.MeterProvider(metric_readers=[reader]))

    def otel_value(name: str) -> float:
        data = reader.get_metrics_data()
        assert data is not None
        for r in data.resource_metrics:
            for s in r.scope_metrics:
                for m in s.metrics:
                    if m.name == name:
                        return float(sum(p.value for p in m.data.data_points))  # type: ignore[attr-defined]
        return 0.0

    async with sw.Runner(
        url, hooks=[metrics], policies=[app.double], serving=True, poll_interval=0.1
    ) as runner:
        metrics.watch(runner)
        http = metrics.serve(runner, port=0)
        try:
            assert await runner.run(app.double, 1) == 2
            answering = await asyncio.to_thread(read, http.port)
            assert value(answering, "stalwart_store_outages_total") == 0
            assert value(answering, "stalwart_store_unavailable_seconds_total") == 0

            await proxy.down()  # connection refused; the open ones cut
            async with asyncio.timeout(60):
                while not runner.store.outages.down:  # the worker loop's next pass finds out
                    await asyncio.sleep(0.05)
            during = await asyncio.to_thread(read, http.port)
            later = await asyncio.to_thread(read, http.port)
            assert value(during, "stalwart_store_up") == 0
            assert value(during, "stalwart_store_outages_total") == 1
            # The outage under way counts, and keeps counting.
            assert (
                0
                < value(during, "stalwart_store_unavailable_seconds_total")
                < value(later, "stalwart_store_unavailable_seconds_total")
            )

            await proxy.up()
            async with asyncio.timeout(60):  # the pool reconnects after its own backoff
                while runner.store.outages.down:
                    await asyncio.sleep(0.05)
            assert await runner.run(app.double, 2) == 4
            ended = await asyncio.to_thread(read, http.port)
            again = await asyncio.to_thread(read, http.port)
            assert value(ended, "stalwart_store_outages_total") == 1
            seconds = value(ended, "stalwart_store_unavailable_seconds_total")
            assert seconds >= value(later, "stalwart_store_unavailable_seconds_total")
            assert value(again, "stalwart_store_unavailable_seconds_total") == seconds
            assert value(ended, "stalwart_store_up") == 1
            # The same, through OpenTelemetry.
            assert otel_value("stalwart.store.outages") == 1
            assert otel_value("stalwart.store.unavailable") == pytest.approx(seconds)
            assert otel_value("stalwart.leases.taken") == 2
        finally:
            http.close()
    await proxy.down()
