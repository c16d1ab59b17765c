"""Side effects that happen once: an HTTP client that sends the current
step's idempotency key with every request (docs/side-effects.md).

A step that was running when its process died runs again (S3); an API that
dedupes requests by an ``Idempotency-Key`` header then sees the second call
as the first one. :class:`IdempotentClient` is an ``httpx.AsyncClient`` that
sets that header from the step each request is sent in
(:meth:`stalwart.Context.next_idempotency_key`). It needs ``httpx``
(``pip install 'stalwart[effects]'``), which the core does not import.
"""

from .client import IdempotentClient, header_value

__all__ = ["IdempotentClient", "header_value"]
