"""The runner: starts, awaits, resumes, signals, cancels and streams runs."""

from .batch import RunCall
from .runner import RunHandle, Runner

__all__ = ["RunCall", "RunHandle", "Runner"]
