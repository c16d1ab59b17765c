"""Every error Stalwart raises, in one tree.

A failure a user can meet has its own type, so callers catch exactly what
they mean, and its message names the run, the step, the policy or the value
at fault. Every class derives from :class:`StalwartError`; a second base
(``ValueError``, ``LookupError``...) says which builtin it also is, so
``except LookupError`` still catches a run that is not found. Each class is
defined here, once, and exported from one public place (shown on the right)::

    StalwartError                              stalwart
    ├── SerializationError (TypeError)         stalwart
    ├── NonDeterminismError                    stalwart
    ├── InputMismatchError                     stalwart
    ├── DuplicatePolicy (ValueError)           stalwart
    ├── ArgumentError (ValueError)             stalwart
    ├── UnknownOption (LookupError)            stalwart
    ├── Veto                                   stalwart
    ├── ApprovalError (ValueError)             stalwart
    ├── SignalRefused (ValueError)             stalwart
    ├── StepError                              stalwart
    ├── RunNotFound (LookupError)              stalwart
    ├── CancelledRun                           stalwart
    ├── MailboxClosed                          stalwart
    ├── TurnFailed                             stalwart
    ├── ScheduleError (ValueError)             stalwart
    ├── ScheduleNotFound (LookupError)         stalwart
    ├── StoreError                             stalwart
    │   ├── StoreUnavailable                   stalwart
    │   ├── CorruptedRecord                    stalwart
    │   │   ├── ValueEncrypted                 stalwart
    │   │   └── ValueErased                    stalwart
    │   ├── EncryptionKeyError (ValueError)    stalwart
    │   └── StaleLeaseError                    stalwart
    ├── ForkError (ValueError)                 stalwart.timetravel
    ├── MoveError (ValueError)                 stalwart.timetravel
    ├── ProviderError                          stalwart.llm
    │   ├── InvalidRequest                     stalwart.llm
    │   ├── AuthenticationFailed               stalwart.llm
    │   ├── RateLimited                        stalwart.llm
    │   ├── ProviderUnavailable                stalwart.llm
    │   └── FallbackExhausted                  stalwart.llm
    ├── ProviderStreamError (RuntimeError)     stalwart.llm
    ├── MissingAPIKey                          stalwart.llm
    ├── MissingDependency (ImportError)        stalwart.llm
    ├── MaxRoundsExceeded                      stalwart.llm
    ├── BudgetExceeded                         stalwart.llm
    ├── OutputValidationError                  stalwart.llm
    ├── GuardrailTripped                       stalwart.llm
    ├── ScriptExhausted (RuntimeError)         stalwart.testing
    ├── NoRoute                                stalwart.journey
    ├── McpError                               stalwart.mcp
    │   ├── ToolError                          stalwart.mcp
    │   ├── ServerUnavailable                  stalwart.mcp
    │   └── ToolChanged                        stalwart.mcp
    ├── A2AError                               stalwart.a2a
    │   └── RemoteTaskFailed                   stalwart.a2a
    └── CLIError                               (the command line's own exit)

Each class has a stable ``error_code`` (``RunNotFound.error_code ==
"run_not_found"``): the class name in snake case when it was introduced,
never changed afterwards, even if the class is renamed, so a client matches
on it rather than on a message or a class name. Every code is its class's
own (a subclass does not inherit its base's) and no two are alike
(tests/core/test_error_codes.py); the HTTP API puts it in the ``code`` of
its error bodies. ``code`` itself is taken: a provider's own error code on
:class:`ProviderError`, the exit status on :class:`CLIError`.

Defining the provider and MCP errors here imports nothing from those layers:
a class is only a name and a message. It keeps the tree in one place and
gives a recorded error a stable name (``stalwart.errors.<Class>``), which a
replay raises as itself (S4).

Not errors, and so not in the tree: the engine unwinds a run with
``Suspend`` and ``Halt`` (``BaseException``, in :mod:`.engine.unwind`), a
flow with ``Stopped`` (:mod:`stalwart.flow.visits`); no ``except Exception``
in user code catches them. Two private classes never leave the function
that raises them: ``_Stop`` (:mod:`stalwart.testing.guard`, the cause of a
halted replay) and ``_NonFinite`` (:mod:`stalwart.timetravel.export`).
"""

from __future__ import annotations

from .redact import redact

