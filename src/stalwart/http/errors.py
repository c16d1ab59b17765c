"""What an HTTP surface answers when its own code fails: one middleware for
the API and the inspector."""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .access import SECURITY_HEADERS

__all__ = ["ServerErrors"]


class ServerErrors:
    """ASGI middleware: an exception no handler took is answered as every
    other error is, a JSON problem (500: ``{"error": ..., "fields": []}``)
    with the security headers every other response carries, naming its type
    and nothing of its text (which may quote ledger data); then raised on,
    for the server to log. ``who`` names the surface in the message.

    Starlette's own error middleware sits outside every middleware an app
    is given, the Guard that adds the headers included, and answers
    ``text/plain`` without them: this one is the first an app is given, so
    it is inside that one and outside the Guard (a failing Guard included).
    After the response has started nothing can be said; the exception is
    raised on alone.
    """

    def __init__(self, app: ASGIApp, who: str) -> None:
        self.app = app
        self.who = who

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if not started:
                message = (
                    f"internal error ({type(exc).__name__}): {self.who} failed to answer "
                    "this request; its log has the details"
                )
                response = JSONResponse({"error": message, "fields": []}, 500)
                response.headers.update(SECURITY_HEADERS)
                await response(scope, receive, send)
            raise
