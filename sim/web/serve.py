"""The TUI served to a browser (``protolab demo regression --serve``, ``protolab tui ... --serve``),
through textual-serve.

Each browser tab starts its own process of the same command (textual-serve's web driver speaks to
the page over a websocket), so two tabs are two independent runs; a live run writes its file in a
temporary folder of the server's, one file per tab, removed when the server stops. The server
listens on localhost only, prints its URL once it listens, and Ctrl-C (or SIGTERM) stops it and the
apps of open tabs: nothing is left running.

Only this server's own page drives it (:mod:`sim.web.guard`): a request whose Host is not localhost
(or a name given with ``--allow-host``) is 403, and so is a WebSocket opened by a page of another
Origin, before any process starts. At most ``max_sessions`` tabs run at once: one more is 503 and
starts nothing. A tab's process ends with its socket: asked to quit, terminated after
:data:`QUIT_GRACE` seconds, killed :data:`TERM_GRACE` seconds later, and reaped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import shutil
import sys
import tempfile
from typing import Callable, Iterable

from .ports import bind, url_of

__all__ = ["served_here", "serve_tui", "WEB_DRIVER", "MAX_SESSIONS", "TEMPLATES"]

#: the page the server hands a browser: textual-serve's, with its font served here (no request leaves the
#: machine: a room without a network once waited on fonts.googleapis.com before the first frame) and the
#: keyboard given to the terminal without a click
TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
#: what textual-serve sets TEXTUAL_DRIVER to in the processes it starts
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"
#: tabs served at once unless ``--max-sessions`` says otherwise (each is a process of its own)
MAX_SESSIONS = 4
#: seconds a tab's app has to quit on its own once its socket closed, then to end on SIGTERM
QUIT_GRACE = 1.0
TERM_GRACE = 2.0


def _end(pids: list[int], grace: float = 5.0) -> None:
    """Make sure every tab's process has ended: a tab still open when the server stopped gets SIGTERM
    (the app unwinds as on Ctrl-C), SIGKILL after ``grace`` seconds; each is reaped, not left a zombie."""
    import signal
    import time

    def alive(pid: int) -> bool:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return False
        except ChildProcessError:  # reaped already (asyncio's child watcher)
            pass
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    left = [p for p in pids if alive(p)]
    for pid in left:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while left:
        left = [p for p in left if alive(p)]
        if left and time.monotonic() > deadline:
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            deadline = float("inf")
        if left:
            time.sleep(0.02)


def served_here() -> bool:
    """True in a process textual-serve started for a browser tab: the TUI runs although stdin and
    stdout are pipes (the web driver's), and nothing else may print to stdout."""
    return os.environ.get("TEXTUAL_DRIVER", "") == WEB_DRIVER


def serve_tui(argv: list[str], *, port: int, title: str, ready: Callable[[str], None], run_db: str | None = None,
              host: str = "127.0.0.1", allow_hosts: Iterable[str] = (), max_sessions: int = MAX_SESSIONS) -> None:
    """Serve ``protolab ARGV`` (a TUI command) until Ctrl-C. ``run_db``: the option that names the
    file a live run writes (``--db``): each tab then writes its own file in a temporary folder.
    ``ready(url)`` is called once the server listens. ``allow_hosts``: Host names answered besides
    localhost; ``max_sessions``: tabs served at once."""
    from aiohttp import web
    from textual_serve import server as ts
    from textual_serve.app_service import AppService
    from textual_serve.server import Server

    from .guard import Guard, aiohttp_middleware, note, one_line_log, shown

    sock = bind(port, host)
    url = url_of(sock)
    guard = Guard(sock.getsockname()[1], allow_hosts)
    folder = tempfile.mkdtemp(prefix="protolab-serve-") if run_db else None
    command = "exec " + shlex.join([sys.executable, "-m", "sim.cli", *argv])
    if run_db:  # the shell gives each tab's process its own file: $$ is its pid
        command += f" {run_db} {shlex.quote(folder)}/run-$$.db"

    started: list[int] = []
    services: list = []
    sessions: set[object] = set()  # the tabs being served, from the socket's upgrade until the process is reaped

    class _Tracked(AppService):
        """textual-serve's process for one tab, remembered: the server ends them all before it stops."""

        async def _open_app_process(self, width: int = 80, height: int = 24):
            process = await super()._open_app_process(width, height)
            started.append(process.pid)
            services.append(self)
            return process

    async def finish(service, quit_grace: float = 5.0, term_grace: float = 5.0) -> None:
        """End a tab's process: asked to quit (as a closed tab does), SIGTERM after ``quit_grace``
        seconds, SIGKILL ``term_grace`` seconds later; reaped here, while the loop that started it runs."""
        process = service._process
        if process is None:
            return
        try:
            await asyncio.wait_for(service.stop(), quit_grace)
        except Exception:  # noqa: BLE001 - a tab half open or already gone: ended below either way
            pass
        if process.returncode is None:
            try:
                process.terminate()
                await asyncio.wait_for(process.wait(), term_grace)
            except ProcessLookupError:
                pass
            except asyncio.TimeoutError:
                process.kill()
        await process.wait()
        task = service._task  # its reader, left running if stop() timed out
        if task is not None and not task.done():
            task.cancel()

    def _forget(service) -> None:
        """A tab whose process has been reaped: not the server's to end any more (its pid may be reused)."""
        if service in services:
            services.remove(service)
        if service._process is not None and service._process.pid in started:
            started.remove(service._process.pid)

    class _Server(Server):
        def initialize_logging(self) -> None:  # textual-serve's own banner and INFO lines stay quiet
            logging.getLogger("textual-serve").setLevel(logging.WARNING)
            # aiohttp's errors for a client's malformed request (no Host, a bad header) are one line each
            for name in ("aiohttp.server", "aiohttp.web", "textual-serve"):
                one_line_log(name)

        async def _make_app(self):
            app = await super()._make_app()
            app.middlewares.append(aiohttp_middleware(guard))
            return app

        async def on_startup(self, app) -> None:
            ready(url)

        async def handle_index(self, request):
            """The page, its websocket's address under the name the browser used (the guard has checked
            it): a page opened as localhost, or through a classroom's proxy, speaks to its own origin.
            textual-serve builds the address from ``public_url``; the page is drawn before any other
            request runs (nothing is awaited in between), so setting it here is safe."""
            self.public_url = f"http://{request.host}"
            return await super().handle_index(request)

        async def handle_websocket(self, request):
            """textual-serve's handler, with the cap on tabs and the tab's process ended with its socket.
            (The Origin was checked by the guard before this runs.)"""
            websocket = web.WebSocketResponse(heartbeat=15)
            if not websocket.can_prepare(request).ok:
                return web.Response(status=400, text="400 Bad Request: this address takes a WebSocket\n")
            if len(sessions) >= max_sessions:
                note(f"refused a tab: {len(sessions)} of --max-sessions {max_sessions} are open")
                return web.Response(status=503, text=f"503 Service Unavailable: {len(sessions)} tabs are open, the "
                                    f"most this server runs at once (--max-sessions {max_sessions}); close one\n")
            me = object()
            sessions.add(me)
            width = ts.to_int(request.query.get("width", "80"), 80)
            height = ts.to_int(request.query.get("height", "24"), 24)
            service = None
            try:
                await websocket.prepare(request)
                service = _Tracked(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                   close=websocket.close, download_manager=self.download_manager, debug=self.debug)
                await service.start(width, height)
                await self._process_messages(websocket, service)
            except asyncio.CancelledError:
                raise
            except ConnectionError:  # the client went away: nothing to say
                pass
            except Exception as e:  # noqa: BLE001 - a client's bad message: one line, the tab ends
                note(f"a tab ended on a bad message: {type(e).__name__}: {shown(str(e), 120)}")
            finally:
                try:
                    if service is not None:
                        await asyncio.shield(finish(service, QUIT_GRACE, TERM_GRACE))
                        _forget(service)
                finally:
                    sessions.discard(me)
                    if websocket.prepared and not websocket.closed:
                        try:
                            await websocket.close()
                        except ConnectionError:
                            pass
            if not websocket.prepared:  # the upgrade itself failed (the client left): aiohttp answers this instead
                return web.Response(status=400, text="400 Bad Request: the WebSocket could not be opened\n")
            return websocket

        async def on_shutdown(self, app) -> None:  # before aiohttp cancels the tabs' handlers
            await asyncio.gather(*(finish(s) for s in services), return_exceptions=True)

        def serve(self, debug: bool = False) -> None:
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            import signal

            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.request_exit)
            try:
                web.run_app(self._make_app(), sock=sock, handle_signals=False, loop=loop, print=lambda *a: None,
                            shutdown_timeout=5)
            finally:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)
                loop.close()

    try:
        _Server(command, host=host, port=sock.getsockname()[1], title=title, public_url=url.rstrip("/"),
                templates_path=TEMPLATES).serve()
    finally:
        sock.close()
        _end(started)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
