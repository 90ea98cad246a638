"""The one socket a local server listens on: localhost unless asked otherwise, refused in one line
when the port is taken."""

from __future__ import annotations

import errno
import socket

from ..errors import InputError

__all__ = ["bind", "url_of"]

LOCAL = "127.0.0.1"


def bind(port: int, host: str = LOCAL) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free one). A port in use or one this user
    may not open is E_PORT_IN_USE / E_PORT_DENIED, naming what to do instead."""
    if not 0 <= port <= 65535:
        raise InputError(f"--port {port} is not a port; expected 0 (any free port) to 65535", code="E_USAGE")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise InputError(f"port {port} on {host} is in use; choose another with --port N (or --port 0 for any "
                             "free port)", code="E_PORT_IN_USE") from None
        if e.errno in (errno.EACCES, errno.EPERM):
            raise InputError(f"port {port} on {host} needs privileges this user lacks; choose one above 1023 with "
                             "--port N", code="E_PORT_DENIED") from None
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror}", code="E_PORT_UNAVAILABLE") from None
    sock.set_inheritable(False)
    return sock


def url_of(sock: socket.socket) -> str:
    """The address a browser opens for ``sock``."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"
