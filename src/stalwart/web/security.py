"""Who may use the inspector, and what a page may do in the browser.

The inspector can signal, cancel and fork runs, so it is guarded like an admin
console, even on a laptop:

- **Host check.** Bound to a loopback address, only requests naming a
  loopback host are served: a web page elsewhere that points its own domain
  at 127.0.0.1 (DNS rebinding) cannot read the pages.
- **Access token.** Required on every request when the server is bound to
  another address (or when one is given). It arrives once as ``?token=``,
  which sets an HttpOnly, SameSite=Strict cookie and redirects to the same
  address without it (so it does not stay in the history), or as an
  ``Authorization: Bearer`` header for scripts.
- **CSRF.** Every action is a POST whose form carries this server's random
  CSRF token (made at start, written into each form; a page on another site
  cannot read it), and whose ``Origin``, when the browser sends one, is this
  server. One token per server, not per visit: there is no cookie to race
  when a page and its live updates load at once.
- **Content-Security-Policy.** Scripts and styles only from the package's
  own static files: no inline script runs, even if escaping failed somewhere.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Collection, Sequence
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from ..http import access

__all__ = ["Guard", "local_target", "new_token"]

TOKEN_COOKIE = "stalwart_token"
CSRF_FIELD = "csrf"


def new_token() -> str:
    return secrets.token_urlsafe(24)


class Guard:
    """The checks every request passes before a page sees it.

    ``token``: None serves without one (loopback only, see :func:`serve`);
    one too weak to guard anything is refused (:func:`.access.check_tokens`).
    ``hosts``: the host names a request may name (None: any, for a server
    bound to a public address, where the token is the guard).
    """

    def __init__(self, token: str | None, hosts: Collection[str] | None) -> None:
        self.token = token
        self._tokens = access.Tokens(
            () if token is None else access.check_tokens([token], "token=")
        )
        self.csrf = new_token()
        self.hosts = access.host_names(hosts)

    async def __call__(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await self._check(request)
        if response is None:
            request.state.csrf = self.csrf
            response = await call_next(request)
        for name, value in access.SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    async def _check(self, request: Request) -> Response | None:
        """A refusal, a redirect that sets the token cookie, or None to serve."""
        host = access.host_of(request.headers.get("host", ""))
        if self.hosts is not None and host not in self.hosts:
            return PlainTextResponse(
                f"this inspector answers to {', '.join(sorted(self.hosts))} only", 421
            )
        if self.token is None:
            return None
        given = request.query_params.get("token")
        if self._tokens.accepts(given):
            # Set the cookie and drop the token from the address bar.
            query = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            redirect = RedirectResponse(local_target(request.url.path, query), 303)
            redirect.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
            return redirect
        if self._tokens.accepts(access.bearer(request.headers.get("authorization", ""))):
            return None
        if self._tokens.accepts(request.cookies.get(TOKEN_COOKIE)):
            return None
        return PlainTextResponse(
            "this inspector needs its access token: open the address it printed at start "
            "(…/?token=…), or send 'Authorization: Bearer <token>'",
            401,
        )


def local_target(path: str, query: Sequence[tuple[str, str]] = ()) -> str:
    """A redirect's ``Location`` that is a path on this server, whatever the
    request's path held.

    A browser reads ``//host/…`` (and ``/\\host``, and either with tabs or
    newlines between, which it drops) as another site: leading slashes and
    backslashes become one slash, and everything but ``/`` and the unreserved
    characters is percent-encoded, so no character in the target can turn it
    into an address elsewhere.
    """
    target = quote("/" + path.lstrip("/\\"), safe="/")
    return f"{target}?{urlencode(query)}" if query else target


def check_post(request: Request, form_csrf: object) -> str | None:
    """Why a POST is refused (None: it may act).

    The form must carry this server's CSRF token; a browser's ``Origin``,
    when sent, must be this server (a form on another site can do neither).
    """
    expected = getattr(request.state, "csrf", "")
    if not expected or not access.Tokens((expected,)).accepts(form_csrf):
        return "the form's CSRF token is missing or wrong: reload the page and try again"
    origin = request.headers.get("origin")
    if origin == "null":
        return "a form from an opaque origin may not act here"
    if origin is not None and not access.same_origin(origin, request.headers.get("host", "")):
        return f"a form from {origin} may not act here"
    return None
