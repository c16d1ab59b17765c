"""Errors of providers and agents, as Stalwart types that survive replay.

A provider SDK raises its own exception classes, whose constructors need an
HTTP response; a run that recorded one could not rebuild it on replay. These
errors take one message argument, so the ledger rebuilds them as they were
(S4), and each says what to do: which request was refused and why, in the
provider's words, or which environment variable or extra is missing.
Attributes default at class level, because a rebuilt error has only its
message. A message never carries a password: it goes into the ledger and
into logs, and it often quotes the server's URL (``base_url`` may hold
``user:password@``), so :class:`ProviderError` redacts it when built.
"""

from __future__ import annotations

from ..core.declared import register_type
from ..core.errors import StalwartError
from ..core.redact import redact

__all__ = [
    "AuthenticationFailed",
    "BudgetExceeded",
    "InvalidRequest",
    "MaxTurnsExceeded",
    "MissingAPIKey",
    "MissingDependency",
    "OutputValidationError",
    "ProviderError",
    "ProviderUnavailable",
    "RateLimited",
]


class ProviderError(StalwartError):
    """A model provider answered with an error, after any retries."""

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


class AuthenticationFailed(ProviderError):
    """The API key was refused (401) or lacks the permission (403)."""


class RateLimited(ProviderError):
    """Still rate limited (429) after the retries."""


class ProviderUnavailable(ProviderError):
    """The provider failed (5xx), timed out or was unreachable, after the retries."""


class MissingAPIKey(StalwartError):
    """No API key was given and its environment variable is not set."""


class MissingDependency(StalwartError, ImportError):
    """A provider's SDK is not installed; the message names the extra to install."""


class MaxTurnsExceeded(StalwartError):
    """An agent used all its turns without giving a final answer."""


class BudgetExceeded(StalwartError):
    """An agent's model calls used more tokens than its budget allows."""


class OutputValidationError(StalwartError):
    """An agent's final answer did not validate against its output type, repairs included."""


# A recorded provider error is raised as itself on replay (S4), not as a
# StepError: these are the program's own types, declared like any other.
register_type(
    ProviderError,
    InvalidRequest,
    AuthenticationFailed,
    RateLimited,
    ProviderUnavailable,
    MissingAPIKey,
    MaxTurnsExceeded,
    BudgetExceeded,
    OutputValidationError,
)
