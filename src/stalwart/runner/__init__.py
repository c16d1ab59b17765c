"""The runner: starts, awaits, resumes, signals, cancels and streams runs."""

from .batch import RunCall
from .leases import Leases
from .runner import RunHandle, Runner
from .worker import Ticker

__all__ = ["Leases", "RunCall", "RunHandle", "Runner", "Ticker"]
