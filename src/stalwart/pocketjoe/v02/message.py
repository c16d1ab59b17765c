"""PocketJoe 0.2's messages: parts (text, media) or a payload (an option's
call or result), frozen pydantic models, and the builders that make them.

Same names, fields, validation and builder methods as PocketJoe 0.2, written
for Stalwart. One difference, for durability: a message id made inside a
run (by a builder) is derived from the run, the step and how many ids that
step made before, not drawn at random, so a run resumed by replay rebuilds
the same history and its calls match their records (S5). Outside a run ids
are random UUIDs, as in PocketJoe.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable, Iterator
from typing import Annotated, Any, Literal, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, model_validator

from ...core import codec
from ...core.declared import register_type
from ...core.policy import current_context

__all__ = [
    "MediaPart",
    "Message",
    "MessageBuilder",
    "OptionCallPayload",
    "OptionResultBuilder",
    "OptionResultPayload",
    "Part",
    "Payload",
    "TextPart",
    "from_record",
    "iter_parts",
    "new_id",
    "to_record",
]

Role = Literal["user", "assistant", "tool", "system"]
Modality = Literal["image", "audio", "video", "document"]

# Ids made inside a run: uuid5 of (run, step, n) in this namespace.
_IDS = uuid.UUID("9d3f2a57-4c1e-4b8a-a0f6-5e0c2b7d8e11")


def new_id() -> str:
    """A message id: random outside a run; inside one, the same on every
    execution of the step that makes it (the step's n-th id)."""
    ctx = current_context()
    if ctx is None:
        return str(uuid.uuid4())
    n = ctx.__dict__.get("pocketjoe_ids", 0) + 1
    ctx.__dict__["pocketjoe_ids"] = n
    return str(uuid.uuid5(_IDS, f"{ctx.run_id}/{ctx.step_key}/{n}"))


class TextPart(BaseModel):
    """A piece of text in a message."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["text"] = "text"
    text: str


class MediaPart(BaseModel):
    """An image, audio, video or document: from a ``url``, a local ``path``
    or inline base64 ``data_b64`` (exactly one; ``mime`` required inline)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["media"] = "media"
    modality: Modality
    url: HttpUrl | None = None
    path: str | None = None
    data_b64: str | None = None
    mime: str | None = None
    prompt_hint: str | None = None
    id: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> MediaPart:
        # Where the bytes come from must be unambiguous for every adapter.
        sources = {"url": self.url, "path": self.path, "data_b64": self.data_b64}
        named = sorted(k for k, v in sources.items() if v is not None)
        if len(named) != 1:
            how_many = "exactly one source" if not named else "only one source"
            raise ValueError(
                f"{self.modality} MediaPart: give {how_many} among url, path and data_b64 "
                f"(given: {', '.join(named) or 'none'})"
            )
        if named == ["data_b64"] and self.mime is None:
            raise ValueError(
                f"{self.modality} MediaPart from data_b64: mime is required "
                "(inline bytes say nothing of their type)"
            )
        return self

    def get_bytes(self) -> bytes:
        """The inline bytes (only for a part made from ``data_b64``)."""
        if self.data_b64 is None:
            raise ValueError(
                f"this {self.modality} part has no bytes of its own (it was made from a "
                "url or a path); get_bytes requires data_b64"
            )
        return base64.b64decode(self.data_b64)


Part = TextPart | MediaPart


class OptionCallPayload(BaseModel):
    """A policy's choice to call an option: which, with what, under which id."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["option_call"] = "option_call"
    invocation_id: str
    option_name: str
    arguments: dict[str, Any]


class OptionResultPayload(BaseModel):
    """What calling an option gave: its ``result``, or an error
    (``is_error``, ``error_type``, ``error_message``)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["option_result"] = "option_result"
    invocation_id: str
    option_name: str
    result: Any
    is_error: bool = False
    error_type: str | None = None
    error_message: str | None = None
    retryable: bool | None = None


Payload = OptionCallPayload | OptionResultPayload


class Message(BaseModel):
    """The unit of observation and action: ``parts`` (text and media) or a
    ``payload`` (an option call or result), never both; ``policy`` names who
    made it."""

    model_config = ConfigDict(frozen=True)

    policy: str
    parts: list[Annotated[Part, Field(discriminator="kind")]] | None = None
    payload: Annotated[Payload, Field(discriminator="kind")] | None = None
    step_num: int | None = None
    role_hint_for_llm: Role | None = None
    id: str = ""

    @model_validator(mode="after")
    def _parts_or_payload(self) -> Message:
        if (self.parts is None) == (self.payload is None):
            problem = (
                "is empty: a message must have either parts or payload"
                if self.parts is None
                else "cannot have both parts and payload (send text and a call as two messages)"
            )
            raise ValueError(f"Message from {self.policy!r} {problem}")
        return self

    def __str__(self) -> str:
        """The text of the message's text parts ("" for a payload)."""
        return " ".join(p.text for p in self.parts or () if isinstance(p, TextPart))


# Runs record these (a model's reply, a policy's history): S13 wants every
# type a ledger is read back as declared by the program.
register_type(Message, TextPart, MediaPart, OptionCallPayload, OptionResultPayload)


def to_record(message: Message) -> dict[str, Any]:
    """A message as a ledger keeps it: its JSON, with an option result's
    ``result`` (typed ``Any``) encoded by Stalwart's codec, so a pydantic
    model or a dataclass an option returned is read back as itself, not as
    the dict pydantic's JSON would leave."""
    data = message.model_dump(mode="json")
    if isinstance(message.payload, OptionResultPayload):
        where = f"result of option {message.payload.option_name!r}"
        data["payload"]["result"] = codec.encode(message.payload.result, where)
    return data


def from_record(data: dict[str, Any]) -> Message:
    """The message :func:`to_record` recorded."""
    payload = data.get("payload")
    if isinstance(payload, dict) and payload.get("kind") == "option_result":
        result = codec.decode(payload.get("result"), "an option's recorded result")
        data = {**data, "payload": {**payload, "result": result}}
    return Message.model_validate(data)


codec.register_core_type(Message, "pocketjoe.v02.message", to_record, from_record)

P = TypeVar("P", bound=TextPart | MediaPart)


@overload
def iter_parts(messages: Iterable[Message]) -> Iterator[Part]: ...
@overload
def iter_parts(messages: Iterable[Message], part_type: type[P]) -> Iterator[P]: ...
def iter_parts(messages: Iterable[Message], part_type: type[Any] | None = None) -> Iterator[Any]:
    """Every part of ``messages``, in order; only those of ``part_type`` if given."""
    wanted = part_type or object
    for message in messages:
        yield from (part for part in message.parts or () if isinstance(part, wanted))


class MessageBuilder:
    """Builds a message of parts (``add_text``, ``add_image``...) for one
    policy and step, and at most one option call beside it."""

    def __init__(
        self, policy: str, step_num: int | None = None, role_hint_for_llm: Role | None = None
    ) -> None:
        self.policy = policy
        self.step_num = step_num
        self.role_hint_for_llm = role_hint_for_llm
        self._pieces: list[Part] = []
        self._call_message: Message | None = None

    @classmethod
    def next_step(
        cls, last_message: Message, policy: str | None = None, role_hint_for_llm: Role | None = None
    ) -> MessageBuilder:
        """A builder for the step after ``last_message``'s."""
        return cls(
            policy or last_message.policy,
            (last_message.step_num or 0) + 1,
            role_hint_for_llm or last_message.role_hint_for_llm,
        )

    @classmethod
    def continue_step(
        cls, last_message: Message, policy: str | None = None, role_hint_for_llm: Role | None = None
    ) -> MessageBuilder:
        """A builder for more of ``last_message``'s step."""
        return cls(
            policy or last_message.policy,
            last_message.step_num,
            role_hint_for_llm or last_message.role_hint_for_llm,
        )

    def add_text(self, text: str) -> MessageBuilder:
        self._pieces.append(TextPart(text=text))
        return self

    def _media(self, modality: Modality, **source: Any) -> MessageBuilder:
        media_id = source.pop("media_id", None)
        self._pieces.append(MediaPart(modality=modality, id=media_id, **source))
        return self

    def add_image(
        self,
        url: str | HttpUrl,
        prompt_hint: str | None = None,
        mime: str | None = None,
        media_id: str | None = None,
    ) -> MessageBuilder:
        return self._media("image", url=url, prompt_hint=prompt_hint, mime=mime, media_id=media_id)

    def add_image_path(
        self,
        path: str,
        prompt_hint: str | None = None,
        mime: str | None = None,
        media_id: str | None = None,
    ) -> MessageBuilder:
        return self._media(
            "image", path=path, prompt_hint=prompt_hint, mime=mime, media_id=media_id
        )

    def add_image_bytes(
        self,
        data: bytes,
        mime: str,
        prompt_hint: str | None = None,
        media_id: str | None = None,
    ) -> MessageBuilder:
        inline = base64.b64encode(data).decode("ascii")
        return self._media(
            "image", data_b64=inline, mime=mime, prompt_hint=prompt_hint, media_id=media_id
        )

    def add_audio(
        self,
        url: str | HttpUrl,
        prompt_hint: str | None = None,
        mime: str | None = None,
        media_id: str | None = None,
    ) -> MessageBuilder:
        return self._media("audio", url=url, prompt_hint=prompt_hint, mime=mime, media_id=media_id)

    def add_video(
        self,
        url: str | HttpUrl,
        prompt_hint: str | None = None,
        mime: str | None = None,
        media_id: str | None = None,
    ) -> MessageBuilder:
        return self._media("video", url=url, prompt_hint=prompt_hint, mime=mime, media_id=media_id)

    def add_document(
        self,
        url: str | HttpUrl,
        prompt_hint: str | None = None,
        mime: str | None = None,
        media_id: str | None = None,
    ) -> MessageBuilder:
        return self._media(
            "document", url=url, prompt_hint=prompt_hint, mime=mime, media_id=media_id
        )

    def add_option_call(
        self, option_name: str, arguments: dict[str, Any], invocation_id: str | None = None
    ) -> MessageBuilder:
        """Make an option call message (kept as :attr:`last_option_call`)."""
        self._call_message = Message(
            id=new_id(),
            policy=self.policy,
            step_num=self.step_num,
            role_hint_for_llm=self.role_hint_for_llm,
            payload=OptionCallPayload(
                invocation_id=invocation_id or new_id(),
                option_name=option_name,
                arguments=arguments,
            ),
        )
        return self

    @property
    def last_option_call(self) -> Message | None:
        return self._call_message

    def to_message(self) -> Message:
        """The message of the parts added so far."""
        if not self._pieces:
            raise ValueError(
                f"MessageBuilder for {self.policy!r} has nothing to build: add text or "
                "media (add_text, add_image...) before to_message()"
            )
        return Message(
            id=new_id(),
            policy=self.policy,
            step_num=self.step_num,
            role_hint_for_llm=self.role_hint_for_llm,
            parts=list(self._pieces),
        )

    def to_messages(self) -> list[Message]:
        """The parts message (if any parts) and the option call (if any)."""
        out = [self.to_message()] if self._pieces else []
        if self._call_message is not None:
            out.append(self._call_message)
        return out


class OptionResultBuilder:
    """Builds the result message answering an option call message."""

    def __init__(self, option_call: Message, policy: str | None = None) -> None:
        call = option_call.payload
        if not isinstance(call, OptionCallPayload):
            raise ValueError(
                f"OptionResultBuilder answers option calls; message {option_call.id!r} "
                f"from {option_call.policy!r} carries no OptionCallPayload"
            )
        self._message = option_call
        self._call = call
        self._policy = policy or call.option_name

    @classmethod
    def response_to(cls, option_call: Message, policy: str | None = None) -> OptionResultBuilder:
        return cls(option_call, policy)

    def _result(self, **fields: Any) -> Message:
        return Message(
            id=new_id(),
            policy=self._policy,
            step_num=self._message.step_num,
            role_hint_for_llm="tool",
            payload=OptionResultPayload(
                invocation_id=self._call.invocation_id, option_name=self._call.option_name, **fields
            ),
        )

    def success(self, result: Any) -> Message:
        return self._result(result=result)

    def error(self, error_type: str, error_message: str, retryable: bool = False) -> Message:
        return self._result(
            result=None,
            is_error=True,
            error_type=error_type,
            error_message=error_message,
            retryable=retryable,
        )
