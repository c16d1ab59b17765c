"""MCP tool results and Stalwart messages, each read as the other.

A client reads a ``CallToolResult`` as one :class:`~stalwart.Message`, part for
part: text blocks as text, images and audio as media with their bytes,
resource links as media by URL, embedded resources as text (a text resource:
the model reads it) or media (a blob). What has no part of its own (structured
content, the URIs of embedded resources) goes into the message's ``meta``
under ``"mcp"``, so nothing the server said is dropped.

Content annotations are kept, and their ``audience`` honoured: a block for
the user only (``audience: ["user"]``) is not a part, so no model reads it;
it is kept whole in ``meta["mcp"]["for_user"]`` (the recorded result holds
it, and a served result gives it back to its client). The annotations of the
parts (``audience``, ``priority``, ``lastModified``) are in
``meta["mcp"]["annotations"]``, each with the index of its part, so whoever
shows the result to a person can leave out what is for the assistant only.

A server writes a policy's result the other way: a message's parts as
content blocks, any other value as the JSON text a model would read, and, when
that value is a JSON object, also as structured content.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import mcp_types as types
from pydantic import TypeAdapter

import stalwart as sw

__all__ = ["message_of", "prompt_messages", "resource_message", "result_of", "text_of"]

_CONTENT: TypeAdapter[types.ContentBlock] = TypeAdapter(types.ContentBlock)


def message_of(result: types.CallToolResult, actor: str) -> sw.Message:
    """A successful result as a message whose parts are its content blocks."""
    parts: list[str | sw.Media] = []
    resources: list[dict[str, Any]] = []
    annotated: list[dict[str, Any]] = []
    for_user: list[dict[str, Any]] = []
    for block in result.content:
        notes = _annotations(block)
        if notes is not None and _for_user_only(notes):
            for_user.append(block.model_dump(mode="json", by_alias=True, exclude_none=True))
            continue
        if notes is not None:
            annotated.append({"part": len(parts), **notes})
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
    lead: str | None = None
    if result.structured_content is not None:
        meta["structured_content"] = result.structured_content
        if not any(isinstance(p, str) for p in parts):
            # A model reads text: a result that is only structured reads as its JSON.
            lead = json.dumps(result.structured_content, ensure_ascii=False)
    elif for_user and not parts:
        # Everything was for the user: the model is told so, not shown it.
        kinds = ", ".join(sorted({_kind(b) for b in for_user}))
        lead = f"(The tool's result, {kinds}, was shown to the user only.)"
    if lead is not None:
        parts.insert(0, lead)
        for r in (*resources, *annotated):
            r["part"] += 1
    if resources:
        meta["resources"] = resources
    if annotated:
        meta["annotations"] = annotated
    if for_user:
        meta["for_user"] = for_user
    msg = sw.Message.assistant(*parts, actor=actor)
    if meta:
        msg = sw.Message(msg.role, msg.actor, msg.parts, id=msg.id, meta={"mcp": meta})
    return msg


def resource_message(result: types.ReadResourceResult, actor: str) -> sw.Message:
    """A resource's contents as one message: text as text, blobs as media;
    each part's URI (and MIME type) in ``meta["mcp"]["resources"]``."""
    parts: list[str | sw.Media] = []
    listed: list[dict[str, Any]] = []
    for res in result.contents:
        entry: dict[str, Any] = {"part": len(parts), "uri": str(res.uri)}
        if res.mime_type:
            entry["mimeType"] = res.mime_type
        listed.append(entry)
        if isinstance(res, types.TextResourceContents):
            parts.append(res.text)
        else:
            mime = res.mime_type or "application/octet-stream"
            parts.append(sw.Media(mime, data=base64.b64decode(res.blob)))
    msg = sw.Message.user(*parts, actor=actor)
    return sw.Message(
        msg.role, msg.actor, msg.parts, id=msg.id, meta={"mcp": {"resources": listed}}
    )


def prompt_messages(result: types.GetPromptResult) -> list[sw.Message]:
    """A prompt's messages, each as a message of its role (``user`` or
    ``assistant``), its content read as a tool result's is."""
    out: list[sw.Message] = []
    for m in result.messages:
        read = message_of(types.CallToolResult(content=[m.content]), "mcp")
        if m.role == "assistant":
            out.append(sw.Message("assistant", "mcp", read.parts, meta=read.meta))
        else:
            out.append(sw.Message("user", "user", read.parts, meta=read.meta))
    return out


def _annotations(block: Any) -> dict[str, Any] | None:
    """A content block's annotations as JSON (``audience``, ``priority``...), if any."""
    notes = getattr(block, "annotations", None)
    if notes is None:
        return None
    dumped: dict[str, Any] = notes.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped or None


def _for_user_only(notes: dict[str, Any]) -> bool:
    audience = notes.get("audience")
    return isinstance(audience, list) and bool(audience) and "assistant" not in audience


def _kind(block: dict[str, Any]) -> str:
    """What a content block is, in a word or a MIME type."""
    mime = block.get("mimeType")
    return str(mime) if isinstance(mime, str) else str(block.get("type", "content"))


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
        return types.CallToolResult(content=_with_annotations(blocks, value.meta))
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


def _with_annotations(
    blocks: list[types.ContentBlock], meta: dict[str, Any] | None
) -> list[types.ContentBlock]:
    """A message read from an MCP result, served again: its parts' annotations
    put back, and the content for the user only given back to the client."""
    mcp = (meta or {}).get("mcp")
    if not isinstance(mcp, dict):
        return blocks
    out = list(blocks)
    for note in mcp.get("annotations") or ():
        i = note.get("part") if isinstance(note, dict) else None
        if isinstance(i, int) and 0 <= i < len(out) and hasattr(out[i], "annotations"):
            fields = {k: v for k, v in note.items() if k != "part"}
            try:
                notes = types.Annotations.model_validate(fields)
            except ValueError:
                continue
            out[i] = out[i].model_copy(update={"annotations": notes})
    for block in mcp.get("for_user") or ():
        try:
            out.append(_CONTENT.validate_python(block))
        except ValueError:
            continue
    return out


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
