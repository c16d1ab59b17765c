"""``@policy_spec_mcp_tool`` and friends: a policy's name, description and
input schema, as PocketJoe spells them.

The schema is Stalwart's (:class:`stalwart.core.schema.Signature`, built from
``__call__``'s type hints and docstring, reST ``:param x:`` included), so the
schema a model is shown is the one Stalwart validates the model's arguments
against before it runs the call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..core.schema import Signature

if TYPE_CHECKING:
    from ..core.policy import Policy as SwPolicy
    from .v02.policy_decorators import ServedResource

__all__ = [
    "PolicyKind",
    "PolicyMetadata",
    "get_policy_spec",
    "policy_spec",
    "policy_spec_mcp_resource",
    "policy_spec_mcp_tool",
    "served_policies",
]

# How an MCP server would show a policy; the values are PocketJoe's, which
# programs pass as ``mcp_kind``.
PolicyKind = Literal["tool", "resource", "none_mcp"]
T = TypeVar("T")


@dataclass(frozen=True)
class PolicyMetadata:
    """What ``@policy_spec`` records on a policy. The fields are PocketJoe's,
    in its order, so code that builds or reads one works unchanged."""

    name: str
    description: str
    kind: PolicyKind
    input_schema: dict[str, Any]
    annotations: dict[str, Any] = field(default_factory=dict)


def signature_of(target: Any, name: str, description: str | None) -> Signature:
    """Stalwart's signature of a policy class's ``__call__`` (``self`` left
    out) or of a plain async function."""
    if inspect.isclass(target):
        return Signature(target.__call__, True, name, description)
    return Signature(target, False, name, description)


def _attach(
    kind: PolicyKind,
    name: str | None,
    description: str,
    input_schema: dict[str, Any] | None,
    annotations: dict[str, Any] | None,
) -> Callable[[T], T]:
    """The decorator all three spellings share: it sets ``__policy_spec__``."""

    def decorator(target: T) -> T:
        called = str(name or getattr(target, "__name__", type(target).__name__))
        schema = input_schema or signature_of(target, called, description or None).json_schema()
        meta = PolicyMetadata(called, description, kind, schema, dict(annotations or {}))
        target.__policy_spec__ = meta  # type: ignore[attr-defined]
        return target

    return decorator


# The three public decorators keep PocketJoe's keyword-only signatures, so its
# programs call them unchanged; each only fixes the kind.


def policy_spec(
    *,
    mcp_kind: PolicyKind = "none_mcp",
    name: str | None = None,
    description: str = "",
    input_schema: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
) -> Callable[[T], T]:
    """Attach a :class:`PolicyMetadata` of any kind to a policy class or function."""
    return _attach(mcp_kind, name, description, input_schema, annotations)


def policy_spec_mcp_tool(
    *,
    name: str | None = None,
    description: str = "",
    input_schema: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
) -> Callable[[T], T]:
    """A policy an MCP server may list as a tool."""
    return _attach("tool", name, description, input_schema, annotations)


def policy_spec_mcp_resource(
    *,
    name: str | None = None,
    description: str = "",
    input_schema: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
) -> Callable[[T], T]:
    """A policy an MCP server may list as a resource."""
    return _attach("resource", name, description, input_schema, annotations)


def get_policy_spec(policy: Any) -> PolicyMetadata:
    """The spec a ``@policy_spec...`` decorator attached; ValueError if there is none."""
    spec = getattr(policy, "__policy_spec__", None)
    if not isinstance(spec, PolicyMetadata):
        named = getattr(policy, "__name__", repr(policy))
        raise ValueError(
            f"{named} has no spec: decorate it with @policy_spec_mcp_tool (or "
            "@policy_spec_mcp_resource, @policy_spec) to make it an option"
        )
    return spec


def served_policies(app: Any) -> tuple[dict[str, SwPolicy[Any, Any]], list[ServedResource]]:
    """The policies of ``app`` an MCP server serves, PocketJoe's marks read:
    tools by tool name, and resources.

    ``app`` is a module or a context class (0.1's or 0.2's ``BaseContext``
    subclass). Served are 0.1 policy classes marked ``@policy_spec_mcp_tool``
    and 0.2 functions marked ``@policy.tool`` (tools) or ``@policy.resource``
    (resources; 0.1 resources have no URI to serve them at, so they are not).
    Each is the Stalwart policy a bound policy runs as (decision and options
    as steps), so a call is a run like any other tool's. Empty when ``app``
    has no such mark: the caller then reads its own marks.

    Only what ``app`` holds is looked at; nothing is imported. A context
    class found there is made as PocketJoe programs make it,
    ``Context(runner)``, so the policies it binds (and ``get_ctx`` in 0.2)
    work as in the program; a marked policy no context binds is served on
    its own.
    """
    from .v02.policy_decorators import served_policies as served_v02

    tools = _served_v01(app)
    v02_tools, resources = served_v02(app)
    for name, pol in v02_tools.items():
        if name in tools:
            raise ValueError(f"two PocketJoe policies would be served as the tool {name!r}")
        tools[name] = pol
    return tools, resources


def _served_v01(app: Any) -> dict[str, SwPolicy[Any, Any]]:
    """0.1's ``@policy_spec_mcp_tool`` classes, each bound on the context
    class that binds it (else on a bare context), by tool name."""
    from .core import BaseContext, Policy
    from .runtime import BoundPolicy, InMemoryRunner

    values = _values_of(app)
    marked: list[type[Policy]] = [
        v for v in values if inspect.isclass(v) and issubclass(v, Policy) and _kind(v) == "tool"
    ]
    contexts = [
        v
        for v in values
        if inspect.isclass(v) and issubclass(v, BaseContext) and v is not BaseContext
    ]
    if not marked and not (contexts and isinstance(app, type)):
        return {}  # a module with no marked class: no context is made
    runner = InMemoryRunner()  # what the contexts bind through; runs are the server's
    bindings: dict[type[Policy], tuple[str, BoundPolicy]] = {}
    for klass in contexts:
        ctx = _make_context(klass, runner)
        for bound in ctx.bound_policies().values():
            if not isinstance(bound, BoundPolicy) or _kind(bound.cls) != "tool":
                continue
            where = f"{klass.__qualname__}.{bound.option_name}"
            seen = bindings.get(bound.cls)
            if seen is not None and seen[0] != where:
                raise ValueError(
                    f"{bound.cls.__qualname__} is bound as {seen[0]} and as {where}: serve one "
                    f"context with --app MODULE:CONTEXT"
                )
            bindings[bound.cls] = (where, bound)
    tools: dict[str, SwPolicy[Any, Any]] = {}
    for cls in dict.fromkeys([*bindings, *marked]):
        found = bindings.get(cls)
        bound = found[1] if found else BoundPolicy(cls, BaseContext(runner), runner)
        name = get_policy_spec(cls).name
        if name in tools:
            raise ValueError(f"two PocketJoe policies would be served as the tool {name!r}")
        tools[name] = bound.step_policy()
    return tools


def _kind(target: Any) -> str | None:
    spec = getattr(target, "__policy_spec__", None)
    return spec.kind if isinstance(spec, PolicyMetadata) else None


def _values_of(app: Any) -> list[Any]:
    """What ``app`` holds: a module's top-level values; a context class itself."""
    if isinstance(app, ModuleType):
        return list(vars(app).values())
    if isinstance(app, type):
        return [app]
    return []


def _make_context(klass: type[Any], runner: Any) -> Any:
    """``klass(runner)``, as a PocketJoe program makes its context."""
    try:
        return klass(runner)
    except Exception as exc:
        raise ValueError(
            f"cannot make the context {klass.__qualname__}(runner) to serve its policies: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
