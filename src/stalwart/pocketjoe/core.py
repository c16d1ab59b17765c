"""PocketJoe's core names (``Message``, ``Policy``, ``BaseContext``) on Stalwart.

Why a separate module named ``core``: PocketJoe programs import
``pocket_joe.core``, so an import alias (``pocket_joe`` ->
``stalwart.pocketjoe``) must find the same module layout.

What differs from PocketJoe, on purpose: a bound policy is not a closure that
calls the class; it is a Stalwart step (see :mod:`stalwart.pocketjoe.runtime`),
so its action calls run through Stalwart's allow-listed, validated,
recorded options dispatch, and a durable runner makes the whole program
durable.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from ..core.declared import register_type

__all__ = ["BaseContext", "Message", "Policy"]

P = TypeVar("P", bound="Policy")


@dataclass(frozen=True)
class Message:
    """PocketJoe's message: who (``actor``), what kind (``type``: "text",
    "action_call", "action_result", ...) and a JSON ``payload``.

    A frozen dataclass as in PocketJoe 0.1 (``dataclasses.replace`` works);
    ``model_copy(update=...)`` is there too for code written against its
    pydantic variant.
    """

    actor: str
    type: str
    payload: dict[str, Any]
    tool_id: str | None = None
    id: str = ""

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Message:
        """A copy with some fields changed (pydantic's spelling of ``replace``)."""
        return dataclasses.replace(self, **(update or {}))

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (how a Stalwart message carries it)."""
        return {
            "actor": self.actor,
            "type": self.type,
            "payload": self.payload,
            "tool_id": self.tool_id,
            "id": self.id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        return cls(
            actor=str(data["actor"]),
            type=str(data["type"]),
            payload=dict(data["payload"]),
            tool_id=data.get("tool_id"),
            id=str(data.get("id", "")),
        )


# A ledger may hold these (an option's reply is a list of them): S13 wants
# every type a ledger is read back as declared by the program, and this
# module is that declaration.
register_type(Message)


class Policy:
    """Base class of a PocketJoe class policy: implement an async ``__call__``.

    The policy reaches its application context as ``self.ctx``, which the
    engine passes to the constructor on every call.
    """

    ctx: BaseContext

    def __init__(self, ctx: BaseContext) -> None:
        self.ctx = ctx

    async def __call__(self, *args: Any, **kwargs: Any) -> list[Message]:
        raise NotImplementedError


class BaseContext:
    """The application context. A subclass's ``__init__`` assigns each policy
    class, passed through ``_bind``, to an attribute (``self.model =
    self._bind(DeskModel)``); editors then complete ``ctx.model(...)``.

    That attribute's name is also the option's name: what a policy lists in
    ``options=[...]`` and what a model's ``action_call`` names.
    """

    def __init__(self, runner: Any) -> None:
        self._runner = runner

    def _bind(self, cls: type[P]) -> P:
        """What the runner makes of ``cls`` on this context (for Stalwart's
        runners, a :class:`~stalwart.pocketjoe.runtime.BoundPolicy`), marked
        with the class it came from. Declared to return an instance of
        ``cls`` so a type checker and an editor see ``__call__``'s signature."""
        bound = self._runner._bind_strategy(cls, self)
        bound.__policy_class__ = cls
        return bound  # type: ignore[no-any-return]

    def get_policy(self, name: str) -> type[Policy]:
        """The class behind attribute ``name``: AttributeError when the
        context has no such attribute, ValueError when ``_bind`` did not make it."""
        bound = getattr(self, name)
        cls = getattr(bound, "__policy_class__", None)
        if cls is None:
            # The first words are the ones PocketJoe's own tests match.
            raise ValueError(
                f"Policy class not found: {type(self).__name__}.{name} was not made by "
                "self._bind(SomePolicy)"
            )
        return cls  # type: ignore[no-any-return]

    def bound_policies(self) -> dict[str, Any]:
        """Every policy bound on this context, by attribute name: the options
        a model may call when a policy offers none by name."""
        # Bindings are what ``_bind`` marked: no import of the runtime, which
        # imports this module.
        return {k: v for k, v in vars(self).items() if hasattr(v, "__policy_class__")}
