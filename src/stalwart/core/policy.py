"""Policies: plain functions (or objects) that the runtime can call as steps.

``@policy`` leaves the function a function: it adds a name, a description and
a schema (from type hints and docstring), retries, a timeout, and routing, so
that awaiting a policy inside a run goes through the runtime and becomes a
recorded step, while awaiting it outside any run simply runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import typing
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from .context import Context
from .declared import declare_hints, register_type
from .schema import Signature

__all__ = [
    "Policy",
    "ToolSpec",
    "as_policy",
    "current_context",
    "current_step",
    "policy",
    "same_policy",
    "use_context",
    "where_defined",
]

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound="Context")

# The context of the step running in this task, so that ``await some_policy()``
# inside a policy becomes a child step without passing ``ctx`` around. Public
# for the engine, which sets it around every call on its hot path; other code
# reads it with current_context() and sets it with use_context().
current_step: ContextVar[Context | None] = ContextVar("stalwart_context", default=None)


def _not_installed(pol: Policy[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    raise RuntimeError(f"{pol.name} was called outside a run before the engine was loaded")


# How a policy awaited outside any run executes: alone, in memory. The engine
# (stalwart.core.engine.execution), which builds on this module, installs it
# when it loads, so that this module does not import the engine.
_detached: Callable[[Policy[Any, Any], tuple[Any, ...], dict[str, Any]], Awaitable[Any]]
_detached = _not_installed


def on_detached_call(
    run: Callable[[Policy[Any, Any], tuple[Any, ...], dict[str, Any]], Awaitable[Any]],
) -> None:
    """Install how a policy called outside any run executes (the engine does)."""
    global _detached
    _detached = run


def current_context() -> Context | None:
    """The context of the step that is running here, if any."""
    return current_step.get()


class use_context:
    """``with use_context(ctx):`` code inside runs as step ``ctx``: a policy it
    awaits becomes a child step of ``ctx`` (what a layer running user code as
    a unit of work needs, e.g. a flow node's ``prep``). ``None`` runs it
    outside any run. A class, not ``@contextmanager``: it is on a flow's path."""

    __slots__ = ("ctx", "token")

    def __init__(self, ctx: Context | None) -> None:
        self.ctx = ctx

    def __enter__(self) -> None:
        self.token = current_step.set(self.ctx)

    def __exit__(self, *exc: object) -> None:
        current_step.reset(self.token)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about an option: name, purpose and argument schema."""

    name: str
    description: str
    parameters: dict[str, Any]


class Policy(Generic[P, R]):
    """A callable the runtime executes as a recorded step.

    Build one with :func:`policy`. Calling it returns an awaitable: inside a
    run, a step of that run; outside, a plain call of the function.
    """

    __slots__ = (
        "__dict__",
        "backoff",
        "ctx_class",
        "declared",
        "fn",
        "is_async",
        "max_backoff",
        "max_parallel",
        "name",
        "record",
        "retries",
        "retry_on",
        "signature",
        "simple",
        "takes_ctx",
        "timeout",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        retries: int = 0,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        retry_on: Sequence[type[BaseException]] = (Exception,),
        timeout: float | None = None,
        record: bool = True,
        max_parallel: int | None = None,
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be >= 0")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        target: Any = fn
        if not (inspect.isfunction(fn) or inspect.ismethod(fn)) and callable(fn):
            target = type(fn).__call__.__get__(fn)  # a class policy: an object with a __call__
        self.fn = fn
        self.name = name or getattr(fn, "name", None) or _default_name(fn)
        self.is_async = inspect.iscoroutinefunction(target)
        self.ctx_class = _context_param(target)
        self.takes_ctx = self.ctx_class is not None
        self.signature = Signature(target, self.takes_ctx, self.name, description)
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.retry_on = tuple(retry_on)
        self.timeout = timeout
        self.record = record
        self.max_parallel = max_parallel
        self.declared = False  # declare_types() done (read on every durable step)
        # No retries, no timeout, a coroutine: the runtime's fast path.
        self.simple = self.is_async and not retries and timeout is None
        functools_update(self, fn)

    # -- what a model sees ---------------------------------------------------
    @property
    def description(self) -> str:
        return self.signature.description

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON schema of the arguments (the injected context excluded)."""
        return self.signature.json_schema()

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)

    def declare_types(self) -> None:
        """Declare the types this policy's values may be read back as (S13).

        Its hints (parameters and return) and the exceptions it retries on:
        the program said these may appear in its steps. Done once, lazily,
        because a hint may name a class defined after the decorator ran.
        """
        if self.declared:
            return
        self.declared = True
        fn: Any = self.fn
        target = fn if (inspect.isfunction(fn) or inspect.ismethod(fn)) else type(fn).__call__
        declare_hints(target)
        register_type(*(t for t in self.retry_on if t is not Exception))

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Coerce a model's arguments to the declared types, or raise ArgumentError."""
        return self.signature.validate(arguments)

    def settings(self) -> dict[str, Any]:
        """What :func:`policy` was given: two policies of one function with
        equal settings behave the same."""
        return {
            "name": self.name,
            "description": self.signature._description,
            "retries": self.retries,
            "backoff": self.backoff,
            "max_backoff": self.max_backoff,
            "retry_on": self.retry_on,
            "timeout": self.timeout,
            "record": self.record,
            "max_parallel": self.max_parallel,
        }

    def with_settings(self, **changes: Any) -> Policy[P, R]:
        """A copy with other settings (``timeout``, ``retries``, ``name``...)."""
        return Policy(self.fn, **{**self.settings(), **changes})

    # -- calling -------------------------------------------------------------
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        ctx = current_step.get()
        if ctx is not None:
            return ctx.call(self, *args, **kwargs)
        return _detached(self, args, kwargs)

    def invoke(self, ctx: Context, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Awaitable[Any]:
        """Call the underlying function once, injecting ``ctx`` if it wants one."""
        fn: Any = self.fn
        if self.is_async:
            if self.takes_ctx:
                return fn(ctx, *args, **kwargs)  # type: ignore[no-any-return]
            return fn(*args, **kwargs)  # type: ignore[no-any-return]
        if self.takes_ctx:
            return asyncio.to_thread(_in_thread, fn, ctx, *args, **kwargs)
        return asyncio.to_thread(_in_thread, fn, *args, **kwargs)

    @overload
    def __get__(self, obj: None, owner: type) -> Policy[P, R]: ...
    @overload
    def __get__(self, obj: Context, owner: type) -> Callable[P, Awaitable[R]]: ...
    @overload
    def __get__(self, obj: object, owner: type) -> Policy[P, R]: ...
    def __get__(self, obj: Any, owner: type) -> Any:
        # Bound on an application context class: ``ctx.web_search(query=...)``.
        # On any other class (a class policy keeping its tools as attributes)
        # it stays the policy, and routes through the current run when called.
        if obj is None or not isinstance(obj, Context):
            return self
        return _Bound(obj, self)

    def __repr__(self) -> str:
        return f"<policy {self.name}>"


def _in_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a sync policy in a worker thread.

    A StopIteration cannot cross into an asyncio future (the await would hang
    for ever), so it becomes a RuntimeError, as PEP 479 does for coroutines.
    """
    try:
        return fn(*args, **kwargs)
    except StopIteration as exc:
        raise RuntimeError(f"{getattr(fn, '__qualname__', fn)!s} raised StopIteration") from exc


class _Bound:
    __slots__ = ("ctx", "policy")

    def __init__(self, ctx: Context, policy: Policy[Any, Any]) -> None:
        self.ctx = ctx
        self.policy = policy

    def __call__(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        return self.ctx.call(self.policy, *args, **kwargs)


def same_policy(a: Policy[Any, Any], b: Policy[Any, Any]) -> bool:
    """Two Policy objects for one function with the same settings: one policy."""
    return a.fn is b.fn and a.settings() == b.settings()


def where_defined(pol: Policy[Any, Any]) -> str:
    fn: Any = pol.fn
    target = fn if inspect.isroutine(fn) else type(fn)
    name = f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"
    try:
        file = inspect.getsourcefile(target)
        line = inspect.getsourcelines(target)[1]
    except (OSError, TypeError):
        return name
    return f"{name} ({file}:{line})"


def functools_update(p: Policy[Any, Any], fn: Callable[..., Any]) -> None:
    for attr in ("__module__", "__name__", "__qualname__", "__doc__", "__wrapped__"):
        with contextlib.suppress(AttributeError):
            p.__dict__[attr] = getattr(fn, attr) if attr != "__wrapped__" else fn


def _default_name(fn: Any) -> str:
    name = getattr(fn, "__name__", None)
    if name is None:  # an instance of a class policy
        name = _snake(type(fn).__name__)
    return str(name)


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def _context_param(fn: Callable[..., Any]) -> type[Context] | None:
    """The Context class the first parameter asks for, or None."""
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        return None
    ann = params[0].annotation
    if isinstance(ann, str):
        try:
            ann = typing.get_type_hints(fn).get(params[0].name, ann)
        except Exception:
            ann = _resolve_name(fn, ann)
    if isinstance(ann, type) and issubclass(ann, Context):
        return ann
    return None


def _resolve_name(fn: Callable[..., Any], ann: str) -> Any:
    scope = getattr(fn, "__globals__", {})
    head, _, tail = ann.partition(".")
    obj = scope.get(head)
    if tail and obj is not None:
        obj = getattr(obj, tail, None)
    if obj is None and ann in ("Context", "sw.Context", "stalwart.Context"):
        return Context
    return obj


@overload
def policy(fn: Callable[Concatenate[C, P], Awaitable[R]], /) -> Policy[P, R]: ...
@overload
def policy(fn: Callable[P, Awaitable[R]], /) -> Policy[P, R]: ...
@overload
def policy(fn: Callable[P, R], /) -> Policy[P, R]: ...
@overload
def policy(
    *,
    name: str | None = None,
    description: str | None = None,
    retries: int = 0,
    backoff: float = 0.5,
    max_backoff: float = 30.0,
    retry_on: Sequence[type[BaseException]] = (Exception,),
    timeout: float | None = None,
    record: bool = True,
    max_parallel: int | None = None,
) -> Callable[[Callable[..., Any]], Policy[Any, Any]]: ...
def policy(fn: Any = None, /, **settings: Any) -> Any:
    """Make a function, or an object with a ``__call__``, a policy.

    Use bare (``@policy``) or with settings: ``name``, ``description``,
    ``retries`` (extra attempts), ``backoff`` (first delay in seconds, doubled
    each attempt up to ``max_backoff``), ``retry_on`` (exception types worth a
    retry), ``timeout`` (seconds per attempt), ``record`` (record calls as
    steps; on by default), ``max_parallel`` (limit on concurrent option calls
    this policy's actions start).
    """
    if fn is None:
        return lambda f: Policy(f, **settings)
    return Policy(fn, **settings)


def as_policy(obj: Any) -> Policy[Any, Any]:
    """The Policy for ``obj``: itself, or a cached wrapper of a plain callable."""
    if type(obj) is Policy:
        return obj
    if isinstance(obj, Policy):
        return obj
    if isinstance(obj, _Bound):  # ``ctx.web_search`` offered as an option
        return obj.policy
    cached = getattr(obj, "__stalwart_policy__", None)
    if isinstance(cached, Policy):
        return cached
    if not callable(obj):
        raise TypeError(f"{obj!r} is not callable, so it cannot be a policy")
    p: Policy[Any, Any] = Policy(obj)
    with contextlib.suppress(AttributeError, TypeError):
        obj.__stalwart_policy__ = p
    return p
