"""OpenTelemetry: the same counters and histograms as Prometheus's, through
the OpenTelemetry metrics API, for an application that exports its metrics
with an OTel SDK (``Metrics(meter_provider=provider)``).

Instrument names follow OpenTelemetry's conventions (dotted, units apart):
``stalwart.runs.started``, ``stalwart.step.duration`` (seconds) and so on;
docs/metrics.md lists them beside their Prometheus names. The store's gauges
(run counts, queue age) stay with the Prometheus endpoint: an OTel exporter
reads from its own thread, and a store query there would be on a run's path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from .readings import Reader

__all__ = ["OpenTelemetryOutput"]

#: The instrumentation scope of every instrument here.
SCOPE = "stalwart"


class OpenTelemetryOutput:
    """The OpenTelemetry side of :class:`~stalwart.metrics.Metrics`."""

    def __init__(self, provider: MeterProvider, read: Reader | None = None) -> None:
        from .. import __version__

        meter = provider.get_meter(SCOPE, __version__)
        self._runs_started = meter.create_counter(
            "stalwart.runs.started", "{run}", "Executions of runs begun in this process"
        )
        self._runs_finished = meter.create_counter(
            "stalwart.runs.finished", "{run}", "Runs finished in this process, by status"
        )
        self._runs_stopped = meter.create_counter(
            "stalwart.runs.stopped",
            "{run}",
            "Executions that stopped here without finishing the run, by reason",
        )
        self._steps = meter.create_histogram(
            "stalwart.step.duration", "s", "Steps executed live in this process, by outcome"
        )
        self._replayed = meter.create_counter(
            "stalwart.steps.replayed",
            "{step}",
            "Steps answered from the ledger in this process without executing",
        )
        self._tokens = meter.create_counter(
            "stalwart.model.tokens", "{token}", "Model tokens of live model calls, by kind"
        )
        self._cost = meter.create_counter(
            "stalwart.model.cost", "1", "What live model calls cost at the prices given"
        )
        if read is None:
            return
        # Read when the SDK collects (its reader's thread): plain reads of
        # what the runners and their stores count anyway.
        pulled = (
            ("stalwart.leases.taken", "{lease}", "Leases taken: claims that began an execution"),
            ("stalwart.leases.renewed", "{lease}", "Leases extended by a heartbeat"),
            ("stalwart.leases.lost", "{lease}", "Executions stopped because their lease was lost"),
            ("stalwart.store.outages", "{outage}", "Times the store stopped answering"),
            ("stalwart.store.unavailable", "s", "Seconds the store could not be reached"),
        )
        for (name, unit, description), field in zip(pulled, _FIELDS, strict=True):
            meter.create_observable_counter(
                name, [_observer(read, field)], unit=unit, description=description
            )

    def run_started(self, policy: str, queue: str) -> None:
        self._runs_started.add(1, {"policy": policy, "queue": queue})

    def run_finished(self, policy: str, queue: str, status: str) -> None:
        self._runs_finished.add(1, {"policy": policy, "queue": queue, "status": status})

    def run_stopped(self, policy: str, queue: str, reason: str) -> None:
        self._runs_stopped.add(1, {"policy": policy, "queue": queue, "reason": reason})

    def step(self, policy: str, outcome: str, seconds: float) -> None:
        self._steps.record(seconds, {"policy": policy, "outcome": outcome})

    def step_replayed(self, policy: str) -> None:
        self._replayed.add(1, {"policy": policy})

    def tokens(self, model: str, kind: str, count: int) -> None:
        self._tokens.add(count, {"model": model, "kind": kind})

    def cost(self, model: str, amount: float) -> None:
        self._cost.add(amount, {"model": model})


#: The :class:`~.readings.Readings` field each observable counter reports, in order.
_FIELDS = (
    "leases_taken",
    "leases_renewed",
    "leases_lost",
    "store_outages",
    "store_unavailable_seconds",
)


def _observer(read: Reader, field: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(getattr(read(), field))]

    return observe
