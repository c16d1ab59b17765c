"""How an encrypted value looks where a JSON value would be, for readers
that hold no key.

A store that encrypts at rest (:mod:`stalwart.stores.encryption`) keeps, in
place of a value's JSON text, text that starts with ``enc:`` (no JSON text
starts so): ``enc:1:<key id>:<nonce and ciphertext>`` under a master key,
``enc:1:@<subject>/<key id>:...`` under a subject's own key. A reader that
holds the key gets the JSON back; one that does not gets this text, and one
whose subject was erased gets ``enc:erased:<subject>``. This module only
tells these apart and names them: it holds no key and imports no
cryptography, so the core, the CLI and the inspector can say "encrypted" or
"erased" without either.
"""

from __future__ import annotations

from typing import Literal

from .errors import CorruptedRecord, ValueEncrypted, ValueErased

__all__ = [
    "ERASED_PREFIX",
    "SEALED_PREFIX",
    "SealedState",
    "erased_text",
    "sealed_error",
    "sealed_state",
]

SEALED_PREFIX = "enc:"
ERASED_PREFIX = "enc:erased:"

SealedState = Literal["encrypted", "erased"]


def sealed_state(text: str | None) -> SealedState | None:
    """``"encrypted"``, ``"erased"``, or None for a value a reader can parse."""
    if text is None or not text.startswith(SEALED_PREFIX):
        return None
    return "erased" if text.startswith(ERASED_PREFIX) else "encrypted"


def erased_text(subject: str) -> str:
    """What a reader gets in place of a value of an erased ``subject``."""
    return ERASED_PREFIX + subject


def _key_of(text: str) -> str:
    parts = text.split(":", 3)
    return parts[2][:120] if len(parts) == 4 else "?"


def sealed_error(text: str, where: str) -> CorruptedRecord:
    """The error for sealed ``text`` met where a value is needed: ``where``
    names the run, the step and the field."""
    if text.startswith(ERASED_PREFIX):
        subject = text[len(ERASED_PREFIX) :][:120]
        return ValueErased(
            f"{where}: the value was erased (the key of subject {subject!r} was deleted); "
            "it can never be read again"
        )
    return ValueEncrypted(
        f"{where}: the value is encrypted (key {_key_of(text)!r}) and this process holds "
        "no key that opens it: give the store its keys (STALWART_KEYS or STALWART_KEYS_FILE), "
        "or the value was altered or moved"
    )
