"""The runner: starts, awaits, resumes, signals, cancels and streams runs."""

from .runner import RunHandle, Runner, run_detached

__all__ = ["RunHandle", "Runner", "run_detached"]
