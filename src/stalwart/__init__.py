"""Stalwart: durable AI agents.

A policy is a plain async function; the runtime runs the action calls it asks
for, records every step in a ledger, and resumes a run that died by replay.
"""

from .context import Context
from .errors import (
    CancelledRun,
    CorruptedRecord,
    InputMismatchError,
    NonDeterminismError,
    RunFailed,
    RunNotFound,
    SerializationError,
    StaleLeaseError,
    StalwartError,
    StepError,
    StoreError,
    Veto,
)
from .events import (
    CallFailed,
    CallFinished,
    CallInfo,
    CallStarted,
    Emitted,
    Event,
    Hook,
    RunFinished,
    TextDelta,
)
from .message import ActionCall, ActionResult, Media, Message, Text
from .policy import Policy, ToolSpec, policy
from .runner import RunHandle, Runner
from .schema import ArgumentError

__version__ = "0.1.0"

__all__ = [
    "ActionCall",
    "ActionResult",
    "ArgumentError",
    "CallFailed",
    "CallFinished",
    "CallInfo",
    "CallStarted",
    "CancelledRun",
    "Context",
    "CorruptedRecord",
    "Emitted",
    "Event",
    "Hook",
    "InputMismatchError",
    "Media",
    "Message",
    "NonDeterminismError",
    "Policy",
    "RunFailed",
    "RunFinished",
    "RunHandle",
    "RunNotFound",
    "Runner",
    "SerializationError",
    "StaleLeaseError",
    "StalwartError",
    "StepError",
    "StoreError",
    "Text",
    "TextDelta",
    "ToolSpec",
    "Veto",
    "__version__",
    "policy",
]
