"""A run's tags: a few key-value strings that say whom or what it is for.

Tags are data an operator filters runs by (``customer=c-42``); nothing reads
them to decide what a run does. A run keeps them as given when it is
created; a store holds them as JSON text on the run (what every reader
gets) and once more as rows indexed by ``(key, value)`` (what filters use).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

__all__ = [
    "MAX_TAGS",
    "MAX_TAG_KEY",
    "MAX_TAG_VALUE",
    "check_tags",
    "decode_tags",
    "encode_tags",
    "parse_tag",
]

MAX_TAGS = 16
MAX_TAG_KEY = 64
MAX_TAG_VALUE = 256
_KEY = re.compile(r"[A-Za-z0-9_.\-]+")


def check_tags(tags: object, where: str = "tags") -> dict[str, str]:
    """``tags`` as a plain dict sorted by key, or a ValueError (TypeError for
    a wrong type) naming ``where`` and the tag at fault.

    Keys: 1 to 64 letters, digits, ``_``, ``.`` or ``-``. Values: 1 to 256
    printable characters. At most 16 tags.
    """
    if not isinstance(tags, Mapping):
        raise TypeError(f"{where}: tags are a mapping of strings, not {type(tags).__name__}")
    if len(tags) > MAX_TAGS:
        raise ValueError(f"{where}: at most {MAX_TAGS} tags, not {len(tags)}")
    out: dict[str, str] = {}
    for key, value in tags.items():
        if not isinstance(key, str):
            raise TypeError(f"{where}: a tag key is a string, not {type(key).__name__}")
        if not 1 <= len(key) <= MAX_TAG_KEY or not _KEY.fullmatch(key):
            raise ValueError(
                f"{where}: tag key {key[:80]!r} is not 1 to {MAX_TAG_KEY} letters, "
                "digits, '_', '.' or '-'"
            )
        if not isinstance(value, str):
            raise TypeError(
                f"{where}[{key!r}]: a tag value is a string, not {type(value).__name__}"
            )
        if not 1 <= len(value) <= MAX_TAG_VALUE or not value.isprintable():
            raise ValueError(
                f"{where}[{key!r}]: a tag value is 1 to {MAX_TAG_VALUE} printable "
                f"characters, not {value[:80]!r}"
            )
        out[key] = value
    return dict(sorted(out.items()))


def encode_tags(tags: Mapping[str, str] | None) -> str | None:
    """The JSON text a store keeps for checked ``tags``; None for no tags."""
    if not tags:
        return None
    return json.dumps(dict(sorted(tags.items())), separators=(",", ":"), ensure_ascii=False)


def decode_tags(text: str | None) -> dict[str, str]:
    """The tags a store kept as :func:`encode_tags` text (none for None)."""
    if not text:
        return {}
    value = json.loads(text)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def parse_tag(text: str, sep: str = "=", where: str = "tag") -> tuple[str, str]:
    """``key<sep>value`` (a command line's ``--tag customer=c-42``, a query's
    ``tag=customer:c-42``) as a checked pair; the value may hold ``sep``."""
    key, found, value = text.partition(sep)
    if not found:
        raise ValueError(f"{where}: {text[:80]!r} is not key{sep}value")
    ((k, v),) = check_tags({key: value}, where).items()
    return k, v
