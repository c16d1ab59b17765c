"""The runner: starts, awaits, resumes, signals, cancels and streams runs."""

from .runner import RunHandle, Runner

__all__ = ["RunHandle", "Runner"]
