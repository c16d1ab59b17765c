"""Stalwart: durable AI agents.

A policy is a plain async function; the engine runs the action calls it asks
for, records every step in a ledger, and resumes a run that died by replay.

S1 to S14, cited throughout the code, are the clauses of the durability
contract, stated in docs/durability.md ("The contract").
"""

from .conversations import Conversation
from .core.codec import register_codec
from .core.context import Context
from .core.declared import register_type
from .core.errors import (
    ApprovalError,
    ArgumentError,
    CancelledRun,
    CorruptedRecord,
    DuplicatePolicy,
    EncryptionKeyError,
    InputMismatchError,
    MailboxClosed,
    NonDeterminismError,
    RunNotFound,
    ScheduleError,
    ScheduleNotFound,
    SerializationError,
    SignalRefused,
    StaleLeaseError,
    StalwartError,
    StepError,
    StoreError,
    StoreUnavailable,
    TurnFailed,
    UnknownOption,
    ValueEncrypted,
    ValueErased,
    Veto,
)
from .core.events import (
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
from .core.ledger import RunRecord, StepRecord
from .core.mail import Mail
from .core.memory import Memory, MemoryItem
from .core.message import ActionCall, ActionResult, Media, Message, Text
from .core.policy import Policy, ToolSpec, policy
from .runner import RunCall, RunHandle, Runner
from .schedules import Schedules
from .stores.base import ScheduleRecord

__version__ = "0.1.0"

# Subpackages load on first use (``sw.llm.openai(...)``, ``sw.flow.Node``), so
# ``import stalwart`` stays light for programs that do not need them.
_LAZY = ("cli", "flow", "llm", "stores", "testing")


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'stalwart' has no attribute {name!r}")


__all__ = [
    "ActionCall",
    "ActionResult",
    "ApprovalError",
    "ArgumentError",
    "CallFailed",
    "CallFinished",
    "CallInfo",
    "CallStarted",
    "CancelledRun",
    "Context",
    "Conversation",
    "CorruptedRecord",
    "DuplicatePolicy",
    "Emitted",
    "EncryptionKeyError",
    "Event",
    "Hook",
    "InputMismatchError",
    "Mail",
    "MailboxClosed",
    "Media",
    "Memory",
    "MemoryItem",
    "Message",
    "NonDeterminismError",
    "Policy",
    "RunCall",
    "RunFinished",
    "RunHandle",
    "RunNotFound",
    "RunRecord",
    "Runner",
    "ScheduleError",
    "ScheduleNotFound",
    "ScheduleRecord",
    "Schedules",
    "SerializationError",
    "SignalRefused",
    "StaleLeaseError",
    "StalwartError",
    "StepError",
    "StepRecord",
    "StoreError",
    "StoreUnavailable",
    "Text",
    "TextDelta",
    "ToolSpec",
    "TurnFailed",
    "UnknownOption",
    "ValueEncrypted",
    "ValueErased",
    "Veto",
    "__version__",
    "policy",
    "register_codec",
    "register_type",
]
