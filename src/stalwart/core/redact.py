"""Keeping secrets and terminal controls out of what Stalwart prints and records.

Two kinds of text cross from one trust domain into another here. A URL the
application was configured with (a store, a model server) may carry a
password, and it ends up in error messages, which the ledger keeps for ever
and the CLI prints. And what the ledger holds (run ids, results, errors) may
have been written by anyone who could reach the store or the model; printed
raw, its escape sequences would drive the reader's terminal (retitle it,
clear it, hide text, forge lines). The helpers below make both safe at the
point of printing or recording; they depend on nothing but the standard
library, so any layer can use them.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "mask_url", "printable", "redact"]

MASK = "***"

# ``scheme://user:password@host``: the authority runs to the first "/" (or
# whitespace), and its userinfo to the last "@" inside it, as URL parsers
# read it. A "#", "?" or "@" does not end the password early: libpq accepts
# them there unencoded, and masking a little too much is better than
# printing the tail of a password.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@]*:)(?P<password>[^\s/]*)(?=@)")
# ``password=...`` and ``sslpassword=...``: in a URL's query (ends at "&" or
# "#"), in a libpq key=value DSN (ends at whitespace, or is a quoted string
# with backslash escapes), or in a repr of keyword arguments (quoted).
_PARAM = re.compile(
    r"""(?P<head>\b(?:ssl)?password\s*=\s*)"""
    r"""(?P<password>'(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?|[^\s&#'"]+)""",
    re.IGNORECASE,
)


def _masked(match: re.Match[str]) -> str:
    return match["head"] + MASK


def redact(text: str) -> str:
    """``text`` with every password it contains replaced by ``***``.

    For free text that may quote a URL or a DSN: an exception message, a
    log line, a repr. Usernames, hosts and database names stay readable,
    since they are what a reader needs to tell which server failed.
    """
    if "=" not in text and "://" not in text:
        return text  # the common case: nothing that could hold a password
    return _PARAM.sub(_masked, _USERINFO.sub(_masked, text))


def mask_url(url: str) -> str:
    """A store or server URL (or libpq DSN) fit to print: its password is ``***``.

    ``postgresql://app:s3cret@db/prod`` becomes ``postgresql://app:***@db/prod``;
    ``host=db password=s3cret`` becomes ``host=db password=***``.
    """
    return redact(url)


# C0 controls but newline and tab, DEL, and C1 controls (U+0080-U+009F, which
# some terminals read as CSI, OSC... without an ESC). Escaping the introducer
# of a sequence disarms the whole sequence: what follows it is plain text.
_CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x00, 0x20), *range(0x7F, 0xA0))
    if chr(code) not in "\n\t"
}
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # the keys of _CONTROLS


def printable(text: str) -> str:
    """``text`` with terminal control characters shown as ``\\xNN`` escapes.

    Ledger content (run ids, results, errors, step names, signal names) is
    data, possibly written by an adversary; printed raw, an ESC or CSI
    sequence in it would drive the terminal of whoever inspects the run. The
    characters are escaped rather than dropped, so the reader sees that they
    are there. Newlines and tabs are kept: messages and results span lines.
    """
    if _CONTROL_CHARS.search(text) is None:
        return text
    return text.translate(_CONTROLS)
