"""Who may speak to the local servers (``--serve`` and ``browse``): only a page of their own.

A server on localhost is still reachable from any web page the same browser opens: a page on another
site can open a WebSocket to it (browsers send no preflight for those), and a DNS-rebinding page can
read it under a name that resolves to 127.0.0.1. So every request is checked before the server
sees it:

* **Host**: the request must name localhost (``localhost``, ``127.0.0.1``, ``[::1]``), with or without
  the port being served, or a name given with ``--allow-host NAME`` (a classroom behind a proxy or a
  tunnel; on any port, the proxy's). Anything else, or no Host at all, is 403.
* **Origin** (WebSocket upgrades only): the page that opens the socket must be our own: ``http://`` an
  allowed host, on the port being served (or on the very authority the request's Host names, which
  is the page a proxy served). A missing Origin is refused too: every browser sends one.
* **Read-only** (``browse``): anything but GET and HEAD is 405; nothing is ever written.

A refusal is a plain-text 403/405 with a one-line body, and at most one line on the host's stderr,
the client's values shown quoted and cut short (they may hold terminal escapes). The checks are
plain functions (:class:`Guard`); :func:`aiohttp_middleware` (textual-serve) and :class:`GuardedASGI`
(Datasette under uvicorn) apply them. Each imports its web library only when called.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Callable, Iterable

__all__ = ["LOCAL_NAMES", "Guard", "check_allowed_host", "aiohttp_middleware", "GuardedASGI", "note", "one_line_log"]

#: the names of this machine a local page is served under
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")

# a Host header's or an Origin's authority: a name or IPv4 address, or an IPv6 address in brackets; a port
_AUTHORITY = re.compile(r"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?))(?::(?P<port>[0-9]{1,5}))?")
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#\s]+)")


def _authority(value: str) -> tuple[str, int | None] | None:
    """``(name, port or None)`` of ``host[:port]`` (IPv6 in brackets), lower case; None if malformed."""
    m = _AUTHORITY.fullmatch(value.strip().lower())
    if m is None:
        return None
    port = int(m["port"]) if m["port"] else None
    if port is not None and not 0 < port <= 65535:
        return None
    return (m["v6"] or m["name"]), port


def check_allowed_host(name: str) -> str:
    """A name given with ``--allow-host``, lower case, or :class:`~sim.errors.InputError` (E_USAGE):
    a host name or an address, without a scheme, a port or a path."""
    from ..errors import InputError

    parsed = _authority(name)
    if parsed is None or parsed[1] is not None:
        raise InputError(f"--allow-host {name!r} is not a host name; give a name or an address alone, such as "
                         "classroom.local or 192.168.1.20 (no scheme, port or path)", code="E_USAGE")
    return parsed[0]


def shown(value: str | None, limit: int = 60) -> str:
    """A client's value fit for the host's terminal: quoted (escapes visible), cut at ``limit``."""
    if value is None:
        return "none"
    return repr(value[:limit] + ("..." if len(value) > limit else ""))


def note(line: str) -> None:
    """One line on the host's stderr about a refused request."""
    sys.stderr.write(f"protolab: {line}\n")
    sys.stderr.flush()


