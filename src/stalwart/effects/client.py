"""IdempotentClient: an ``httpx.AsyncClient`` whose requests carry the
idempotency key of the step they are sent in.

The key of a request is the step's numbered key
(:meth:`~stalwart.core.context.Context.next_idempotency_key`):
``<run id>:<step key>/<n>``, ``n`` counting the step's requests from 1 in
the order they are sent, again from 1 each time the step executes. So a
step that runs again (a retry, a run resumed after its process died) sends
each request with the key it had the first time, and an API that dedupes by
key performs it once.

The step is found when a request is sent, not when the client is made
(:func:`~stalwart.core.policy.current_context`), so one client can serve
every step of a process. A request sent outside any step has no key to
send: it is refused, unless it carries the header already. A header the
caller set is sent as it is and takes no number.

A header carries ASCII only, and a space at either end of it is lost on the
way: a key (a run id) holding a space, ``%`` or a character outside ASCII
is sent percent-encoded (:func:`header_value`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from ..core.policy import current_context

__all__ = ["IdempotentClient", "header_value"]

#: The header most APIs that dedupe requests read (Stripe's, the IETF draft's).
HEADER = "Idempotency-Key"

# Sent as they are: printable ASCII but the space, and ``%``, which marks an
# encoded character (so an encoded key never equals one sent as it is).
_PLAIN = frozenset(chr(c) for c in range(0x21, 0x7F)) - {"%"}
_SAFE = "".join(sorted(_PLAIN))


def header_value(key: str) -> str:
    """``key`` as an HTTP header carries it: as it is when every character
    is printable ASCII other than the space and ``%``; else with each other
    character percent-encoded as UTF-8 (``commande-é:1/1`` is sent as
    ``commande-%C3%A9:1/1``). Two keys never give one value."""
    if _PLAIN.issuperset(key):
        return key
    return quote(key, safe=_SAFE)


class IdempotentClient(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` that sends the current step's idempotency key
    with every request. It takes every argument ``httpx.AsyncClient`` takes,
    and ``header``: the header's name, for an API that reads another one.
    """

    def __init__(self, *, header: str = HEADER, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.header = header

    async def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        """Send ``request`` with the step's next idempotency key in
        :attr:`header`, unless it has one; taken before anything is awaited,
        so requests started together (``asyncio.gather``) keep their numbers
        on every execution."""
        if self.header not in request.headers:
            ctx = current_context()
            if ctx is None:
                # Named without its query and user info, which may hold credentials.
                url = request.url.copy_with(userinfo=b"", query=None, fragment=None)
                raise RuntimeError(
                    f"{request.method} {url}: sent outside a step, so there "
                    f"is no idempotency key for its {self.header} header; send it "
                    "from a policy a run executes, or set the header yourself"
                )
            request.headers[self.header] = header_value(ctx.next_idempotency_key())
        return await super().send(request, **kwargs)
