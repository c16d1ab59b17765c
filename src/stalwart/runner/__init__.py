"""The runner: starts, awaits, resumes, signals, cancels and streams runs."""

from .batch import RunCall
from .runner import RunHandle, Runner
from .worker import Ticker

__all__ = ["RunCall", "RunHandle", "Runner", "Ticker"]
