"""Who may use the inspector, and what a page may do in the browser.

The inspector can signal and cancel runs, so it is guarded like an admin
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

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, Collection
from urllib.parse import urlsplit

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

__all__ = ["CSP", "Guard", "is_loopback", "new_token"]

TOKEN_COOKIE = "stalwart_token"
CSRF_FIELD = "csrf"

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # "no-referrer" makes Chromium send "Origin: null"
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def new_token() -> str:
    return secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine only."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_of(netloc: str) -> str:
    """The host name of a ``Host`` header, without its port."""
    return (urlsplit(f"//{netloc}").hostname or "").lower()


class Guard:
    """The checks every request passes before a page sees it.

    ``token``: None serves without one (loopback only, see :func:`serve`).
    ``hosts``: the host names a request may name (None: any, for a server
    bound to a public address, where the token is the guard).
    """

    def __init__(self, token: str | None, hosts: Collection[str] | None) -> None:
        self.token = token
        self.csrf = new_token()
        self.hosts = None if hosts is None else frozenset(h.strip("[]").lower() for h in hosts)

    async def __call__(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await self._check(request)
        if response is None:
            request.state.csrf = self.csrf
            response = await call_next(request)
        for name, value in _HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    async def _check(self, request: Request) -> Response | None:
        """A refusal, a redirect that sets the token cookie, or None to serve."""
        host = _host_of(request.headers.get("host", ""))
        if self.hosts is not None and host not in self.hosts:
            return PlainTextResponse(
                f"this inspector answers to {', '.join(sorted(self.hosts))} only", 421
            )
        if self.token is None:
            return None
        given = request.query_params.get("token")
        if given is not None and _same(given, self.token):
            # Set the cookie and drop the token from the address bar.
            query = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = URL(request.url.path).include_query_params(**dict(query))
            redirect = RedirectResponse(str(target) if query else request.url.path, 303)
            redirect.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
            return redirect
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer ") and _same(bearer[7:].strip(), self.token):
            return None
        if _same(request.cookies.get(TOKEN_COOKIE, ""), self.token):
            return None
        return PlainTextResponse(
            "this inspector needs its access token: open the address it printed at start "
            "(…/?token=…), or send 'Authorization: Bearer <token>'",
            401,
        )


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def check_post(request: Request, form_csrf: object) -> str | None:
    """Why a POST is refused (None: it may act).

    The form must carry this server's CSRF token; a browser's ``Origin``,
    when sent, must be this server (a form on another site can do neither).
    """
    expected = getattr(request.state, "csrf", "")
    if not isinstance(form_csrf, str) or not expected or not _same(form_csrf, expected):
        return "the form's CSRF token is missing or wrong: reload the page and try again"
    origin = request.headers.get("origin")
    if origin is not None and origin != "null":
        own = request.headers.get("host", "")
        if urlsplit(origin).netloc.lower() != own.lower():
            return f"a form from {origin} may not act here"
    elif origin == "null":
        return "a form from an opaque origin may not act here"
    return None