class _OneLine(logging.Handler):
    """A log record as one line on stderr: its message and, for an exception, its type and what it
    says (cut short), never a traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                e = record.exc_info[1]
                said = " ".join(x.strip() for x in str(e).splitlines() if x.strip())
                text += f": {type(e).__name__}: {shown(said, 120)}"
            note(text)
        except Exception:  # noqa: BLE001 - a log line must never take the server down
            pass


def one_line_log(name: str) -> None:
    """The logger ``name`` (a web library's: aiohttp logs a client's malformed request with its
    traceback) says each warning or error in one line on stderr, and only there."""
    logger = logging.getLogger(name)
    if not any(isinstance(h, _OneLine) for h in logger.handlers):
        logger.addHandler(_OneLine(logging.WARNING))
    logger.propagate = False


class Guard:
    """The checks for a server on ``port``: ``names`` are the hosts besides localhost it answers to."""

    def __init__(self, port: int, names: Iterable[str] = ()):
        self.port = port
        self.names = frozenset(LOCAL_NAMES) | {n.lower() for n in names}

    def host_refusal(self, host: str | None) -> str | None:
        """Why a request with this Host header is refused, or None if it names this server."""
        if not host:
            return "no Host header"
        parsed = _authority(host)
        if parsed is None or parsed[0] not in self.names:
            return f"Host {shown(host)} is not this server (localhost; --allow-host NAME admits another name)"
        if parsed[0] in LOCAL_NAMES and parsed[1] is not None and parsed[1] != self.port:
            return f"Host {shown(host)} names another port than {self.port}"
        return None  # a name given with --allow-host: on any port (a proxy or a tunnel may serve it on its own)

    def origin_refusal(self, origin: str | None, host: str | None) -> str | None:
        """Why a WebSocket opened by a page of ``origin`` (the request's Host: ``host``) is refused, or
        None if the page is this server's own."""
        if not origin:
            return "a WebSocket without an Origin (only this server's own page may open one)"
        m = _ORIGIN.fullmatch(origin.strip().lower())
        parsed = _authority(m["authority"]) if m else None
        if parsed is None or parsed[0] not in self.names:
            return f"a WebSocket from another site's page (Origin {shown(origin)})"
        port = parsed[1] if parsed[1] is not None else (443 if m["scheme"] == "https" else 80)
        if port == self.port:
            return None
        # behind a proxy: the page came from the authority the request names (already checked above)
        if host is not None and m["authority"] == host.strip().lower():
            return None
        return f"a WebSocket from a page on another port (Origin {shown(origin)})"

    def refusal(self, method: str, headers: Callable[[str], str | None], *, websocket: bool,
                read_only: bool) -> tuple[int, str] | None:
        """``(status, reason)`` for a request that may not pass, or None. ``headers(name)``: a header's
        value (None when absent)."""
        host = headers("host")
        why = self.host_refusal(host)
        if why is None and websocket:
            why = self.origin_refusal(headers("origin"), host)
        if why is not None:
            return 403, why
        if read_only and method.upper() not in ("GET", "HEAD"):
            return 405, f"{shown(method)} refused: this server is read-only (GET and HEAD only)"
        return None


def aiohttp_middleware(guard: Guard, *, read_only: bool = False):
    """An aiohttp middleware applying ``guard`` to every request before its handler runs."""
    from aiohttp import web

    @web.middleware
    async def guarded(request, handler):
        upgrade = "websocket" in request.headers.get("Upgrade", "").lower()  # any hint of one: its Origin is checked
        refused = guard.refusal(request.method, request.headers.get, websocket=upgrade, read_only=read_only)
        if refused is not None:
            status, why = refused
            note(f"refused {request.method} {shown(request.path)}: {why}")
            return web.Response(status=status, text=_body(status, why), headers={"Allow": "GET, HEAD"} if status == 405
                                else None)
        return await handler(request)

    return guarded


def _body(status: int, why: str) -> str:
    return f"{status} {'Forbidden' if status == 403 else 'Method Not Allowed'}: {why}\n"


class GuardedASGI:
    """An ASGI app that applies ``guard`` before ``app`` sees a request (``read_only``: GET and HEAD
    only), and answers a plain 500 with one line on stderr for an exception that escapes ``app``
    (instead of the server's traceback)."""

    def __init__(self, app, guard: Guard, *, read_only: bool = True, websockets: bool = False):
        self.app = app
        self.guard = guard
        self.read_only = read_only
        self.websockets = websockets  # False: ``app`` has none, so an upgrade is refused here

    async def __call__(self, scope, receive, send):
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        raw = {}
        for k, v in scope.get("headers") or ():
            raw.setdefault(k.decode("latin-1").lower(), v.decode("latin-1"))
        method = scope.get("method", "GET")
        refused = self.guard.refusal(method, raw.get, websocket=kind == "websocket", read_only=self.read_only)
        path = scope.get("path", "")
        if refused is None and kind == "websocket" and not self.websockets:
            refused = 403, "this server has no WebSocket"
        if refused is not None:
            status, why = refused
            note(f"refused {method if kind == 'http' else 'WebSocket'} {shown(path)}: {why}")
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": why[:120]})
                return None
            return await _plain(send, status, _body(status, why), allow=status == 405)
        started = False

        async def watched(message):
            nonlocal started
            if message.get("type") == "http.response.start":
                started = True
            await send(message)

        try:
            return await self.app(scope, receive, watched)
        except Exception as e:  # noqa: BLE001 - a server fault: one line here, never a traceback for a client
            note(f"{method} {shown(path)} failed: {type(e).__name__}: {shown(str(e), 120)}")
            if kind == "http" and not started:
                await _plain(send, 500, "500 Internal Server Error\n")
            return None


async def _plain(send, status: int, body: str, *, allow: bool = False) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body.encode())).encode())]
    if allow:
        headers.append((b"allow", b"GET, HEAD"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body.encode()})