__all__ = [
    "A2AError",
    "ApprovalError",
    "ArgumentError",
    "AuthenticationFailed",
    "BudgetExceeded",
    "CLIError",
    "CancelledRun",
    "CorruptedRecord",
    "DuplicatePolicy",
    "EncryptionKeyError",
    "FallbackExhausted",
    "ForkError",
    "GuardrailTripped",
    "InputMismatchError",
    "InvalidRequest",
    "MailboxClosed",
    "MaxRoundsExceeded",
    "McpError",
    "MissingAPIKey",
    "MissingDependency",
    "MoveError",
    "NoRoute",
    "NonDeterminismError",
    "OutputValidationError",
    "ProviderError",
    "ProviderStreamError",
    "ProviderUnavailable",
    "RateLimited",
    "RemoteTaskFailed",
    "RunNotFound",
    "ScheduleError",
    "ScheduleNotFound",
    "ScriptExhausted",
    "SerializationError",
    "ServerUnavailable",
    "SignalRefused",
    "StaleLeaseError",
    "StalwartError",
    "StepError",
    "StoreError",
    "StoreUnavailable",
    "ToolChanged",
    "ToolError",
    "TurnFailed",
    "UnknownOption",
    "ValueEncrypted",
    "ValueErased",
    "Veto",
]


class StalwartError(Exception):
    """Base class of every error Stalwart raises itself."""

    error_code = "stalwart_error"


# -- a run's values and calls ---------------------------------------------------------


class SerializationError(StalwartError, TypeError):
    """A value cannot cross the JSON boundary (S11).

    Raised when a value is recorded, so that a run never stores something it
    could not read back after a crash.
    """

    error_code = "serialization_error"


class NonDeterminismError(StalwartError):
    """On replay, the call made at a step differs from the one recorded (S5)."""

    error_code = "non_determinism_error"


class InputMismatchError(StalwartError):
    """A run id was started again with other inputs, or another policy, than
    the first time: one run id is one run."""

    error_code = "input_mismatch_error"


class DuplicatePolicy(StalwartError, ValueError):
    """Two different policies would be recorded under one name.

    Refused when the second is registered: a run resumed by name must find
    the policy it started with, never a namesake (S13).
    """

    error_code = "duplicate_policy"


class ArgumentError(StalwartError, ValueError):
    """Arguments from a model do not fit the option's schema.

    The message lists every field at fault, so that the model can correct
    itself in its next round.
    """

    error_code = "argument_error"


class UnknownOption(StalwartError, LookupError):
    """A program offered an option by a name no policy has
    (``options=["web_search"]`` with nothing named so).

    Raised at the call, naming the run, the step and the names that exist.
    A *model* calling a tool that is not offered is not this: that call gets
    an error result the model reads.
    """

    error_code = "unknown_option"


class Veto(StalwartError):
    """Raised by a hook's ``before_call`` to refuse a call.

    Inside options dispatch the veto becomes an error result the model reads.
    """

    error_code = "veto"


class ApprovalError(StalwartError, ValueError):
    """A decision sent to a run waiting for tool approval that does not fit
    (docs/approvals.md): ``field`` is where in the payload (``['c1']['decision']``,
    ``""`` for the whole payload), and the message names it, the run and the
    signal. Refused when sent, nothing queued: the run keeps waiting."""

    error_code = "approval_error"
    field: str = ""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class SignalRefused(StalwartError, ValueError):
    """A signal sent once (``send_signal(..., once=True)``) whose name the
    run has had before, taken or not, or one sent to a wait (``wait_fence``)
    that is no longer open (another answer came first): nothing was sent. A
    tool approval's decision is sent once (each wait has a name of its own),
    and the runner says so as an :class:`ApprovalError` naming the wait."""

    error_code = "signal_refused"


class StepError(StalwartError):
    """A recorded failure whose original exception type cannot be rebuilt.

    Replay raises the original exception type when it can be imported; this
    stands in for it otherwise, keeping the type name and the message.
    """

    error_code = "step_error"

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.error_message = message


# -- runs, their mail, conversations and schedules -----------------------------------


class RunNotFound(StalwartError, LookupError):
    """No run has this id in the store."""

    error_code = "run_not_found"


class CancelledRun(StalwartError):
    """The run was cancelled before it finished."""

    error_code = "cancelled_run"


