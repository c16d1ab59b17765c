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
from typing import Any, Literal, TypeVar

from ..core.schema import Signature

__all__ = [
    "PolicyKind",
    "PolicyMetadata",
    "get_policy_spec",
    "policy_spec",
    "policy_spec_mcp_resource",
    "policy_spec_mcp_tool",
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
