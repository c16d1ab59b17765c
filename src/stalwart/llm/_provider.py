"""What every provider policy shares: the call, streaming, usage and errors.

A provider policy is a class policy: ``await ctx.call(llm, observations=...,
options=[...])`` runs it as one recorded step, so a model call that finished
is never paid for again on replay, and the engine (not the provider) runs the
tool calls it returns. Each provider module supplies four small pieces (the
request, the SDK call, reading the response, a stream accumulator); the
loop, the usage bookkeeping and the error mapping live here once.

Retries: the SDK's own (``max_retries`` on its client). It reads what the
provider says about retrying (``retry-after``, ``retry-after-ms``,
Anthropic's ``x-should-retry``), knows which statuses are transient (408,
409, 429, 5xx, connection errors and timeouts) and backs off with jitter; and
it retries only the HTTP request, inside the step, so nothing is recorded
until an answer came. Retrying at the policy level instead would re-run the
conversion, ignore the provider's hints, and need its own list of what is
worth retrying. What the SDK cannot retry is a stream that broke off after it
started (the deltas already went out live); that fails the step with
:class:`ProviderUnavailable`, and ``sw.policy(llm, retries=2,
retry_on=(ProviderUnavailable,))`` retries the whole call if wanted.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Awaitable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self, overload

from ..core.context import Context
from ..core.errors import (
    AuthenticationFailed,
    InvalidRequest,
    MissingAPIKey,
    MissingDependency,
    ProviderError,
    ProviderStreamError,
    ProviderUnavailable,
    RateLimited,
)
from ..core.message import Message
from ..core.policy import Policy
from ..core.redact import mask_url
from ._common import get
from ._tools import ToolSpec, tool_specs
from ._usage import Usage

__all__ = [
    "CONNECTION_ERROR",
    "TIMEOUT",
    "Accumulator",
    "BoundModel",
    "Provider",
    "import_sdk",
    "resolve_api_key",
]

DEFAULT_MAX_RETRIES = 3
# The code of a ProviderUnavailable the SDK raised without an HTTP answer
# (read by a fallback chain to tell a timeout from an unreachable server).
TIMEOUT = "timeout"
CONNECTION_ERROR = "connection_error"


class Accumulator(Protocol):
    """Folds stream events into text deltas, then the reply (phase 1's accumulators)."""

    def feed(self, event: Any) -> str | None: ...

    def finish(self) -> tuple[list[Message], Usage]: ...


def import_sdk(module: str, extra: str, who: str) -> ModuleType:
    """Import a provider SDK, or say which extra installs it.

    The SDKs are optional extras, imported only when a provider is built, so
    that ``import stalwart.llm`` works without them.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependency(
            f"{who} needs the {module!r} package, which is not installed: "
            f"pip install 'stalwart[{extra}]'"
        ) from exc


def resolve_api_key(given: str | None, env_var: str, who: str) -> str:
    """The key given, else the environment's; a missing key names its variable."""
    key = given or os.environ.get(env_var)
    if not key:
        raise MissingAPIKey(
            f"{who} needs an API key: set the {env_var} environment variable "
            f"(export {env_var}=...), or pass api_key=..."
        )
    return key


class BoundModel(Protocol):
    """A model bound on an application context: ``await ctx.llm(observations=...)``."""

    def __call__(
        self,
        observations: list[Message],
        options: Sequence[Any] = (),
        output: dict[str, Any] | None = None,
    ) -> Awaitable[list[Message]]: ...


class Provider:
    """A model behind a provider's SDK, as a policy (subclasses fill in the wire).

    ``model`` is the provider's model id; ``client`` an SDK async client;
    ``stream`` sends token deltas to the run's listeners while the call runs
    (the step still records the whole reply); ``name`` names the policy, its
    steps in the ledger and the ``actor`` of its messages (default
    ``"provider:model"``); ``params`` go into every request as they are
    (``temperature``, ``tool_choice``...).
    """

    provider: ClassVar[str] = ""
    sdk_module: ClassVar[str] = ""
    env_var: ClassVar[str] = ""
    what: ClassVar[str] = ""  # which API, for error messages
    # Has a structured output mode: an agent with an output type passes
    # ``output=`` (see ._output) and each provider sends it its own way.
    takes_output: ClassVar[bool] = True

    def __init__(
        self,
        model: str,
        *,
        client: Any,
        stream: bool = False,
        name: str | None = None,
        **params: Any,
    ) -> None:
        self.model = model
        self.client = client
        self.stream = stream
        self.name = name or f"{self.provider}:{model}"
        self.params = params
        # Registered up front so that every use of this object as a policy
        # (``ctx.call``, an agent's model) shares one Policy with this name.
        # Its name counts as given only if it was: bound on an application
        # context class, an unnamed provider is named after its attribute.
        self.__stalwart_policy__: Policy[Any, Any] = Policy(
            self, name=name, description=f"The {self.what} model {model}."
        )

    # Bound on an application context class (``llm = openai("gpt-4o")``),
    # ``ctx.llm(observations=...)`` is a step of this model, and a type
    # checker sees that signature; on any other class, the provider itself.
    # The context class binds it when the class is made
    # (``Context.__init_subclass__``); this ``__get__`` only tells type
    # checkers so. A real one would make every instance a method descriptor,
    # which ``inspect.isroutine`` takes for a function.
    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: Context, owner: type | None = None) -> BoundModel: ...
        @overload
        def __get__(self, obj: object, owner: type | None = None) -> Self: ...
        def __get__(self, obj: object, owner: type | None = None) -> Any: ...

    def __stalwart_version__(self) -> list[Any]:
        """What decides its replies, for a policy's code version: the provider,
        the model and the request parameters (never the client or its key)."""
        return [self.name, self.provider, self.model, sorted(map(repr, self.params.items()))]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}{' stream' if self.stream else ''}>"

    async def __call__(
        self,
        ctx: Context,
        observations: list[Message],
        options: Sequence[Any] = (),
        output: dict[str, Any] | None = None,
    ) -> list[Message]:
        """Ask the model for its next round: text, action calls, or both.

        The options become the model's tools; the engine runs the calls it
        makes. ``output`` (``{"name", "schema", "strict"}``, which an agent
        with an output type passes) asks for the final answer as JSON of that
        schema, in the provider's own structured output mode; the answer
        comes back as its JSON text. The first message of the reply carries
        the call's token usage in ``meta["usage"]`` (an empty assistant
        message carries it when the model said nothing), so a run's usage can
        be summed from its ledger.
        """
        tools = tool_specs(options)
        try:
            if self.stream:
                messages, usage = await self._streamed(ctx, observations, tools, output)
            else:
                request = self._request(observations, tools, stream=False, output=output)
                messages, usage = self._read(await self._create(request))
        except Exception as exc:
            error = self._error(exc)
            if error is None:
                raise
            raise error from exc
        if output is not None:
            messages = self._answer(messages, output)
        return self._with_usage(messages, usage)

    async def _streamed(
        self,
        ctx: Context,
        observations: list[Message],
        tools: list[ToolSpec],
        output: dict[str, Any] | None,
    ) -> tuple[list[Message], Usage]:
        acc = self._accumulator()
        stream = await self._create(self._request(observations, tools, stream=True, output=output))
        try:
            async for event in stream:
                delta = acc.feed(event)
                if delta:
                    ctx.stream_text(delta)
        finally:
            await stream.close()
        return acc.finish()

    def _with_usage(self, messages: list[Message], usage: Usage) -> list[Message]:
        if not messages:
            messages = [Message("assistant", self.name)]
        first = messages[0]
        meta = {**(first.meta or {}), "usage": usage.to_dict(), "model": self.model}
        return [dataclasses.replace(first, meta=meta), *messages[1:]]

    # -- what each provider fills in ------------------------------------------------
    def _request(
        self,
        observations: list[Message],
        tools: list[ToolSpec],
        *,
        stream: bool,
        output: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _answer(self, messages: list[Message], output: dict[str, Any]) -> list[Message]:
        """The reply to a call that asked for ``output``, the answer as its
        JSON text (a mode that answers in text needs nothing done)."""
        return messages

    async def _create(self, request: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _read(self, response: Any) -> tuple[list[Message], Usage]:
        raise NotImplementedError

    def _accumulator(self) -> Accumulator:
        raise NotImplementedError

    # -- errors -------------------------------------------------------------------------
    def _error(self, exc: Exception) -> ProviderError | None:
        """The SDK's exception as a Stalwart error that says what happened.

        Only the provider's own message is kept (not the SDK's "Error code:
        400 - {...}" rendering of the body), with the status, the error code,
        the parameter at fault and the request id, which is what a support
        ticket asks for.
        """
        if isinstance(exc, ProviderStreamError):
            return self._stream_error(exc.message, exc.code)
        sdk = sys.modules.get(self.sdk_module)
        if sdk is None:
            return None
        retries = getattr(self.client, "max_retries", None)
        after = f" after {retries} retries" if retries else ""
        if isinstance(exc, sdk.APIConnectionError):
            timed_out = isinstance(exc, sdk.APITimeoutError)
            kind = "timed out" if timed_out else "could not connect"
            # base_url may hold user:password@; the message goes into the ledger.
            base = mask_url(str(getattr(self.client, "base_url", "")))
            return ProviderUnavailable(
                f"{self._where} {kind}{after} ({base}): {exc}",
                provider=self.provider,
                code=TIMEOUT if timed_out else CONNECTION_ERROR,
            )
        if not isinstance(exc, sdk.APIError):
            return None
        message, code, param, request_id = _detail(exc)
        status = getattr(exc, "status_code", None)
        if not isinstance(status, int) or status < 400:
            # An error event inside a stream that began with 200 (the SDKs
            # raise those as they read them).
            return self._stream_error(message, code, request_id)
        cls: type[ProviderError]
        hint = ""
        if status == 429:
            cls, what = RateLimited, f"was rate limited{after}"
        elif status >= 500:
            cls, what = ProviderUnavailable, f"failed with HTTP {status}{after}"
        elif status in (401, 403):
            cls, what = AuthenticationFailed, f"was refused with HTTP {status}"
            hint = f" (check the API key, e.g. the {self.env_var} environment variable)"
        elif status in (400, 404, 413, 422):
            cls, what = InvalidRequest, f"was refused as invalid (HTTP {status})"
        else:
            cls, what = ProviderError, f"failed with HTTP {status}"
        return cls(
            f"{self._where} {what}{hint}: {message}{_facts(code, param, request_id)}",
            provider=self.provider,
            status=status,
            code=code,
            request_id=request_id,
        )

    @property
    def _where(self) -> str:
        return f"{self.what} call to {self.model!r}"

    def _stream_error(
        self, message: str, code: str | None, request_id: str | None = None
    ) -> ProviderError:
        """A stream that failed after it started: transient unless it says otherwise."""
        cls: type[ProviderError] = ProviderUnavailable
        if code and "rate_limit" in code:
            cls = RateLimited
        elif code in ("invalid_request_error", "invalid_request"):
            cls = InvalidRequest
        return cls(
            f"{self._where}: the stream failed: {message}{_facts(code, None, request_id)}",
            provider=self.provider,
            code=code,
            request_id=request_id,
        )


def _detail(exc: Any) -> tuple[str, str | None, str | None, str | None]:
    """The provider's message, error code, parameter at fault and request id."""
    body = getattr(exc, "body", None)
    detail = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(detail, dict):
        detail = {}
    message = get(detail, "message") or str(getattr(exc, "message", exc))
    code = get(detail, "code") or get(detail, "type")
    param = get(detail, "param")
    request_id = getattr(exc, "request_id", None) or (
        get(body, "request_id") if isinstance(body, dict) else None
    )
    return (
        str(message),
        code if isinstance(code, str) else None,
        param if isinstance(param, str) else None,
        request_id if isinstance(request_id, str) else None,
    )


def _facts(code: str | None, param: str | None, request_id: str | None) -> str:
    facts = [
        f"{label} {value}"
        for label, value in (("code", code), ("param", param), ("request id", request_id))
        if value
    ]
    return f" ({', '.join(facts)})" if facts else ""