class MailboxClosed(StalwartError):
    """The recipient run has finished: it reads no more messages."""

    error_code = "mailbox_closed"


class TurnFailed(StalwartError):
    """The agent failed on this turn of a conversation (its error, as text);
    the conversation goes on."""

    error_code = "turn_failed"


class ScheduleError(StalwartError, ValueError):
    """A schedule's definition is wrong (the message names the schedule and
    the field), or it can no longer tick."""

    error_code = "schedule_error"


class ScheduleNotFound(StalwartError, LookupError):
    """No schedule has this name in the store."""

    error_code = "schedule_not_found"


# -- stores ---------------------------------------------------------------------------


class StoreError(StalwartError):
    """The store refused an operation for good: a usage error or a bad row.

    Permanent: retrying the same operation gives the same answer, so a run
    that meets one fails with its message (S14). A store that is merely
    unreachable raises :class:`StoreUnavailable` instead.
    """

    error_code = "store_error"


class StoreUnavailable(StoreError):
    """The store cannot be reached or is busy right now; the same call may
    succeed later (a dropped connection, a server restart, a locked file).

    The only store error a runner retries: the run stays where it is and is
    resumed by replay once the store answers again.
    """

    error_code = "store_unavailable"


class CorruptedRecord(StoreError):
    """A recorded value cannot be read back; the run fails, its steps stay."""

    error_code = "corrupted_record"


class ValueEncrypted(CorruptedRecord):
    """A recorded value is encrypted at rest and this process holds no key
    that opens it (no key of its id, or a key that does not authenticate it:
    the wrong key, or a value moved or altered). The run fails naming the
    run, the step and the field; nothing is replayed from it."""

    error_code = "value_encrypted"


class ValueErased(CorruptedRecord):
    """A recorded value belonged to a subject whose key was deleted
    (crypto-shredding): it can never be read again, by anyone."""

    error_code = "value_erased"


class EncryptionKeyError(StoreError, ValueError):
    """The keys an encrypted store was given cannot be used: none at all, a
    key that is not 32 bytes, text that is not base64, a key id given twice.
    The message names the source (the variable, the file) and the key id,
    never a key."""

    error_code = "encryption_key_error"


class StaleLeaseError(StoreError):
    """A write carried a fencing token that another worker has superseded (S8)."""

    error_code = "stale_lease_error"


# -- time travel ----------------------------------------------------------------------


class ForkError(StalwartError, ValueError):
    """A fork that cannot be made as asked: a step the run does not have, a
    replacement of another shape than the step recorded, an id taken. It
    names the run and the step; nothing has been written."""

    error_code = "fork_error"


class MoveError(StalwartError, ValueError):
    """A run that cannot be moved to another store as asked: no such run, a
    finished one, one a live worker kept executing past the timeout, an id
    the target holds already, a target out of reach. It names the run and
    the stores (without passwords); neither store has been changed."""

    error_code = "move_error"


# -- model providers and agents (stalwart.llm) ----------------------------------------
#
# A provider SDK raises its own exception classes, whose constructors need an
# HTTP response; a run that recorded one could not rebuild it on replay. These
# take one message argument, so the ledger rebuilds them as they were (S4),
# and each says what to do: which request was refused and why, in the
# provider's words, or which environment variable or extra is missing.
# Attributes default at class level, because a rebuilt error has only its
# message. A message never carries a password: it goes into the ledger and
# into logs, and it often quotes the server's URL (``base_url`` may hold
# ``user:password@``), so ProviderError redacts it when built.


class ProviderError(StalwartError):
    """A model provider answered with an error, after any retries."""

    error_code = "provider_error"

    provider: str | None = None
    status: int | None = None
    code: str | None = None
    request_id: str | None = None

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(redact(message))
        self.provider = provider
        self.status = status
        self.code = code
        self.request_id = request_id


class InvalidRequest(ProviderError):
    """The provider refused the request itself (400, 404, 413, 422): retrying cannot help."""

    error_code = "invalid_request"


class AuthenticationFailed(ProviderError):
    """The API key was refused (401) or lacks the permission (403)."""

    error_code = "authentication_failed"


class RateLimited(ProviderError):
    """Still rate limited (429) after the retries."""

    error_code = "rate_limited"


class ProviderUnavailable(ProviderError):
    """The provider failed (5xx), timed out or was unreachable, after the retries."""

    error_code = "provider_unavailable"


