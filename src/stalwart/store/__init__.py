"""Stores: where runs, steps and signals are kept (see :mod:`stalwart.store.base`)."""

from .base import TERMINAL, RunRecord, RunStatus, SignalRecord, StepRecord, Store

__all__ = ["TERMINAL", "RunRecord", "RunStatus", "SignalRecord", "StepRecord", "Store"]
