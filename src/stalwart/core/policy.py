"""Policies: plain functions (or objects) that the engine can call as steps.

``@policy`` leaves the function a function: it adds a name, a description and
a schema (from type hints and docstring), retries, a timeout, and routing, so
that awaiting a policy inside a run goes through the engine and becomes a
recorded step, while awaiting it outside any run simply runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import sys
import types
import typing
import weakref
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

from .callables import check_definable, with_bound_arguments
from .context import Context, on_bind
from .declared import declare_hints, register_type
from .schema import Signature

__all__ = [
    "Approval",
    "Policy",
    "PolicyDecorator",
    "ToolSpec",
    "as_policy",
    "class_call",
    "current_context",
    "current_step",
    "declared_policy",
    "policy",
    "same_policy",
    "use_context",
    "where_defined",
]

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
C = TypeVar("C", bound="Context")
C_contra = TypeVar("C_contra", bound="Context", contravariant=True)

#: ``approval=`` of a policy: ``True`` (every call of it by a model waits for
#: a person's decision), ``False``, or a function of the call's arguments
#: (and the context, first, if it asks for one) saying whether this call does.
Approval = bool | Callable[..., bool | Awaitable[bool]]

# The context of the step running in this task, so that ``await some_policy()``
# inside a policy becomes a child step without passing ``ctx`` around. Public
# for the engine, which sets it around every call on its hot path; other code
# reads it with current_context() and sets it with use_context().
current_step: ContextVar[Context | None] = ContextVar("stalwart_context", default=None)


def _not_installed(pol: Policy[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    raise RuntimeError(f"{pol.name} was called outside a run before the engine was loaded")


# How a policy awaited outside any run executes: alone, in memory. The engine
# (stalwart.core.engine.engine), which builds on this module, installs it
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
    """A callable the engine executes as a recorded step.

    Build one with :func:`policy`. Calling it returns an awaitable: inside a
    run, a step of that run; outside, a plain call of the function.
    """

    __slots__ = (
        "__dict__",
        "approval",
        "approval_timeout",
        "backoff",
        "ctx_class",
        "declared",
        "exclusive",
        "fn",
        "is_async",
        "max_backoff",
        "max_parallel",
        "name",
        "named",
        "record",
        "retries",
        "retry_on",
        "signature",
        "simple",
        "takes_ctx",
        "timeout",
    )

    fn: Callable[..., Any]  # what runs: the function, the object, a class policy's call

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
        exclusive: bool | str = False,
        approval: Approval = False,
        approval_timeout: float | None = None,
    ) -> None:
        # Whether the name was given (else it comes from the function, and an
        # application context may name the policy after its attribute).
        self.named = name is not None
        if retries < 0:
            raise ValueError("retries must be >= 0")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        if not isinstance(exclusive, bool | str) or exclusive == "":
            raise ValueError("exclusive must be True, False or the name of a shared lock")
        if not (isinstance(approval, bool) or callable(approval)):
            raise TypeError(
                "approval must be True, False or a function of the call's arguments "
                f"saying whether this call needs one, not {type(approval).__name__}"
            )
        if approval_timeout is not None:
            if approval is False:
                raise ValueError("approval_timeout is for a policy made with approval=")
            if isinstance(approval_timeout, bool) or not approval_timeout > 0:
                raise ValueError("approval_timeout must be > 0 seconds")
        if isinstance(fn, functools.partial):  # a tool with arguments the program fixes
            inner = fn.func
            name = name or getattr(inner, "name", None)
            fn = with_bound_arguments(fn, inner.fn if isinstance(inner, Policy) else inner, name)
        check_definable(fn, name)
        if isinstance(fn, type):  # a class policy: a fresh instance for every call
            fn = class_call(fn)
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
        self.exclusive = exclusive
        self.approval = approval
        self.approval_timeout = approval_timeout
        self.declared = False  # declare_types() done (read on every durable step)
        # No retries, no timeout, a coroutine: the engine's fast path.
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
            "exclusive": self.exclusive,
            "approval": self.approval,
            "approval_timeout": self.approval_timeout,
        }

    def with_settings(self, **changes: Any) -> Policy[P, R]:
        """A copy with other settings (``timeout``, ``retries``, ``name``...)."""
        copy: Policy[P, R] = Policy(self.fn, **{**self.settings(), **changes})
        copy.named = self.named or "name" in changes
        return copy

    async def needs_approval(self, ctx: Context, arguments: dict[str, Any]) -> bool:
        """Whether a model's call of this option with ``arguments`` (validated)
        waits for a person's decision (``approval=``, docs/approvals.md).

        A function given as ``approval`` is called with the arguments it
        names (all of them if it takes ``**kwargs``), and with ``ctx`` first
        when its first parameter is a :class:`Context`; it may be async. It
        is not a step: it decides from the arguments, it calls nothing.
        """
        rule = self.approval
        if isinstance(rule, bool):
            return rule
        params = inspect.signature(rule).parameters.values()
        wants_ctx = _context_param(rule) is not None
        named = [p for p in params if p.kind is not p.VAR_POSITIONAL][1 if wants_ctx else 0 :]
        if any(p.kind is p.VAR_KEYWORD for p in named):
            given = dict(arguments)
        else:
            given = {p.name: arguments[p.name] for p in named if p.name in arguments}
        answer = rule(ctx, **given) if wants_ctx else rule(**given)
        if inspect.isawaitable(answer):
            answer = await answer
        return bool(answer)

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
    target = getattr(fn, "__stalwart_class__", None) or (fn if inspect.isroutine(fn) else type(fn))
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


# -- class policies ---------------------------------------------------------------
# The function each class policy runs as, one per class, so that two Policy
# objects of one class are one policy (``same_policy``) and S13's "one name,
# one policy" holds.
_CLASS_CALLS: weakref.WeakKeyDictionary[type, Callable[..., Any]] = weakref.WeakKeyDictionary()


def class_call(cls: type) -> Callable[..., Any]:
    """The function a class policy runs as: a fresh instance for every call,
    which reaches the call's context as ``self.ctx`` (and as a parameter, if
    its ``__call__`` asks for one).

    A fresh instance, not one shared: calls of one policy run concurrently
    (an LLM's parallel tool calls), each with its own context, so a context
    kept on a shared instance would be the wrong one half the time.
    The schema is ``__call__``'s (hints and docstring), without ``self`` and
    the context; a TypeError names a class that cannot be a policy.
    """
    made = _CLASS_CALLS.get(cls)
    if made is None:
        made = _CLASS_CALLS[cls] = _make_class_call(cls)
    return made


def _own_call(cls: type) -> Callable[..., Any]:
    """The ``__call__`` a class's instances have, or a TypeError saying why
    the class cannot be a policy."""
    call = next((vars(k)["__call__"] for k in cls.__mro__[:-1] if "__call__" in vars(k)), None)
    where = f"class policy {cls.__qualname__} ({cls.__module__})"
    if call is None:
        raise TypeError(
            f"{where} has no __call__: a class becomes a policy through its "
            "`async def __call__(self, ...)`, whose parameters are the policy's arguments"
        )
    if not inspect.iscoroutinefunction(call):
        raise TypeError(
            f"{where}: its __call__ is not async; write `async def __call__(self, ...)` "
            "(a plain function, not a class, may be a synchronous policy)"
        )
    return call  # type: ignore[no-any-return]


def _declared_ctx(cls: type) -> type[Context] | None:
    """The context class a class policy declares for ``self.ctx``
    (``ctx: App`` in its body), or None: none declared, or a name not defined
    yet (``ctx: "App"`` above ``class App``), which is looked up again when
    the policy is called."""
    for klass in cls.__mro__[:-1]:
        ann = vars(klass).get("__annotations__", {}).get("ctx")
        if ann is None:
            continue
        if isinstance(ann, str):
            # Where the class's code looks names up: its functions' globals
            # (code run with exec has no module), else its module's.
            funcs = [v for v in vars(klass).values() if inspect.isfunction(v)]
            module = sys.modules.get(klass.__module__)
            scope = funcs[0].__globals__ if funcs else vars(module) if module else {}
            head, _, tail = ann.strip("'\"").partition(".")
            ann = scope.get(head)
            if tail and ann is not None:
                ann = getattr(ann, tail, None)
        if isinstance(ann, type) and issubclass(ann, Context):
            return ann
        return None
    return None


def _constructor_takes_ctx(cls: type) -> bool:
    """Whether a class policy is built as ``cls(ctx)`` (PocketJoe's way) rather
    than ``cls()``; a TypeError for a constructor that needs more."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):  # a builtin's constructor: no signature to read
        return False
    required = [
        p
        for p in params
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if not required:
        return False
    if len(required) == 1 and required[0].kind is not required[0].KEYWORD_ONLY:
        return True
    needs = ", ".join(p.name for p in required)
    raise TypeError(
        f"class policy {cls.__qualname__} ({cls.__module__}): its constructor needs "
        f"{needs}, but a class policy is made anew for every call, with no argument or "
        "with its context alone (`def __init__(self, ctx)`). To configure a policy, "
        f"make the instance yourself and pass that: sw.policy({cls.__name__}(...))"
    )


def _make_class_call(cls: type) -> Callable[..., Any]:
    call = _own_call(cls)
    gives_ctx = _constructor_takes_ctx(cls)
    params = list(inspect.signature(call).parameters.values())[1:]  # self
    asked = _context_param(types.MethodType(call, cls))  # ``__call__(self, ctx: App, ...)``
    passes_ctx = asked is not None
    if passes_ctx:
        params = params[1:]
    # The context class the engine should build: asked for by ``__call__``,
    # else declared as ``ctx: App``, else (known at the first call) Context.
    wanted: list[type[Context] | None] = [asked or _declared_ctx(cls)]

    async def run(ctx: Context, /, *args: Any, **kwargs: Any) -> Any:
        want = wanted[0]
        if want is None:  # ``ctx: "App"`` written above ``class App``: defined by now?
            want = wanted[0] = _declared_ctx(cls)
        token = None
        if want is not None and not isinstance(ctx, want):
            # The engine built the plain context before the class was known:
            # the same step as the class asks for, and the current one below.
            ctx = ctx.recast(want)
            token = current_step.set(ctx)
        try:
            obj = cls(ctx) if gives_ctx else cls()
            if getattr(obj, "ctx", None) is not ctx:
                try:
                    obj.ctx = ctx
                except AttributeError as exc:
                    raise TypeError(
                        f"class policy {cls.__qualname__}: cannot set self.ctx ({exc}); "
                        "give the class a `ctx` attribute (or drop __slots__)"
                    ) from exc
            if passes_ctx:
                return await call(obj, ctx, *args, **kwargs)
            return await call(obj, *args, **kwargs)
        finally:
            if token is not None:
                current_step.reset(token)

    signature = inspect.signature(call)
    first = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_ONLY, annotation=wanted[0])
    out: Any = run
    out.__signature__ = signature.replace(parameters=[first, *params])
    dropped = {p.name for p in list(signature.parameters.values())[: 2 if passes_ctx else 1]}
    out.__annotations__ = {
        **{k: v for k, v in getattr(call, "__annotations__", {}).items() if k not in dropped},
        "ctx": wanted[0] or Context,
    }
    if wanted[0] is None:
        first = first.replace(annotation=Context)
        out.__signature__ = signature.replace(parameters=[first, *params])
    out.__name__ = _snake(cls.__name__)
    out.__qualname__ = cls.__qualname__
    out.__module__ = cls.__module__
    out.__doc__ = call.__doc__ or cls.__doc__
    out.__wrapped__ = call  # hints resolve in __call__'s module; its source is the code
    out.__stalwart_class__ = cls
    return out  # type: ignore[no-any-return]


# -- binding on an application context ---------------------------------------------------
def _named_after(pol: Policy[Any, Any], attr: str) -> Policy[Any, Any]:
    """``pol`` as bound on attribute ``attr``: renamed after it, unless its
    name was given (``@policy(name=...)``) or already is ``attr``."""
    if pol.named or pol.name == attr:
        return pol
    renamed = pol.with_settings(name=attr)
    renamed.named = False  # named by where it is bound: bound elsewhere, named again
    return renamed


class _Attribute:
    """A provider, an agent, a flow or any object standing for a policy, bound
    on an application context class: ``ctx.llm(...)`` is a step of that
    policy, named after the attribute unless the object was given a name;
    ``App.llm`` is the object itself."""

    __slots__ = ("_policy", "attr", "obj")

    def __init__(self, obj: Any, attr: str) -> None:
        self.obj = obj
        self.attr = attr
        self._policy: Policy[Any, Any] | None = None

    @property
    def __stalwart_policy__(self) -> Policy[Any, Any]:
        if self._policy is None:  # on first use: a flow makes its policy lazily
            self._policy = _named_after(as_policy(self.obj), self.attr)
        return self._policy

    def __get__(self, obj: Any, owner: type) -> Any:
        if obj is None or not isinstance(obj, Context):
            return self.obj
        return _Bound(obj, self.__stalwart_policy__)

    def __repr__(self) -> str:
        return f"<bound {self.attr}: {self.obj!r}>"


def _bind_attribute(attr: str, value: Any) -> Any:
    """What an application context class keeps as attribute ``attr`` in place
    of ``value``, or None to keep ``value`` (methods, classes, data)."""
    if isinstance(value, Policy):
        return _named_after(value, attr)
    if isinstance(value, type | _Bound | _Attribute) or not callable(value):
        return None
    if isinstance(getattr(value, "__stalwart_policy__", None), Policy):
        return _Attribute(value, attr)  # before the test below: a provider has a __get__
    if inspect.isroutine(value):  # methods, static and class methods: the class's own
        return None
    if inspect.iscoroutinefunction(type(value).__call__):
        return _Attribute(value, attr)  # an object with an async __call__ (a scripted model)
    return None


on_bind(_bind_attribute)


class _CallWithCtx(Protocol[C_contra, P, R_co]):
    """What a class policy's instances are when ``__call__`` takes a context."""

    def __call__(self, ctx: C_contra, /, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R_co]: ...


class _Call(Protocol[P, R_co]):
    """What a class policy's instances are: an async ``__call__``."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R_co]: ...


class PolicyDecorator(Protocol):
    """What ``policy(name=..., retries=...)`` returns: a decorator that keeps
    the policy's signature for type checkers, as bare ``@policy`` does."""

    @overload
    def __call__(self, fn: type[_CallWithCtx[C, P, R]], /) -> Policy[P, R]: ...
    @overload
    def __call__(self, fn: type[_Call[P, R]], /) -> Policy[P, R]: ...
    @overload
    def __call__(self, fn: Policy[P, R], /) -> Policy[P, R]: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[C, P], Awaitable[R]], /) -> Policy[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, Awaitable[R]], /) -> Policy[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> Policy[P, R]: ...


# A class comes first: a class is callable too (its constructor), and its
# policy takes ``__call__``'s arguments, not the constructor's. (mypy keeps a
# decorated class's own type, python/mypy#3135: write ``X = policy(XClass)``
# or bind ``x = policy(XClass)`` where a checker should see the policy.)
@overload
def policy(fn: type[_CallWithCtx[C, P, R]], /) -> Policy[P, R]: ...
@overload
def policy(fn: type[_Call[P, R]], /) -> Policy[P, R]: ...
@overload
def policy(fn: Policy[P, R], /) -> Policy[P, R]: ...
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
    exclusive: bool | str = False,
    approval: Approval = False,
    approval_timeout: float | None = None,
) -> PolicyDecorator: ...
def policy(fn: Any = None, /, **settings: Any) -> Any:
    """Make a function, a class with an ``async def __call__``, or an object
    with a ``__call__``, a policy.

    A class policy is made anew for every call (``cls()``, or ``cls(ctx)``
    when its constructor takes one argument) and reaches its context as
    ``self.ctx``, typed by a ``ctx: App`` annotation in its body; its schema
    is ``__call__``'s. A policy given again is returned (a copy, with settings).

    Use bare (``@policy``) or with settings: ``name``, ``description``,
    ``retries`` (extra attempts), ``backoff`` (first delay in seconds, doubled
    each attempt up to ``max_backoff``), ``retry_on`` (exception types worth a
    retry), ``timeout`` (seconds per attempt), ``record`` (record calls as
    steps; on by default), ``max_parallel`` (limit on concurrent option calls
    this policy's actions start), ``exclusive`` (as an option, one call at a
    time within a run: ``True`` for its own lock, a string for a lock shared
    by every option naming it), ``approval`` (as an option, a model's call
    waits for a person to approve, deny or edit it: ``True`` for every call,
    or a function of the call's arguments saying which; docs/approvals.md),
    ``approval_timeout`` (seconds a wait for that decision lasts; none
    within it denies the call).
    """
    if fn is None:
        return lambda f: policy(f, **settings)
    if isinstance(fn, Policy):
        return fn.with_settings(**settings) if settings else fn
    return Policy(fn, **settings)


