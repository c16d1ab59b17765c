"""Who may use a server Stalwart runs: the checks the API and the inspector share.

Both answer HTTP requests that can start, signal and cancel runs, and guard
them alike: a bearer token compared in constant time (:class:`Tokens`), a
server on a loopback address answering to loopback host names only (a page
that points its own domain at 127.0.0.1, DNS rebinding, is refused), and a
browser's ``Origin`` that must be the server itself; and the tokens
themselves, checked alike when a server is given them (:func:`check_tokens`).
Each edge keeps its own middleware and refusals; this module holds what they
decide with. It depends on nothing but the standard library, so any layer
can use it, and it never logs nor returns a token.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
from collections.abc import Collection, Iterable, Sequence
from urllib.parse import urlsplit

__all__ = [
    "CSP",
    "LOOPBACK_NAMES",
    "MIN_TOKEN",
    "SECURITY_HEADERS",
    "Tokens",
    "bearer",
    "check_tokens",
    "host_names",
    "host_of",
    "is_loopback",
    "loopback_hosts",
    "same_origin",
    "url_host",
]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

# Characters of the shortest token a server accepts: long enough that
# guessing is hopeless at any rate a server answers.
MIN_TOKEN = 16

# Scripts, styles and images only from the server's own files: no inline
# script runs, even if escaping failed somewhere.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # "no-referrer" makes Chromium send "Origin: null"
    "Cache-Control": "no-store",
}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine only."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_hosts(bound: str) -> frozenset[str]:
    """The host names a server bound to the loopback address ``bound``
    answers to: the loopback names and that address itself (a server on
    127.0.0.2 is reached as 127.0.0.2, which no name in
    :data:`LOOPBACK_NAMES` is), as :func:`host_of` reads a ``Host``."""
    address = bound.strip("[]").lower()
    names = set(LOOPBACK_NAMES) | {address}
    with contextlib.suppress(ValueError):  # a name (localhost) is kept as given
        names.add(ipaddress.ip_address(address).compressed)  # 0:0::1 is addressed as ::1
    return frozenset(names)


def url_host(bound: str) -> str:
    """How a URL names the address a server is bound to: ``localhost`` for
    127.0.0.1 and ``localhost`` (what a person types), else the address
    itself, an IPv6 one in brackets; never a name that resolves elsewhere."""
    address = bound.strip("[]")
    if address.lower() in ("127.0.0.1", "localhost"):
        return "localhost"
    return f"[{address}]" if ":" in address else address


def host_names(hosts: Collection[str] | None) -> frozenset[str] | None:
    """The host names a server answers to, as :func:`host_of` reads them
    (lower case, an IPv6 address without brackets); None stays None (any)."""
    return None if hosts is None else frozenset(h.strip("[]").lower() for h in hosts)


def host_of(netloc: str) -> str:
    """The host name of a ``Host`` header, without its port; "" when the URL
    parser refuses it (an unclosed bracket names no host)."""
    try:
        return (urlsplit(f"//{netloc}").hostname or "").lower()
    except ValueError:
        return ""


def same_origin(origin: str, host: str) -> bool:
    """Whether a browser's ``Origin`` header names the server its request's
    ``Host`` header addresses (a malformed origin names none)."""
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:
        return False
    return bool(netloc) and netloc.lower() == host.lower()


def bearer(header: str) -> str | None:
    """The token an ``Authorization: Bearer <token>`` header carries, or None
    for another scheme."""
    scheme, _, given = header.partition(" ")
    return given.strip() if scheme.lower() == "bearer" else None


def check_tokens(tokens: Sequence[str], given: str) -> list[str]:
    """The tokens a server is started with, each checked, duplicates dropped.

    A token has at least :data:`MIN_TOKEN` characters, all ASCII, and no
    spaces or control characters (a header, a cookie and a URL carry it). ``given``
    says how the tokens were given (``"--token"``, ``"tokens="``), so the
    ValueError points at what to change; it never shows a token.
    """
    if isinstance(tokens, str):
        raise TypeError(f"{given} takes a list of tokens, not one string")
    out: list[str] = []
    for i, token in enumerate(tokens, 1):
        which = f"the token given with {given}" if len(tokens) == 1 else f"token #{i} of {given}"
        if len(token) < MIN_TOKEN:
            raise ValueError(
                f"{which} has {len(token)} characters; a token has at least {MIN_TOKEN} "
                "(make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        if not token.isprintable() or any(c.isspace() for c in token):
            raise ValueError(f"{which} contains spaces or control characters")
        if not token.isascii():  # a header carries bytes read as latin-1: no client could send it
            raise ValueError(f"{which} contains characters other than ASCII")
        if token not in out:
            out.append(token)
    return out


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()


class Tokens:
    """The tokens a server accepts, kept as digests.

    :meth:`accepts` compares what a request gave with every one of them, in
    constant time, digest against digest: neither which token matched nor
    how long a token is shows in the time it takes.
    """

    __slots__ = ("_digests",)

    def __init__(self, tokens: Iterable[str]) -> None:
        self._digests = [_digest(t) for t in tokens]

    def __bool__(self) -> bool:
        return bool(self._digests)

    def accepts(self, given: object) -> bool:
        """Whether ``given`` is one of the tokens (anything but a string is not)."""
        if not isinstance(given, str):
            return False
        got = _digest(given)
        ok = False
        for expected in self._digests:
            ok |= hmac.compare_digest(got, expected)
        return ok

    def __repr__(self) -> str:
        return f"<{len(self._digests)} tokens>"
