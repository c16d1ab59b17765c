"""``@policy.tool`` and ``@policy.resource``: PocketJoe 0.2's decorators.

PocketJoe builds the metadata with FastMCP's extractors; here it is
Stalwart's :class:`~stalwart.core.schema.Signature` (type hints and the
docstring's parameter docs), so the schema a model is shown is the one its
arguments are validated against before the call runs. The function is
returned as it is, so it can still be awaited directly.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from ...core.policy import Policy as SwPolicy
from ...core.schema import Signature
from .core import BaseContext, OptionSchema

__all__ = [
    "PolicyDecorators",
    "ResourceMetadata",
    "ServedResource",
    "ToolMetadata",
    "policy",
    "served_policies",
]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ToolMetadata:
    """What ``@policy.tool`` records (``func._tool_metadata``)."""

    name: str
    description: str | None
    parameters: dict[str, Any]
    title: str | None = None
    tags: frozenset[str] = frozenset()
    annotations: Any = None
    meta: dict[str, Any] = field(default_factory=dict)
    enabled: bool = True


@dataclass(frozen=True)
class ResourceMetadata:
    """What ``@policy.resource`` records (``func._resource_metadata``)."""

    uri: str
    name: str
    description: str | None
    title: str | None = None
    mime_type: str | None = None
    tags: frozenset[str] = frozenset()
    annotations: Any = None
    meta: dict[str, Any] = field(default_factory=dict)
    enabled: bool = True


def _schema(func: Callable[..., Any], name: str, exclude: list[str]) -> tuple[str, dict[str, Any]]:
    sig = Signature(func, False, name, None)
    schema = sig.json_schema()
    for arg in exclude:
        schema["properties"].pop(arg, None)
        if arg in schema.get("required", ()):
            schema["required"] = [r for r in schema["required"] if r != arg]
    return sig.description, schema


class PolicyDecorators:
    """The ``policy`` namespace: ``@policy.tool(...)``, ``@policy.resource(...)``."""

    @staticmethod
    def tool(
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: list[Any] | None = None,
        tags: set[str] | None = None,
        annotations: Any = None,
        exclude_args: list[str] | None = None,
        output_schema: Any = None,
        serializer: Callable[[Any], str] | None = None,
        meta: dict[str, Any] | None = None,
        enabled: bool | None = None,
    ) -> Callable[[F], F]:
        """Give a policy function its option name, description and schema."""

        def decorate(func: F) -> F:
            tool_name = name or func.__name__
            summary, parameters = _schema(func, tool_name, exclude_args or [])
            text = description if description is not None else (summary or None)
            target: Any = func
            target._tool_metadata = ToolMetadata(
                tool_name,
                text,
                parameters,
                title,
                frozenset(tags or ()),
                annotations,
                dict(meta or {}),
                enabled is not False,
            )
            target._policy_type = "tool"
            target._option_schema = OptionSchema(
                name=tool_name, description=text, parameters=parameters
            )
            return func

        return decorate

    @staticmethod
    def resource(
        uri: str,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: list[Any] | None = None,
        mime_type: str | None = None,
        tags: set[str] | None = None,
        enabled: bool | None = None,
        annotations: Any = None,
        meta: dict[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Mark a policy function as a resource at ``uri`` (it takes no arguments)."""

        def decorate(func: F) -> F:
            res_name = name or func.__name__
            summary, _ = _schema(func, res_name, [])
            text = description if description is not None else (summary or None)
            target: Any = func
            target._resource_metadata = ResourceMetadata(
                str(uri),
                res_name,
                text,
                title,
                mime_type,
                frozenset(tags or ()),
                annotations,
                dict(meta or {}),
                enabled is not False,
            )
            target._policy_type = "resource"
            target._option_schema = OptionSchema(name=res_name, description=text, parameters={})
            return func

        return decorate


policy = PolicyDecorators()


