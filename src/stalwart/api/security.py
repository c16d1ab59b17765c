"""Who may use the API, checked on every request before a route sees it.

The API starts, signals and cancels runs, so every request carries a bearer
token (``Authorization: Bearer <token>``), compared in constant time with
each token the server was given. Serving without tokens is allowed only on
a loopback address and only when asked for explicitly (``--no-auth``);
then two checks stand in for the token against a web page in the user's
browser:

- **Host check.** A loopback server answers only to loopback host names: a
  page that points its own domain at 127.0.0.1 (DNS rebinding) is refused.
- **No simple cross-site request.** A POST with a body must say
  ``Content-Type: application/json`` (a form on another site cannot send that without a
  CORS preflight, which this server never grants), and a browser's
  ``Origin``, when sent, must be this server.

Static files given with ``static=`` (a page calling the API) are public:
they are the application's own files and hold no ledger data. Tokens are
never logged nor echoed: a refusal says what was wrong, not what was sent.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from urllib.parse import quote

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..http import access

__all__ = ["API_PREFIXES", "Guard"]

API_PREFIXES = ("/runs", "/policies", "/conversations", "/openapi.json")

_HEADERS = [(k.lower().encode(), v.encode()) for k, v in access.SECURITY_HEADERS.items()]


def _refuse(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "fields": []}, status, headers=headers)


class Guard:
    """ASGI middleware: host, token, request-shape checks, and response headers.

    ``tokens``: accepted bearer tokens; empty serves without one, which
    needs ``hosts`` (the loopback names a request may address). ``hosts``
    None answers to any host name (a server bound to a public address, where
    the token is the guard). ``static``: whether non-API paths are static
    files (public).

    It also keeps percent-encoded path segments encoded for the API routes
    (``/runs/a%2Fb`` is run ``a/b``, not a path ``/runs/a/b``): run ids may
    contain ``/``; each route decodes its own segment.
    """

    def __init__(
        self,
        app: ASGIApp,
        tokens: Sequence[str],
        hosts: Collection[str] | None,
        static: bool = False,
    ) -> None:
        if not tokens and hosts is None:
            raise ValueError("an API without tokens answers to loopback host names only")
        self.app = app
        self._tokens = access.Tokens(access.check_tokens(tokens, "tokens="))
        self.hosts = access.host_names(hosts)
        self.static = static

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in _HEADERS if k not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        path = _route_path(scope)
        api = not self.static or any(path == p or path.startswith(f"{p}/") for p in API_PREFIXES)
        refusal = self._check(scope, Headers(scope=scope), api)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        if api:
            scope = {**scope, "path": _encoded_path(scope)}
        await self.app(scope, receive, send_with_headers)

    def _check(self, scope: Scope, headers: Headers, api: bool) -> JSONResponse | None:
        """Why the request is refused, or None to serve it."""
        host = access.host_of(headers.get("host", ""))
        if self.hosts is not None and host not in self.hosts:
            return _refuse(421, f"this API answers to {', '.join(sorted(self.hosts))} only")
        method = scope["method"]
        if not api and method in ("GET", "HEAD"):
            return None  # the application's static page
        given = access.bearer(headers.get("authorization", ""))
        if self._tokens and not self._tokens.accepts(given):
            return _refuse(
                401,
                "this API needs a bearer token: send 'Authorization: Bearer <token>' "
                "with one of the tokens the server was started with",
                {"WWW-Authenticate": 'Bearer realm="stalwart"'},
            )
        origin = headers.get("origin")
        if origin is not None and not access.same_origin(origin, headers.get("host", "")):
            return _refuse(403, f"requests from the page at {origin[:200]!r} are not accepted here")
        if method == "POST" and _has_body(headers):
            kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if kind != "application/json":
                return _refuse(
                    415, "a POST carries a JSON body: send 'Content-Type: application/json'"
                )
        return None


def _has_body(headers: Headers) -> bool:
    """Whether a request carries a body (a bodiless POST, a cancel, needs no type)."""
    return "transfer-encoding" in headers or headers.get("content-length", "0") != "0"


def _route_path(scope: Scope) -> str:
    """The path the router matches: without the ``root_path`` of a mount
    (``Mount("/api", app)`` passes ``/api/runs`` with root ``/api``), so an
    API path is told from a static file's wherever the API is mounted."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :] or "/"
    return path


def _encoded_path(scope: Scope) -> str:
    """The request path with its percent-escapes kept, for routes whose
    segments decode themselves (a run id may hold ``/``)."""
    raw = scope.get("raw_path")
    if not isinstance(raw, bytes):
        return quote(scope["path"], safe="/")  # a server without raw_path: "/" in ids is lost
    text = raw.decode("latin-1")
    root = scope.get("root_path", "")
    if root and text.startswith(root):
        text = text[len(root) :]
    return text or "/"
