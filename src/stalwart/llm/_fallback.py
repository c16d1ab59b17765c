"""A model that is a chain of models: when one fails for a reason named, the next answers.

    model = llm.fallback("openai:gpt-5-mini", "anthropic:claude-haiku-4-5")
    agent = llm.Agent(model, tools=[search])

A fallback is a policy like any model: ``ctx.call(model, observations=...,
options=[...])`` is one step, and each model it tries is a step of its own
beneath it (``1.1``, ``1.2``...), with the model's name, its reply or its
error. So the ledger says which model answered, and a resumed run replays
the failed attempts' errors and the answer without calling any model again
(S2, S4). Whether to move on is decided from the error or the reply alone,
both of which are recorded, so a replay moves on exactly where the run did.

What it moves on for (``on=``, all of them by default), read from the
provider errors of :mod:`._provider` (the SDK's exceptions, already mapped),
or from Python's own ``TimeoutError`` and ``ConnectionError`` for a model
written as a function:

==================  ==============================================================
``rate_limit``      429 (:class:`RateLimited`), after the SDK's own retries
``overloaded``      Anthropic's 529 ``overloaded_error``, any error coded "overloaded"
``timeout``         the request timed out (the SDK's ``APITimeoutError``), 408, 504
``connection``      the server could not be reached
``server_error``    any other 5xx, or a stream the provider broke off
``content_filter``  refused by the provider's content filter: an error coded
                    ``content_filter`` or ``content_policy_violation``, or a reply
                    whose finish reason is ``content_filter`` (OpenAI) or
                    ``refusal`` (Anthropic)
==================  ==============================================================

Anything else (a 400, a refused key, a bug in a tool schema) would fail on
the next model too, and stops the chain at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Self, overload

from ..core.context import Context
from ..core.errors import FallbackExhausted, ProviderError, ProviderUnavailable, RateLimited
from ..core.message import Message, Text
from ..core.policy import Policy, as_policy
from ._output import OUTPUT, takes_output
from ._provider import CONNECTION_ERROR, TIMEOUT, BoundModel

__all__ = ["REASONS", "Fallback", "failure_reason", "fallback"]

REASONS = ("rate_limit", "overloaded", "timeout", "connection", "server_error", "content_filter")

_FILTERED_CODES = frozenset({"content_filter", "content_policy_violation"})
_FILTERED_FINISH = frozenset({"content_filter", "refusal"})


def failure_reason(exc: BaseException) -> str | None:
    """Which of :data:`REASONS` a model's error is, or ``None`` for any other.

    Read from the error's class, status and code, which a recorded error keeps
    (S4), so the same error gives the same reason on replay.
    """
    if isinstance(exc, ProviderError):
        code = (exc.code or "").lower()
        status = exc.status
        if code in _FILTERED_CODES:
            return "content_filter"
        if isinstance(exc, RateLimited) or status == 429:
            return "rate_limit"
        if status == 529 or "overloaded" in code:
            return "overloaded"
        if code == TIMEOUT or status in (408, 504):
            return "timeout"
        if code == CONNECTION_ERROR:
            return "connection"
        if (status is not None and status >= 500) or (
            status is None and isinstance(exc, ProviderUnavailable)
        ):
            return "server_error"
        return None
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ConnectionError):
        return "connection"
    return None


def filtered(reply: Any) -> str | None:
    """The finish reason of a reply the provider's content filter stopped, if it was."""
    first = reply[0] if isinstance(reply, list) and reply else reply
    meta = first.meta if isinstance(first, Message) else None
    finish = (meta or {}).get("finish_reason")
    return finish if finish in _FILTERED_FINISH else None