class FallbackExhausted(ProviderError):
    """Every model of a fallback chain failed, each for a reason the chain moves on for.

    ``failures`` holds one ``{"model", "reason", "error"}`` per model tried,
    in order (recorded with the error, so a replay raises it whole); the
    status and code are the last model's.
    """

    error_code = "fallback_exhausted"
    failures: list[dict[str, str]] = []

    def __init__(
        self,
        message: str,
        *,
        failures: list[dict[str, str]],
        provider: str | None = None,
        status: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status=status, code=code)
        self.failures = failures


class ProviderStreamError(StalwartError, RuntimeError):
    """A stream that the provider ended with an error instead of a reply.

    The HTTP status was 200, so the SDK raised nothing: the failure only shows
    as an event inside the stream. A model turns it into a :class:`ProviderError`.
    """

    error_code = "provider_stream_error"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(f"{code}: {message}" if code else message)
        self.code = code
        self.message = message


class MissingAPIKey(StalwartError):
    """No API key was given and its environment variable is not set."""

    error_code = "missing_api_key"


class MissingDependency(StalwartError, ImportError):
    """A provider's SDK is not installed; the message names the extra to install."""

    error_code = "missing_dependency"


class MaxRoundsExceeded(StalwartError):
    """An agent used all its rounds (``max_rounds`` model calls) without giving
    a final answer."""

    error_code = "max_rounds_exceeded"


class BudgetExceeded(StalwartError):
    """An agent's model calls used more tokens than its budget allows."""

    error_code = "budget_exceeded"


class OutputValidationError(StalwartError):
    """An agent's final answer did not validate against its output type, repairs included."""

    error_code = "output_validation_error"


class GuardrailTripped(StalwartError):
    """A guardrail of an agent tripped: the agent's answer ends here.

    ``agent`` and ``guardrail`` are names; ``stage`` says what was checked
    (``"input"``, ``"output"`` or ``"tool_call"``), ``reason`` is the
    guardrail's own. Recorded as the error of the agent's step (S4), so a
    replay raises it again with these fields.
    """

    error_code = "guardrail_tripped"

    def __init__(self, agent: str, guardrail: str, stage: str, reason: str) -> None:
        kind = stage.replace("_", " ")
        super().__init__(f"agent {agent!r}: the {kind} guardrail {guardrail!r} tripped: {reason}")
        self.agent = agent
        self.guardrail = guardrail
        self.stage = stage
        self.reason = reason


class ScriptExhausted(StalwartError, RuntimeError):
    """A scripted model (:mod:`stalwart.testing`) was asked for more replies
    than its script holds."""

    error_code = "script_exhausted"


class NoRoute(StalwartError):
    """A journey router's model did not choose a route within ``max_rounds``
    model calls for one message, and the router has no ``fallback``."""

    error_code = "no_route"


# -- MCP (stalwart.mcp) ---------------------------------------------------------------
#
# Each is a step's recorded error (S4): the engine hands it to the model as an
# error result ("ToolError: ..."), and a resumed run reads it back as this class.


class McpError(StalwartError):
    """Base of the errors of :mod:`stalwart.mcp`."""

    error_code = "mcp_error"


class ToolError(McpError):
    """The server ran the tool and reported a failure (``isError``)."""

    error_code = "tool_error"


class ServerUnavailable(McpError):
    """The server could not be reached, or went away during the call.

    The next call connects again: a server that restarted is used again.
    """

    error_code = "server_unavailable"


class ToolChanged(McpError):
    """The server no longer offers a tool the way this run listed it.

    A run lists a server's tools once, as a recorded step, so a resumed run
    offers its model what it was offered the first time. A live call of a tool
    the server has since removed or given another input schema fails with
    this error instead of sending arguments shaped for the old schema.
    """

    error_code = "tool_changed"


class A2AError(StalwartError):
    """Base of the errors of :mod:`stalwart.a2a`."""

    error_code = "a2a_error"


class RemoteTaskFailed(A2AError):
    """A remote A2A agent ended its task failed, rejected or cancelled, or
    could not be reached; the message names the agent, the task and the
    state it ended in."""

    error_code = "remote_task_failed"


# -- the command line -----------------------------------------------------------------


class CLIError(StalwartError):
    """An expected failure of a ``stalwart`` command: reported in one line,
    with an exit code, no traceback."""

    error_code = "cli_error"

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code
