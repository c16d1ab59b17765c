"""Stalwart: durable AI agents.

A policy is a plain async function; the runtime runs the action calls it asks
for, records every step in a ledger, and resumes a run that died by replay.
"""

from .context import Context
from .declared import register_type
from .errors import (
    CancelledRun,
    CorruptedRecord,
    DuplicatePolicy,
    InputMismatchError,
    NonDeterminismError,
    RunFailed,
    RunNotFound,
    SerializationError,
    StaleLeaseError,
    StalwartError,
    StepError,
    StoreError,
    StoreUnavailable,
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

# Subpackages load on first use (``sw.llm.openai(...)``, ``sw.flow.Node``), so
# ``import stalwart`` stays light for programs that do not need them.
_LAZY = ("cli", "codec", "flow", "llm", "store", "testing")


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'stalwart' has no attribute {name!r}")


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
    "DuplicatePolicy",
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
    "StoreUnavailable",
    "Text",
    "TextDelta",
    "ToolSpec",
    "Veto",
    "__version__",
    "policy",
    "register_type",
]
