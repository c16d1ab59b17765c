"""Authenticated encryption of one value, bound to where it lives.

AES-256-GCM from the ``cryptography`` package, nothing written by hand: a
fresh 96-bit random nonce per value, and as associated data the value's
header and its place (what it is, its run, its step or name, its field), so
a ciphertext copied to another run, step or field, or given another key id,
fails to open instead of being read as that place's value.

A sealed value is text (every store's value columns are text):
``enc:1:<label>:<base64 of nonce and ciphertext>``, where the label is a
master key's id (``k2``) or a subject's key (``@<subject, base64url>.<key
id>``). :mod:`stalwart.core.sealed` tells such text apart without a key.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ...core.sealed import SEALED_PREFIX
from .keys import check_master_keys

__all__ = ["FORMAT", "Cipher", "DataKey", "place", "sealed_label", "subject_label"]

FORMAT = "1"
_HEAD = f"{SEALED_PREFIX}{FORMAT}:"
_NONCE = 12


def place(kind: str, owner: str, key: str, field: str) -> str:
    """Where a value lives, as the associated data binds it: ``kind`` (run,
    step, signal, mail, schedule, memory), its run (or schedule, or memory
    namespace), its step key (or signal name, or memory key), its field.
    The owner and the key are written with their lengths, so no two places
    spell the same text."""
    return f"{kind}|{len(owner)}:{owner}|{len(key)}:{key}|{field}"


def subject_label(subject: str, kid: str) -> str:
    """The label of a subject's key ``kid`` in a sealed value's header."""
    b64 = base64.urlsafe_b64encode(subject.encode("utf-8")).decode("ascii").rstrip("=")
    return f"@{b64}.{kid}"


def subject_of_label(label: str) -> tuple[str, str] | None:
    """``(subject, key id)`` of a subject label, None for a master key's."""
    if not label.startswith("@"):
        return None
    b64, _, kid = label[1:].rpartition(".")
    try:
        subject = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return subject, kid


def sealed_label(text: str) -> str | None:
    """The label of sealed ``text`` (the key it is sealed under), None if it is not sealed."""
    if not text.startswith(_HEAD):
        return None
    label, sep, _ = text[len(_HEAD) :].partition(":")
    return label if sep else None


class DataKey:
    """One key and its label: a master key, or a subject's."""

    __slots__ = ("_aead", "_head", "label")

    def __init__(self, label: str, key: bytes) -> None:
        self.label = label
        self._head = f"{_HEAD}{label}:"
        self._aead = AESGCM(key)

    def seal(self, plain: str, where: str) -> str:
        """``plain`` (a value's JSON text) sealed for ``where`` (:func:`place`)."""
        head = self._head
        nonce = os.urandom(_NONCE)
        body = self._aead.encrypt(nonce, plain.encode("utf-8"), (head + where).encode("utf-8"))
        return head + binascii.b2a_base64(nonce + body, newline=False).decode("ascii")

    def open(self, text: str, where: str) -> str | None:
        """The JSON text sealed in ``text`` for ``where``; None if this key
        does not authenticate it (another key, another place, altered)."""
        label = sealed_label(text)
        if label is None:
            return None
        head = f"{_HEAD}{label}:"
        try:
            blob = binascii.a2b_base64(text[len(head) :], strict_mode=True)
            plain = self._aead.decrypt(blob[:_NONCE], blob[_NONCE:], (head + where).encode("utf-8"))
            return plain.decode("utf-8")
        except (InvalidTag, binascii.Error, ValueError):
            return None

    def wrap(self, key: bytes, where: str) -> str:
        """Another key, sealed by this one (a subject's key under a master key)."""
        return self.seal(base64.b64encode(key).decode("ascii"), where)

    def unwrap(self, text: str, where: str) -> bytes | None:
        opened = self.open(text, where)
        return None if opened is None else base64.b64decode(opened)


class Cipher:
    """The master keys: the newest seals, every one opens what it sealed."""

    def __init__(self, keys: Sequence[tuple[str, bytes]], source: str = "the key provider") -> None:
        checked = check_master_keys(keys, source)
        self.keys: dict[str, DataKey] = {kid: DataKey(kid, key) for kid, key in checked}
        self.newest: DataKey = self.keys[checked[-1][0]]

    def master(self, label: str) -> DataKey | None:
        """The master key ``label`` names, None if this process holds none so named."""
        return self.keys.get(label)

    @staticmethod
    def new_data_key() -> bytes:
        return AESGCM.generate_key(bit_length=256)
