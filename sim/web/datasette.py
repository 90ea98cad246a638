"""Datasette over a run (``protolab browse``): read-only, on localhost, with the kit's words.

The file is checked by the store first (a protolab run, a schema this program knows), then handed
to Datasette immutable (not even -wal/-shm side files appear; a run still being written, its -wal
live, is opened read-only instead). The metadata (descriptions, facets, canned queries, label
columns) is :mod:`sim.store.browse`; the ids that name rows of other tables become links here,
through a ``render_cell`` plugin registered in this process.

Only this machine's own pages are answered (:mod:`sim.web.guard`: a Host naming localhost or a name
given with ``--allow-host``; GET and HEAD only, so a POST to ``/-/insert`` is 405), and a client's bad
request never prints on the host's terminal (:mod:`sim.web.quiet`: Datasette's default error hook
prints a traceback for every 404; here a 4xx prints nothing and a server fault one line).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Callable, Iterable

__all__ = ["serve", "make_app"]

_PLUGIN = "protolab-links"
_QUIET = "protolab-quiet-errors"


def _register_plugins() -> None:
    from datasette.plugins import pm

    from . import links, quiet

    if not pm.is_registered(links):
        pm.register(links, name=_PLUGIN)
    if not pm.is_registered(quiet):
        pm.register(quiet, name=_QUIET)
    quiet.quiet_default()


def make_app(db: Path, store):
    """The Datasette instance for ``db`` (``store``: the run, already opened read-only and checked; None:
    ``db`` is a course gradebook, checked by :func:`sim.store.gradebook.open_gradebook`)."""
    from datasette.app import Datasette

    from ..store.browse import BIG_RUN, metadata

    _register_plugins()
    path = Path(db).resolve()
    if store is None:
        from ..store.gradebook import browse_metadata

        return Datasette(immutables=[str(path)], metadata=browse_metadata(path.stem, title=f"protolab gradebook {path.name}"),
                         settings={"default_page_size": 50, "facet_time_limit_ms": 5000, "sql_time_limit_ms": 5000,
                                   "allow_download": False, "suggest_facets": True},
                         cors=False)
    wal = Path(str(path) + "-wal")
    live = wal.exists() and wal.stat().st_size > 0
    name = path.stem
    scenario, policy = store.get_meta("scenario"), store.get_meta("policy")
    title = f"protolab run {path.name}" + (f": {scenario}" if scenario else "") + (f", {policy} policy" if policy else "")
    kw = {"files": [str(path)]} if live else {"immutables": [str(path)]}
    tasks = store.count_of("tasks")
    return Datasette(**kw, metadata=metadata(name, title=title, tasks=tasks),
                     # a small run's facets get the time a busy machine needs to show them
                     settings={"default_page_size": 50, "facet_time_limit_ms": 1000 if tasks > BIG_RUN else 5000,
                               "sql_time_limit_ms": 5000,
                               "allow_download": False, "suggest_facets": tasks <= BIG_RUN},
                     cors=False)


def serve(db: Path, store, *, port: int, ready: Callable[[str], None], host: str = "127.0.0.1",
          allow_hosts: Iterable[str] = ()) -> None:
    """Serve ``db`` until Ctrl-C (or SIGTERM); ``ready(url)`` is called once the socket listens and
    Datasette has started, so the URL printed answers. The port is bound before anything else
    starts: a port in use is refused in one line. Requests pass :mod:`sim.web.guard` first (Host:
    localhost or ``allow_hosts``; GET and HEAD only)."""
    import uvicorn

    from .guard import Guard, GuardedASGI
    from .ports import bind, url_of

    sock = bind(port, host)
    try:
        ds = make_app(db, store)
        guard = Guard(sock.getsockname()[1], allow_hosts)
        config = uvicorn.Config(GuardedASGI(ds.app(), guard, read_only=True), log_level="warning", lifespan="off",
                                access_log=False)
        server = uvicorn.Server(config)

        async def main() -> None:
            await ds.invoke_startup()
            await ds.refresh_schemas()
            ready(url_of(sock))
            await server.serve(sockets=[sock])

        try:
            asyncio.run(main())
        except KeyboardInterrupt:  # uvicorn shut down cleanly, then raised the signal again: that is the stop
            pass
    finally:
        sock.close()


def time_pages(db: Path, tables, repeat: int) -> dict:
    """Seconds per page of Datasette over ``db`` through its in-process client (no server, no port):
    ``/`` once, first, then the median of ``repeat`` fetches of each table's page (``bench web``)."""
    return asyncio.run(_time_pages(Path(db), tables, repeat))


async def _time_pages(db: Path, tables, repeat: int) -> dict:
    """Median seconds per table page through Datasette's in-process client; ``/`` timed once, first."""
    from ..store import Store

    store = Store.open(db, readonly=True)
    try:
        app = make_app(db, store)
    finally:
        store.close()
    if hasattr(app, "invoke_startup"):
        await app.invoke_startup()
    out = {}
    t0 = time.perf_counter()
    r = await app.client.get("/")
    out["/"] = time.perf_counter() - t0
    if r.status_code != 200:
        raise RuntimeError(f"Datasette answered {r.status_code} for /")
    for table in tables:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = await app.client.get(f"/{db.stem}/{table}")
            times.append(time.perf_counter() - t0)
            if r.status_code != 200:
                raise RuntimeError(f"Datasette answered {r.status_code} for /{db.stem}/{table}")
        out[table] = sorted(times)[len(times) // 2]
    return out
