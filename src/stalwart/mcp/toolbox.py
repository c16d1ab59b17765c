"""MCP servers' tools as options a model can be offered.

``connect`` reaches a server over stdio (a command) or streamable HTTP (a URL)
and gives back a :class:`Toolbox`: a list of policies, one per tool, each with
the server's name, description and input schema. Offer it like any options
(``options=tools`` or ``options=[*tools, search]``); the engine's allow-list,
validation (against the server's JSON schema) and error results apply to them
as to any policy.

Durability, in three rules:

- The tool listing is a recorded step (``mcp_list_tools``, its only argument
  the server's name: no command, URL or header reaches the ledger). A resumed
  run offers its model the tools it was offered the first time, so a server
  that changed its tool list does not make the run's recorded model calls
  diverge.
- Each tool call is a recorded step under the tool's name. A resumed run
  answers a finished call from the ledger and never sends it again; a run that
  replays to its end does not even start the server.
- A live call checks the tool against the server's live listing first: a tool
  the server removed, or whose input schema changed since the run listed it,
  fails that call only, with :class:`ToolChanged` showing both schemas.

A tool the server runs only as a task (``execution.taskSupport:
"required"``) is not offered: every plain call of it fails, and MCP tasks
are not supported here. The listing records which tools those are.

The session behind the tools is :mod:`stalwart.mcp.connection`'s.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import jsonschema  # type: ignore[import-untyped]
import mcp_types as types
from pydantic import BaseModel

import stalwart as sw

from .connection import Connection, Endpoint
from .content import prompt_messages, resource_message

__all__ = ["McpTool", "Toolbox", "connect"]

_log = logging.getLogger("stalwart.mcp")


class McpTool(sw.Policy[..., sw.Message]):
    """One tool of an MCP server, as a policy a model can be offered.

    Its schema is the server's, and its arguments are validated against that
    schema (JSON Schema, every error listed) before the call is sent. Its
    result is a :class:`~stalwart.Message` (see :mod:`stalwart.mcp.content`);
    an ``isError`` result raises :class:`ToolError`, which the model reads
    as an error result.
    """

    def __init__(
        self, box: Toolbox, remote: str, name: str, description: str, schema: dict[str, Any]
    ) -> None:
        async def call(ctx: sw.Context, **arguments: Any) -> sw.Message:
            return await box.connection.call(ctx, self, arguments)

        call.__name__ = call.__qualname__ = name
        super().__init__(call, name=name, description=description)
        self.remote = remote
        self.schema = schema
        self.server = box.name

    @property
    def parameters(self) -> dict[str, Any]:
        """The server's input schema, as the model is shown it."""
        return json.loads(json.dumps(self.schema))  # type: ignore[no-any-return]

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check ``arguments`` against the server's schema; raise ArgumentError.

        Read as a policy's arguments are: what a model means is taken as
        meant (``"6"`` for an ``integer`` is 6, ``6.0`` is 6, ``"true"`` for a
        ``boolean`` is true), then the schema is checked as it is, so a
        boolean is never a number.
        """
        validator = self.__dict__.get("_validator")
        if validator is None:
            cls = jsonschema.validators.validator_for(self.schema)
            try:
                cls.check_schema(self.schema)
            except jsonschema.SchemaError as exc:
                raise sw.ArgumentError(
                    f"the input schema MCP server {self.server!r} gives for {self.remote!r} "
                    f"is not a valid JSON schema: {exc.message}"
                ) from None
            validator = self.__dict__["_validator"] = cls(self.schema)
        arguments = _lenient(arguments, self.schema, self.schema, 0)
        problems = []
        for err in sorted(validator.iter_errors(arguments), key=lambda e: list(e.path)):
            where = ".".join(str(x) for x in err.path) or "(arguments)"
            problems.append(f"{where}: {err.message}")
        if problems:
            raise sw.ArgumentError(f"invalid arguments for {self.name!r}: " + "; ".join(problems))
        return dict(arguments)

    def with_settings(self, **changes: Any) -> sw.Policy[..., sw.Message]:
        raise TypeError(
            f"{self.name!r} is an MCP tool; pick its name with connect(prefix=...) and its "
            "timeout with connect(timeout=...)"
        )


def _lenient(value: Any, schema: Any, root: Any, depth: int) -> Any:
    """``value`` with what a model means read as the schema's type, where the
    schema names one type: the lenient reading policy arguments get
    (numbers from their text, an integral float as an integer, ``"true"`` /
    ``"false"`` as booleans). Anything else is left for the schema check."""
    if not isinstance(schema, dict) or depth > 64:
        return value
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        return _lenient(value, target, root, depth + 1)
    kind = schema.get("type")
    if isinstance(value, dict) and kind in ("object", None):
        props = schema.get("properties")
        if isinstance(props, dict):
            return {k: _lenient(v, props.get(k), root, depth + 1) for k, v in value.items()}
        return value
    if isinstance(value, list) and kind in ("array", None):
        items = schema.get("items")
        return [_lenient(v, items, root, depth + 1) for v in value]
    if kind in ("integer", "number") and isinstance(value, str):
        return _number(value, kind)
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "boolean" and isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


def _number(text: str, kind: str) -> Any:
    """``text`` as the number it spells (an integer for ``"integer"``), else itself."""
    try:
        number = float(text.strip())
    except ValueError:
        return text
    if number != number or number in (float("inf"), float("-inf")):
        return text  # NaN and infinities are not JSON numbers
    if kind == "integer":
        try:
            return int(text.strip())
        except ValueError:
            return int(number) if number.is_integer() else text
    return int(text.strip()) if text.strip().lstrip("-").isdigit() else number


class Toolbox(list[McpTool]):
    """The tools of one MCP server, as options; closes its session on exit.

    A list, so it is offered as it is (``options=tools``) or combined
    (``options=[*tools, other]``). ``tools["name"]`` finds a tool by name.
    """

    def __init__(self, connection: Connection) -> None:
        super().__init__()
        self.connection = connection
        self.name = connection.endpoint.name
        self._reads = _Reads(connection)

    async def resources(self) -> list[dict[str, Any]]:
        """The server's resources (``uri``, ``name``, ``description``,
        ``mimeType``), listed as a recorded step (``mcp_list_resources``)."""
        listed: list[dict[str, Any]] = await self._reads.list_resources(server=self.name)
        return listed

    async def read(self, uri: str) -> sw.Message:
        """The resource at ``uri`` as a message (text as text, blobs as media),
        read as a recorded step (``mcp_read_resource``)."""
        return await self._reads.read_resource(server=self.name, uri=uri)

    async def prompts(self) -> list[dict[str, Any]]:
        """The server's prompts (``name``, ``description``, ``arguments``),
        listed as a recorded step (``mcp_list_prompts``)."""
        listed: list[dict[str, Any]] = await self._reads.list_prompts(server=self.name)
        return listed

    async def prompt(self, name: str, **arguments: str) -> list[sw.Message]:
        """The messages of the prompt ``name`` filled with ``arguments``, got as
        a recorded step (``mcp_get_prompt``)."""
        return await self._reads.get_prompt(server=self.name, name=name, arguments=arguments)

    def tool(self, name: str) -> McpTool:
        """The tool offered under ``name``."""
        for t in self:
            if t.name == name:
                return t
        raise KeyError(f"MCP server {self.name!r} offers no tool {name!r} here")

    async def aclose(self) -> None:
        """Close the session (and stop a stdio server); idempotent."""
        await self.connection.close()

    async def __aenter__(self) -> Toolbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Connect:
    """``await connect(...)`` or ``async with connect(...) as tools``."""

    def __init__(
        self,
        endpoint: Endpoint,
        allow: Iterable[str] | None,
        prefix: str,
        timeout: float,
        model: Any | None,
    ) -> None:
        self._model = model
        self._endpoint = endpoint
        self._allow = None if allow is None else list(allow)
        self._prefix = prefix
        self._timeout = timeout
        self._box: Toolbox | None = None

    def __await__(self) -> Generator[Any, None, Toolbox]:
        return self._open().__await__()

    async def __aenter__(self) -> Toolbox:
        self._box = await self._open()
        return self._box

    async def __aexit__(self, *exc: object) -> None:
        if self._box is not None:
            await self._box.aclose()

    async def _open(self) -> Toolbox:
        connection = Connection(self._endpoint, self._timeout, self._model)
        box = Toolbox(connection)
        try:
            listed = await _listing_policy(connection)(server=self._endpoint.name)
            by_name = {t["name"]: t for t in listed}
            # A tool that may only run as an MCP task is not offered: every
            # plain call of it fails (stalwart.mcp makes plain calls).
            tasks = sorted(n for n, t in by_name.items() if t.get("task_required"))
            names = list(by_name) if self._allow is None else self._allow
            missing = [n for n in names if n not in by_name]
            if missing:
                raise ValueError(
                    f"allow names tools MCP server {box.name!r} does not offer: "
                    f"{', '.join(missing)}; it offers: {', '.join(sorted(by_name)) or '(none)'}"
                )
            asked = [n for n in names if n in tasks]
            if self._allow is not None and asked:
                raise ValueError(
                    f"MCP server {box.name!r} runs {', '.join(asked)} only as tasks "
                    "(execution.taskSupport 'required'), which stalwart.mcp does not call: "
                    "leave them out of allow"
                )
            if tasks:
                _log.info(
                    "MCP server %r: not offering %s: it runs them only as tasks "
                    "(execution.taskSupport 'required'), which stalwart.mcp does not call",
                    box.name,
                    ", ".join(tasks),
                )
                names = [n for n in names if n not in tasks]
            for n in names:
                t = by_name[n]
                box.append(
                    McpTool(box, n, self._prefix + n, t.get("description") or "", t["input_schema"])
                )
        except BaseException:
            await connection.close()
            raise
        return box


class _Reads:
    """A toolbox's reads of the server, each a step recorded in the run that
    makes it (so a resumed run reads what it read, without the server). The
    server is named by its ``name`` only, as the tool listing is."""

    def __init__(self, connection: Connection) -> None:
        ask = connection.requested

        async def mcp_list_resources(server: str) -> list[dict[str, Any]]:
            listed: types.ListResourcesResult = await ask(
                "resources/list", lambda c: c.list_resources(cache_mode="refresh")
            )
            return _dumped(listed.resources)

        async def mcp_read_resource(server: str, uri: str) -> sw.Message:
            read = await ask(f"resources/read of {uri!r}", lambda c: c.read_resource(uri))
            return resource_message(read, server)

        async def mcp_list_prompts(server: str) -> list[dict[str, Any]]:
            listed: types.ListPromptsResult = await ask(
                "prompts/list", lambda c: c.list_prompts(cache_mode="refresh")
            )
            return _dumped(listed.prompts)

        async def mcp_get_prompt(
            server: str, name: str, arguments: dict[str, str]
        ) -> list[sw.Message]:
            got = await ask(f"prompts/get of {name!r}", lambda c: c.get_prompt(name, arguments))
            return prompt_messages(got)

        self.list_resources = sw.policy(mcp_list_resources)
        self.read_resource = sw.policy(mcp_read_resource)
        self.list_prompts = sw.policy(mcp_list_prompts)
        self.get_prompt = sw.policy(mcp_get_prompt)


def _dumped(items: Sequence[BaseModel]) -> list[dict[str, Any]]:
    return [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in items]


def _needs_task(tool: Any) -> bool:
    """Whether the server calls ``tool`` only as a task (``taskSupport: required``)."""
    execution = getattr(tool, "execution", None)
    return getattr(execution, "task_support", None) == "required"


def _listing_policy(
    connection: Connection,
) -> Callable[..., Awaitable[list[dict[str, Any]]]]:
    """The step that lists the server's tools: recorded inside a run, so a
    resumed run is offered what it was offered (and starts no server)."""

    async def mcp_list_tools(server: str) -> list[dict[str, Any]]:
        _, live = await connection.session()
        return [
            {
                "name": t.name,
                "description": t.description or "",
                "input_schema": t.input_schema,
                **({"task_required": True} if _needs_task(t) else {}),
            }
            for t in live.values()
        ]

    return sw.policy(mcp_list_tools)


def connect(
    server: str | Sequence[str],
    *,
    name: str | None = None,
    headers: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    allow: Iterable[str] | None = None,
    prefix: str = "",
    timeout: float = 60.0,
    model: Any | None = None,
) -> _Connect:
    """Reach an MCP server and get its tools as options.

    ``server`` is a URL (``http://`` or ``https://``: streamable HTTP, with
    ``headers`` such as ``Authorization``) or a command as a list
    (``["python", "server.py"]``: stdio, with ``env`` and ``cwd``; the SDK
    passes only a safe default environment unless ``env`` is given).
    ``name`` names the server in the ledger and in errors (default: the
    URL's host, or the command's last word); ``allow`` offers only the tools
    named; ``prefix`` is put before each tool's name (two servers with a
    ``search`` tool each); ``timeout`` bounds connecting and each call, in
    seconds. ``model`` (the run's model: a provider, an agent's model, a
    scripted model) answers the server's sampling requests, each a recorded
    step; without it the client does not offer sampling. A server's question
    to the user (elicitation) is a durable wait for the signal
    ``"elicitation"`` (see :mod:`stalwart.mcp.asks`).

    Use ``async with connect(...) as tools:`` (the session closes on exit) or
    ``tools = await connect(...)`` and ``await tools.aclose()``.
    """
    if isinstance(server, str):
        if not server.startswith(("http://", "https://")):
            raise ValueError(
                f"an MCP server is a URL (http:// or https://) or a command as a list of "
                f"words, not {server!r}"
            )
        default = urlsplit(server).hostname or "mcp"
        endpoint = Endpoint(name or default, url=server, headers=headers)
    else:
        argv = tuple(server)
        if not argv:
            raise ValueError("the command that starts the MCP server is empty")
        if headers is not None:
            raise ValueError("headers are for an MCP server reached by URL")
        default = os.path.splitext(os.path.basename(argv[-1]))[0] or "mcp"
        endpoint = Endpoint(
            name or default, argv=argv, env=env, cwd=None if cwd is None else os.fspath(cwd)
        )
    if timeout <= 0:
        raise ValueError("timeout must be > 0 seconds")
    return _Connect(endpoint, allow, prefix, timeout, model)