@dataclass(frozen=True)
class ServedResource:
    """A ``@policy.resource`` as an MCP server lists it; reading it runs ``policy``."""

    uri: str
    name: str
    description: str | None
    mime_type: str | None
    policy: SwPolicy[Any, Any]


def served_policies(app: Any) -> tuple[dict[str, SwPolicy[Any, Any]], list[ServedResource]]:
    """The ``@policy.tool`` functions of ``app`` (a module or a context
    class) by tool name, and its ``@policy.resource`` functions, each as the
    Stalwart policy its binding runs as (``enabled=False`` ones left out).

    Every context class ``app`` holds is made (``Context(runner)``), as the
    program would: its bindings are the ones served, and ``get_ctx()`` finds
    it in the runs the server starts (they copy the context variable it
    sets). A marked function no context binds is served bound on the
    module's only context (its reply's option calls go to that context's
    policies), or on a bare one. Nothing is imported.
    """
    from .memory_runtime import InMemoryRunner
    from .policy_wrappers import BoundPolicy

    values = list(vars(app).values()) if isinstance(app, ModuleType) else [app]
    marked = [v for v in values if _meta_of(v) is not None]
    contexts = [
        v
        for v in values
        if inspect.isclass(v) and issubclass(v, BaseContext) and v is not BaseContext
    ]
    if not marked and not (contexts and isinstance(app, type)):
        return {}, []  # a module with nothing marked: no context is made
    runner = InMemoryRunner()  # what contexts bind through; runs are the server's
    made = [_make_context(klass, runner) for klass in contexts]
    bindings: dict[Any, BoundPolicy] = {}
    for ctx in made:
        for bound in ctx.bound_policies().values():
            if not isinstance(bound, BoundPolicy) or _meta_of(bound.func) is None:
                continue
            if bound.func in bindings and bindings[bound.func].ctx is not ctx:
                raise ValueError(
                    f"{bound.name!r} is bound on {type(bindings[bound.func].ctx).__qualname__} "
                    f"and on {type(ctx).__qualname__}: serve one context with --app MODULE:CONTEXT"
                )
            bindings[bound.func] = bound
    home = made[0] if len(made) == 1 else None
    tools: dict[str, SwPolicy[Any, Any]] = {}
    resources: list[ServedResource] = []
    for func in dict.fromkeys([*bindings, *marked]):
        bound = bindings.get(func) or BoundPolicy(func, home or _bare(runner), runner)
        meta = _meta_of(func)
        if isinstance(meta, ToolMetadata):
            if meta.name in tools:
                raise ValueError(
                    f"two PocketJoe policies would be served as the tool {meta.name!r}"
                )
            tools[meta.name] = bound.step_policy()
        elif isinstance(meta, ResourceMetadata):
            if any(r.uri == meta.uri for r in resources):
                raise ValueError(f"two PocketJoe resources would be served at {meta.uri!r}")
            resources.append(
                ServedResource(
                    meta.uri, meta.name, meta.description, meta.mime_type, bound.step_policy()
                )
            )
    return tools, resources


def _meta_of(value: Any) -> ToolMetadata | ResourceMetadata | None:
    """The enabled tool or resource mark on ``value``, if it has one."""
    meta = getattr(value, "_tool_metadata", None) or getattr(value, "_resource_metadata", None)
    if isinstance(meta, ToolMetadata | ResourceMetadata) and meta.enabled and callable(value):
        return meta
    return None


def _make_context(klass: type[BaseContext], runner: Any) -> BaseContext:
    """``klass(runner)``, as a PocketJoe program makes its context."""
    try:
        return klass(runner)
    except Exception as exc:
        raise ValueError(
            f"cannot make the context {klass.__qualname__}(runner) to serve its policies: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _bare(runner: Any) -> BaseContext:
    """A context binding nothing, for a policy served with no context of its own."""

    class Served(BaseContext):
        pass

    return Served(runner)
