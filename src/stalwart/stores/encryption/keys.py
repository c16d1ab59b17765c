"""Where an encrypted store's master keys come from: the application's.

A :class:`KeyProvider` is the one plug-in point: an object with a
``master_keys()`` method that returns ``(key id, 32 bytes)`` pairs, oldest
first; the last one seals every new value, the others still open what they
sealed. Two ship: :class:`EnvKeys` (an environment variable) and
:class:`FileKeys` (a file); a key management service is a class of a few
lines that asks it (the provider is called once, when the store opens).

Both read the same text: keys separated by commas or lines, each
``ID:BASE64`` (32 bytes once decoded, as ``base64.b64encode(os.urandom(32))``
or ``stalwart store keygen`` writes them), ``#`` starting a comment line.
Every error names the source and the key id, never a key.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from ...core.errors import EncryptionKeyError

__all__ = [
    "KEYS_FILE_VARIABLE",
    "KEYS_VARIABLE",
    "EnvKeys",
    "FileKeys",
    "KeyProvider",
    "StaticKeys",
    "check_master_keys",
    "keys_from_environment",
    "new_key_line",
    "parse_keys",
]

KEYS_VARIABLE = "STALWART_KEYS"
KEYS_FILE_VARIABLE = "STALWART_KEYS_FILE"
KEY_BYTES = 32
_KEY_ID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


@runtime_checkable
class KeyProvider(Protocol):
    """Gives an encrypted store its master keys."""

    def master_keys(self) -> Sequence[tuple[str, bytes]]:
        """``(key id, 32-byte key)`` pairs, oldest first: the last seals new values."""
        ...


def check_master_keys(keys: Sequence[tuple[str, bytes]], source: str) -> list[tuple[str, bytes]]:
    """``keys`` as a list, or :class:`EncryptionKeyError` naming ``source``
    and the key at fault."""
    out: list[tuple[str, bytes]] = []
    seen: set[str] = set()
    for kid, key in keys:
        if not isinstance(kid, str) or not _KEY_ID.fullmatch(kid):
            raise EncryptionKeyError(
                f"{source}: key id {str(kid)[:80]!r} is not 1 to 64 letters, "
                "digits, '_', '.' or '-'"
            )
        if kid in seen:
            raise EncryptionKeyError(f"{source}: key id {kid!r} is given twice")
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            size = len(key) if isinstance(key, bytes) else type(key).__name__
            raise EncryptionKeyError(
                f"{source}: key {kid!r} is {size} bytes; a key is {KEY_BYTES} random bytes"
            )
        seen.add(kid)
        out.append((kid, key))
    if not out:
        raise EncryptionKeyError(f"{source}: no key given")
    return out


def parse_keys(text: str, source: str) -> list[tuple[str, bytes]]:
    """The keys in ``text`` (``ID:BASE64`` items separated by commas or lines)."""
    pairs: list[tuple[str, bytes]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("#"):
            continue
        for item in line.split(","):
            item = item.strip()
            if not item:
                continue
            kid, sep, b64 = item.partition(":")
            if not sep:
                raise EncryptionKeyError(
                    f"{source}, line {n}: an item is ID:BASE64, and {kid[:20]!r}... has no ':'"
                )
            try:
                key = base64.b64decode(b64.strip(), validate=True)
            except (binascii.Error, ValueError):
                raise EncryptionKeyError(
                    f"{source}, line {n}: key {kid.strip()[:64]!r} is not base64"
                ) from None
            pairs.append((kid.strip(), key))
    return check_master_keys(pairs, source)


def new_key_line(kid: str) -> str:
    """A new random key as a line of the keys format: ``ID:BASE64``."""
    check_master_keys([(kid, b"\0" * KEY_BYTES)], "the new key")
    return f"{kid}:{base64.b64encode(os.urandom(KEY_BYTES)).decode('ascii')}"


class StaticKeys:
    """Keys the application holds in memory already (tests, a secret manager read at start)."""

    def __init__(self, keys: Sequence[tuple[str, bytes]]) -> None:
        self._keys = check_master_keys(keys, "StaticKeys")

    def master_keys(self) -> Sequence[tuple[str, bytes]]:
        return list(self._keys)


class EnvKeys:
    """Keys from an environment variable (``STALWART_KEYS`` by default)."""

    def __init__(self, variable: str = KEYS_VARIABLE) -> None:
        self.variable = variable

    def master_keys(self) -> Sequence[tuple[str, bytes]]:
        text = os.environ.get(self.variable)
        if text is None:
            raise EncryptionKeyError(f"the environment variable {self.variable} is not set")
        return parse_keys(text, f"the environment variable {self.variable}")


class FileKeys:
    """Keys from a file, one ``ID:BASE64`` a line (``STALWART_KEYS_FILE``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def master_keys(self) -> Sequence[tuple[str, bytes]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise EncryptionKeyError(
                f"the keys file {str(self.path)!r} cannot be read ({type(exc).__name__})"
            ) from None
        return parse_keys(text, f"the keys file {str(self.path)!r}")


def keys_from_environment() -> KeyProvider | None:
    """The provider the environment names: ``STALWART_KEYS_FILE`` (a file)
    or ``STALWART_KEYS`` (the keys themselves); None when neither is set."""
    path = os.environ.get(KEYS_FILE_VARIABLE)
    if path:
        return FileKeys(path)
    if os.environ.get(KEYS_VARIABLE):
        return EnvKeys()
    return None
