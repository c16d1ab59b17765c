"""Intent routing: a model picks where a conversation goes, and the router takes it there.

A front desk hears "my internet keeps dropping" and hands the customer to
support; "I was charged twice" goes to billing. A :class:`Router` offers its
model one tool per :class:`Route` (a journey, an agent, any policy that takes
the user's message), ``route_to_<route>``, described by what the route is for.
When the model calls one, the router starts that route with the user's
message, as a step of the same run: durably, so a run killed after the choice
resumes on the same route without asking the model again, and a journey
behind a route goes on receiving the conversation's messages (the signal
``message`` of the run). When the model answers in words instead (the request
is unclear), the user reads that question and the router waits for the
answer, holding nothing while it waits, then chooses again.

Every decision is taken from recorded data: the model call is a recorded
step, and so is the route tool it calls (its result names the route, and is
matched against the router's own routes, never looked up anywhere else).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.context import Context
from ..core.errors import NoRoute
from ..core.message import Message
from ..core.policy import Policy, as_policy

__all__ = ["ROUTING", "TOOL_PREFIX", "Route", "Router"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

#: What a route's tool name starts with: ``route_to_billing`` chooses ``billing``.
TOOL_PREFIX = "route_to_"

#: What the router's model is told before the instructions of the program.
ROUTING = (
    "You route each request to the one route that fits it, by calling that route's tool. "
    "Call exactly one route tool. If you cannot tell which route fits, do not call a tool: "
    "ask the user one short question instead."
)


@dataclass(frozen=True)
class Route:
    """One place a :class:`Router` may send a conversation.

    Args:
        target: A journey, an ``llm.Agent``, or any policy that takes the
            user's message.
        description: What the model is told the route is for (default: the
            target's own description).
        name: The route's name (default: the target's name); the model
            calls it as the tool ``route_to_<name>``.
        argument: The parameter the user's message is passed as (default:
            ``message``, else ``question``, else the target's only required
            parameter).
    """

    target: Any
    description: str | None = None
    name: str | None = None
    argument: str | None = None


@dataclass(frozen=True)
class _Resolved:
    name: str
    policy: Policy[Any, Any]
    argument: str
    tool: Policy[Any, Any]


class Router:
    """A model that picks a route for the conversation; run as a policy, it
    then runs that route and returns what the route returns.

    Args:
        model: Any model policy (``stalwart.llm.openai(...)``, a
            ``stalwart.testing.ScriptedLLM``...).
        routes: The routes the model chooses from (at least one).
        instructions: What the model is told about the routes, after the
            routing rules (who the desk is, how to tell the routes apart).
        name: The router's policy name.
        max_rounds: The most model calls for one user message. A model that
            keeps calling tools that are not routes, or replies with nothing
            at all, is stopped there.
        fallback: The name of the route taken when the model has not chosen
            within ``max_rounds``; without one, :class:`NoRoute` is raised.
        signal: The signal that carries the user's next message, while the
            router waits for an answer to its question (and, for a journey
            behind a route, afterwards).
    """

    def __init__(
        self,
        model: Any,
        routes: Sequence[Route | Any],
        *,
        instructions: str = "",
        name: str = "router",
        max_rounds: int = 3,
        fallback: str | None = None,
        signal: str = "message",
    ) -> None:
        if not routes:
            raise ValueError(f"router {name!r} needs at least one route")
        if max_rounds < 1:
            raise ValueError(f"router {name!r}: max_rounds must be at least 1")
        self.model = model
        self.instructions = instructions
        self.name = name
        self.max_rounds = max_rounds
        self.signal = signal
        self.routes: dict[str, _Resolved] = {}
        for i, given in enumerate(routes):
            route = given if isinstance(given, Route) else Route(given)
            resolved = _resolve(name, i, route)
            if resolved.name in self.routes:
                raise ValueError(f"router {name!r} has two routes named {resolved.name!r}")
            self.routes[resolved.name] = resolved
        if fallback is not None and fallback not in self.routes:
            known = ", ".join(self.routes)
            raise ValueError(
                f"router {name!r}: the fallback {fallback!r} is not one of its routes ({known})"
            )
        self.fallback = fallback
        self.tools = [r.tool for r in self.routes.values()]
        self.__stalwart_policy__: Policy[Any, Any] = Policy(
            self, name=name, description=f"Send the request to the right place ({name})."
        )

    # -- as a policy: choose, then run the route -----------------------------------------
    async def __call__(self, ctx: Context, message: str) -> Any:
        """Choose the route for the user's message and run it.

        Args:
            message: The user's first message.
        """
        conversation = [Message.user(message)]
        while True:
            chosen, text = await self.choose(ctx, conversation)
            if chosen is not None:
                return await self.start(ctx, chosen, conversation)
            ctx.emit({"router": self.name, "reply": text})
            answer = await ctx.wait_for(self.signal, prompt=text, about={"router": self.name})
            conversation.append(Message.user(str(answer)))

    async def choose(self, ctx: Context, conversation: list[Message]) -> tuple[str | None, str]:
        """One choice: ``(route name, "")``, or ``(None, question)`` when the
        model asks the user something instead. ``conversation`` grows by
        what the model said and the results of its calls."""
        system = Message.system("\n\n".join(p for p in (ROUTING, self.instructions.strip()) if p))
        for _ in range(self.max_rounds):
            out = _as_messages(
                await ctx.call(
                    self.model, observations=[system, *conversation], options=self.tools
                ),
                self.name,
            )
            conversation.extend(out)
            chosen = self._chosen(out)
            if chosen is not None:
                return chosen, ""
            if not any(m.action_call is not None for m in out):
                question = "\n".join(m.text for m in out if m.text)
                if question.strip():
                    return None, question
                # Neither a route nor words: nothing to put to the user (who
                # would be left answering an empty prompt); ask the model again.
        if self.fallback is not None:
            return self.fallback, ""
        raise NoRoute(
            f"router {self.name!r} (run {ctx.run_id!r}, step {ctx.step_key or '(root)'}): "
            f"the model chose none of {', '.join(self.routes)} in {self.max_rounds} calls, "
            "and the router has no fallback"
        )

    async def start(self, ctx: Context, route: str, conversation: Sequence[Message]) -> Any:
        """Run ``route`` as a step, given what the user has said so far."""
        chosen = self.routes[route]
        said = "\n".join(m.text for m in conversation if m.role == "user" and m.text)
        ctx.emit({"router": self.name, "route": route})
        return await ctx.call(chosen.policy, **{chosen.argument: said})

    def _chosen(self, out: Sequence[Message]) -> str | None:
        """The first route the model's calls chose, in call order (read from
        the recorded results, so a replay chooses the same)."""
        for m in out:
            r = m.action_result
            if r is None or r.is_error or not isinstance(r.value, dict):
                continue
            route = r.value.get("route")
            if isinstance(route, str) and route in self.routes and r.name == TOOL_PREFIX + route:
                return route
        return None

    def __repr__(self) -> str:
        return f"<Router {self.name} routes=[{', '.join(self.routes)}]>"


def _resolve(router: str, i: int, route: Route) -> _Resolved:
    """The route's policy, tool name and argument, checked now rather than mid-run."""
    try:
        pol = as_policy(route.target)
    except TypeError as exc:
        raise TypeError(f"router {router!r}, routes[{i}]: {exc}") from None
    name = route.name or pol.name
    if not _NAME.match(TOOL_PREFIX + name):
        raise ValueError(
            f"router {router!r}, routes[{i}]: {TOOL_PREFIX + name!r} cannot be a tool name "
            "(letters, digits, _ and -, at most 64); give the route a name="
        )
    params = [p.name for p in pol.signature.params]
    argument = route.argument
    if argument is None:
        required = [p.name for p in pol.signature.params if p.default is p.empty]
        argument = next((a for a in ("message", "question") if a in params), None)
        if argument is None and len(required) == 1:
            argument = required[0]
    if argument is None or argument not in params:
        raise ValueError(
            f"router {router!r}, route {name!r}: cannot tell which parameter of "
            f"{pol.name!r} takes the user's message (its parameters: "
            f"{', '.join(params) or '(none)'}); give the route an argument="
        )
    description = route.description or pol.description or f"The {name} route."
    return _Resolved(name, pol, argument, _route_tool(name, description))


def _route_tool(name: str, description: str) -> Policy[Any, Any]:
    """The tool the model calls to choose route ``name``: it only says so.

    Named apart from the route's own policy, so the ledger tells the choice
    (``route_to_support``) from the route's work (``support``).
    """

    async def choose_route() -> dict[str, str]:
        return {"route": name}

    return Policy(choose_route, name=TOOL_PREFIX + name, description=description)


def _as_messages(raw: Any, router: str) -> list[Message]:
    if isinstance(raw, Message):
        return [raw]
    if isinstance(raw, str):
        return [Message.assistant(raw)]
    if isinstance(raw, list) and all(isinstance(m, Message) for m in raw):
        return raw
    raise TypeError(
        f"router {router!r}: the model must return a Message or a list of them, "
        f"not {type(raw).__name__}"
    )