class Fallback:
    """Models tried in order, moving on when one fails for a reason in ``on``.

    Build one with :func:`fallback`. ``models`` are the models as given
    (providers, scripted models, functions); ``names`` their policy names, in
    the same order.
    """

    def __init__(
        self, models: Sequence[Any], *, on: Iterable[str] = REASONS, name: str | None = None
    ) -> None:
        if not models:
            raise ValueError("a fallback needs at least one model")
        built = [_built(m) for m in models]
        self.models = tuple(built)
        self.names = tuple(as_policy(m).name for m in built)
        self.on = frozenset(on)
        if isinstance(on, str) or not self.on:
            raise ValueError(f"on must name one or more of {', '.join(REASONS)}, not {on!r}")
        unknown = sorted(self.on - set(REASONS))
        if unknown:
            raise ValueError(
                f"fallback: unknown reason(s) {', '.join(map(repr, unknown))} in on=; "
                f"the reasons are {', '.join(REASONS)}"
            )
        self.name = name or " or ".join(self.names)
        # A structured output mode only when every model has one, so that
        # every model of the chain is asked for the answer the same way.
        self.takes_output = all(takes_output(m) for m in built)
        self.__stalwart_policy__: Policy[Any, Any] = Policy(
            self, name=name, description=f"Tries {', then '.join(self.names)}."
        )

    # Bound on an application context class, ``ctx.llm(observations=...)`` is
    # a step of this chain (see ``Provider.__get__`` for why only for checkers).
    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: Context, owner: type | None = None) -> BoundModel: ...
        @overload
        def __get__(self, obj: object, owner: type | None = None) -> Self: ...
        def __get__(self, obj: object, owner: type | None = None) -> Any: ...

    def __stalwart_version__(self) -> list[Any]:
        """Its models in order and the failures it moves on for (a policy's code version)."""
        return [self.name, list(self.models), sorted(self.on)]

    def __repr__(self) -> str:
        return f"<Fallback {' -> '.join(self.names)}>"

    async def __call__(
        self,
        ctx: Context,
        observations: list[Message],
        options: Sequence[Any] = (),
        output: dict[str, Any] | None = None,
    ) -> list[Message]:
        """Ask each model in turn, each a step, until one answers.

        The offered options go to each model as they came, so the engine runs
        the tool calls of the model that answered, beneath its step; so does
        ``output``, the structured answer an agent asks for.
        """
        failures: list[dict[str, str]] = []
        last: ProviderError | None = None
        extra = {} if output is None else {OUTPUT: output}
        for model, name in zip(self.models, self.names, strict=True):
            try:
                if options:
                    raw = await ctx.call(model, observations=observations, options=options, **extra)
                else:
                    raw = await ctx.call(model, observations=observations, **extra)
            except Exception as exc:
                reason = failure_reason(exc)
                if reason is None or reason not in self.on:
                    if not failures or not isinstance(exc, ProviderError):
                        raise  # the first model's own error, or not a model's error
                    raise _after(exc, failures, self.name) from exc
                failures.append(
                    {"model": name, "reason": reason, "error": f"{type(exc).__name__}: {exc}"}
                )
                last = exc if isinstance(exc, ProviderError) else None
                continue
            finish = filtered(raw)
            if finish is not None and "content_filter" in self.on:
                failures.append(
                    {
                        "model": name,
                        "reason": "content_filter",
                        "error": f"the reply was stopped by the content filter "
                        f"(finish reason {finish})",
                    }
                )
                last = None
                continue
            return _messages(raw, name)
        raise FallbackExhausted(
            f"fallback {self.name!r}: every model failed:{_listed(failures)}",
            failures=failures,
            provider=last.provider if last is not None else None,
            status=last.status if last is not None else None,
            code=last.code if last is not None else None,
        )


def fallback(*models: Any, on: Iterable[str] = REASONS, name: str | None = None) -> Fallback:
    """A model that tries ``models`` in order, moving on when one fails for a reason in ``on``.

    Use it wherever a model goes: ``Agent(model=...)``,
    ``ctx.call(model, observations=...)``, an application context's attribute.

    Args:
        models: Models or model strings (``"anthropic:claude-haiku-4-5"``),
            first choice first. Each is asked with its own client's retries
            first (``max_retries``): set fewer on a model to move on sooner.
        on: The failures to move on for: any of ``"rate_limit"``,
            ``"overloaded"``, ``"timeout"``, ``"connection"``,
            ``"server_error"``, ``"content_filter"`` (all by default). Any
            other error (a 400, a refused key) stops the chain at once.
        name: The policy's name, for its steps and the ledger (default: the
            models' names joined by ``" or "``).
    """
    return Fallback(models, on=on, name=name)


# -- helpers -------------------------------------------------------------------------


def _built(model: Any) -> Any:
    if isinstance(model, str):
        from ._model import model as from_string

        return from_string(model)
    as_policy(model)  # a clear error now for anything that is not a model
    return model


def _messages(raw: Any, name: str) -> list[Message]:
    """The reply; a function model's text as a message of that model."""
    if isinstance(raw, str):
        return [Message("assistant", name, (Text(raw),))]
    reply: list[Message] = raw  # what else it is, the agent's loop says
    return reply


def _listed(failures: list[dict[str, str]]) -> str:
    return "".join(f"\n- {f['model']} ({f['reason']}): {f['error']}" for f in failures)


def _after(exc: ProviderError, failures: list[dict[str, str]], chain: str) -> ProviderError:
    """A provider's error that stopped the chain, as its own class (status and
    code kept), its message naming the models tried before it."""
    again = type(exc).__new__(type(exc))
    again.__dict__.update(exc.__dict__)
    again.args = (f"{exc}\n(fallback {chain!r} tried before it:{_listed(failures)})",)
    return again