def declared_policy(value: Any) -> Policy[Any, Any] | None:
    """The policy ``value`` is, or carries as ``__stalwart_policy__`` (a
    model, an agent, a flow, a journey): None for anything else, a class
    included (a class names no run's steps by itself). Unlike
    :func:`as_policy` it never makes a policy of a plain callable."""
    if isinstance(value, Policy):
        return value
    if isinstance(value, type):
        return None
    carried = getattr(value, "__stalwart_policy__", None)
    return carried if isinstance(carried, Policy) else None


def as_policy(obj: Any) -> Policy[Any, Any]:
    """The Policy for ``obj``: itself, or a cached wrapper of a plain callable."""
    if type(obj) is Policy:
        return obj
    if isinstance(obj, Policy):
        return obj
    if isinstance(obj, _Bound):  # ``ctx.web_search`` offered as an option
        return obj.policy
    # A class's own cache only: a subclass is another policy.
    cached = (
        vars(obj).get("__stalwart_policy__")
        if isinstance(obj, type)
        else getattr(obj, "__stalwart_policy__", None)
    )
    if isinstance(cached, Policy):
        return cached
    if not callable(obj):
        raise TypeError(f"{obj!r} is not callable, so it cannot be a policy")
    if isinstance(obj, functools.partial) and isinstance(obj.func, Policy):
        p: Policy[Any, Any] = Policy(obj, **obj.func.settings())  # its settings kept
    else:
        p = Policy(obj)
    with contextlib.suppress(AttributeError, TypeError):
        obj.__stalwart_policy__ = p
    return p
