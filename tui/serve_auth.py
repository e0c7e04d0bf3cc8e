"""Who may drive `perfconsole serve`: a secret token per server start, as Jupyter does it.

On a shared machine every account can reach 127.0.0.1, so loopback alone keeps no one out. The server
prints a URL carrying the token; the first request with it (`?token=...`) is answered with a cookie
and a redirect to the same page without the token, so the token leaves the address bar and the
history, and the page's own requests (scripts, the font, the websocket) carry the cookie instead. Any
request with neither a valid token nor a valid cookie gets 403, the websocket handshake included.

A websocket is not bound by the browser's same-origin rules, so its handshake must also come from
the server's own page: an Origin header naming another site is refused even with a valid cookie.
With no token at all (asked for explicitly, loopback only) the Host header must be a loopback name,
else a site that points its own name at 127.0.0.1 (DNS rebinding) would be same-origin with us.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from urllib.parse import quote, urlsplit

from aiohttp import hdrs, web
from aiohttp.abc import AbstractAccessLogger

TOKEN_ENV = "PERFCONSOLE_TOKEN"
TOKEN_PARAM = "token"
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def choose_token(flag: str | None, environ: dict[str, str]) -> str:
    """--token if given (even empty: that is the explicit "no token"), else $PERFCONSOLE_TOKEN if it is
    not empty (an unset variable expanded into it must not turn authentication off), else a new random
    one, 256 bits, URL-safe."""
    if flag is not None:
        return flag
    return environ.get(TOKEN_ENV) or secrets.token_urlsafe(32)


def url_with_token(url: str, token: str) -> str:
    """The address to open: the server's URL with the token in its query (percent-encoded)."""
    return f"{url}/?{TOKEN_PARAM}={quote(token, safe='')}" if token else f"{url}/"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _is_loopback_host(host: str) -> bool:
    name = urlsplit(f"//{host}").hostname or ""  # drops the port and an IPv6 literal's brackets
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class TokenGuard:
    """The aiohttp middleware that checks each request; one per server, for one token and one port."""

    def __init__(self, token: str, port: int, public_url: str) -> None:
        self.token = token
        # Cookies are per host, not per port: a server on another port must not read or clobber ours.
        self.cookie_name = f"perfconsole-serve-{port}"
        # The cookie holds a digest of the token, not the token, and it changes with the token.
        self.cookie_value = hmac.new(token.encode(), b"perfconsole serve cookie", hashlib.sha256).hexdigest()
        self.public_origin = _origin(public_url)

    def _token_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def _cookie_ok(self, request: web.Request) -> bool:
        given = request.cookies.get(self.cookie_name)
        return given is not None and hmac.compare_digest(given.encode(), self.cookie_value.encode())

    def _origin_ok(self, request: web.Request) -> bool:
        origin = request.headers.get(hdrs.ORIGIN)
        if origin is None:  # not a browser: it has to show the token like anyone else
            return True
        return origin.lower() in (f"{request.scheme}://{request.host}".lower(), self.public_origin)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        websocket = request.headers.get(hdrs.UPGRADE, "").lower() == "websocket"
        if websocket and not self._origin_ok(request):
            raise web.HTTPForbidden(text="403: this websocket was opened from another site's page\n")
        if not self.token:
            if not _is_loopback_host(request.host):
                raise web.HTTPForbidden(text="403: with no token this server answers loopback names only\n")
            return await handler(request)
        if self._token_ok(request.query.get(TOKEN_PARAM)):
            if websocket or request.method != "GET":
                return await handler(request)
            rest = request.rel_url.without_query_params(TOKEN_PARAM)
            response = web.Response(status=302, headers={hdrs.LOCATION: str(rest)})
            response.set_cookie(self.cookie_name, self.cookie_value, path="/", httponly=True, samesite="Strict")
            return response
        if self._cookie_ok(request):
            return await handler(request)
        raise web.HTTPForbidden(text="403: open the address with ?token=... that `perfconsole serve` printed "
                                     "when it started\n")


class ShortAccessLog(AbstractAccessLogger):
    """One short line a request: time, method, path (never the query, where the token travels), status."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time_s: float) -> None:
        path = request.raw_path.split("?", 1)[0]  # still percent-encoded, so no newline can forge a line
        self.logger.info("%s %s %s %s", time.strftime("%H:%M:%S"), request.method, path, response.status)


def plain_logging() -> None:
    """Log lines as they are, one per line on stderr (textual-serve's rich handler wraps them at 80)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
