"""MCP tool results and Stalwart messages, each read as the other.

A client reads a ``CallToolResult`` as one :class:`~stalwart.Message`, part for
part: text blocks as text, images and audio as media with their bytes,
resource links as media by URL, embedded resources as text (a text resource:
the model reads it) or media (a blob). What has no part of its own (structured
content, the URIs of embedded resources) goes into the message's ``meta``
under ``"mcp"``, so nothing the server said is dropped.

A server writes a policy's result the other way: a message's parts as
content blocks, any other value as the JSON text a model would read, and, when
that value is a JSON object, also as structured content.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import mcp_types as types

import stalwart as sw

__all__ = ["message_of", "result_of", "text_of"]


def message_of(result: types.CallToolResult, actor: str) -> sw.Message:
    """A successful result as a message whose parts are its content blocks."""
    parts: list[str | sw.Media] = []
    resources: list[dict[str, Any]] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(sw.Media(block.mime_type, data=base64.b64decode(block.data)))
        elif isinstance(block, types.ResourceLink):
            mime = block.mime_type or "application/octet-stream"
            resources.append({"part": len(parts), "uri": str(block.uri), "name": block.name})
            parts.append(sw.Media(mime, url=str(block.uri)))
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            resources.append({"part": len(parts), "uri": str(res.uri)})
            if isinstance(res, types.TextResourceContents):
                parts.append(res.text)
            else:
                mime = res.mime_type or "application/octet-stream"
                parts.append(sw.Media(mime, data=base64.b64decode(res.blob)))
    meta: dict[str, Any] = {}
    if result.structured_content is not None:
        meta["structured_content"] = result.structured_content
        if not any(isinstance(p, str) for p in parts):
            # A model reads text: a result that is only structured reads as its JSON.
            parts.insert(0, json.dumps(result.structured_content, ensure_ascii=False))
            for r in resources:
                r["part"] += 1
    if resources:
        meta["resources"] = resources
    msg = sw.Message.assistant(*parts, actor=actor)
    if meta:
        msg = sw.Message(msg.role, msg.actor, msg.parts, id=msg.id, meta={"mcp": meta})
    return msg


def text_of(result: types.CallToolResult) -> str:
    """The text of a result's text blocks (what an ``isError`` result says)."""
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    return "\n".join(texts) or "the tool reported an error and no message"


def result_of(value: Any, tool: str) -> types.CallToolResult:
    """A policy's return value as the result of the MCP call of ``tool``."""
    if isinstance(value, sw.Message):
        blocks: list[types.ContentBlock] = [_block(p) for p in value.parts]
        if not blocks:
            blocks = [types.TextContent(type="text", text=value.text)]
        return types.CallToolResult(content=blocks)
    # What a model reads for this value when Stalwart offers the policy itself.
    text = sw.Message.result("mcp", value, name=tool).text
    structured: dict[str, Any] | None = None
    if not isinstance(value, str):
        plain = json.loads(text)
        if isinstance(plain, dict):
            structured = plain
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


def _block(part: sw.Text | sw.Media) -> types.ContentBlock:
    if isinstance(part, sw.Text):
        return types.TextContent(type="text", text=part.text)
    if part.data is None:
        uri = part.url or ""
        return types.ResourceLink(type="resource_link", uri=uri, name=uri, mime_type=part.mime_type)
    data = base64.b64encode(part.data).decode("ascii")
    if part.mime_type.startswith("image/"):
        return types.ImageContent(type="image", data=data, mime_type=part.mime_type)
    if part.mime_type.startswith("audio/"):
        return types.AudioContent(type="audio", data=data, mime_type=part.mime_type)
    blob = types.BlobResourceContents(uri="stalwart://media", mime_type=part.mime_type, blob=data)
    return types.EmbeddedResource(type="resource", resource=blob)
