"""A Datasette plugin, registered in this process by :mod:`sim.web.datasette`: a client's bad
request never prints a traceback on the host's terminal.

Datasette's default ``handle_exception`` hook (which still draws the error page) prints rich's
traceback for every error, a 404 included, then traceback's for a 500: :func:`quiet_default` switches
both printers off in its module, and the hook here says the one line that matters, for a server
fault only (a 4xx is the client's business and prints nothing).
"""

from __future__ import annotations

import types

from datasette import hookimpl
from datasette.utils.asgi import Base400
from datasette.views.base import DatasetteError

from .guard import note, shown


@hookimpl(tryfirst=True)
def handle_exception(datasette, request, exception):
    if not isinstance(exception, (Base400, DatasetteError)):
        note(f"{request.method} {shown(request.path)} failed: {type(exception).__name__}: {shown(str(exception), 120)}")
    return None  # Datasette's default hook answers with its error page


def quiet_default() -> None:
    """Datasette's default error hook prints no traceback in this process (which serves Datasette only)."""
    from datasette import handle_exception as default

    default.rich = None
    default.traceback = types.SimpleNamespace(print_exc=lambda *a, **k: None)
