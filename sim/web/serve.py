"""The TUI served to a browser (``protolab demo regression --serve``, ``protolab tui ... --serve``),
through textual-serve.

Each browser tab starts its own process of the same command (textual-serve's web driver speaks to
the page over a websocket), so two tabs are two independent runs; a live run writes its file in a
temporary folder of the server's, one file per tab, removed when the server stops. The server
listens on localhost only, prints its URL once it listens, and Ctrl-C (or SIGTERM) stops it and the
apps of open tabs: nothing is left running.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import shutil
import sys
import tempfile
from typing import Callable

from .ports import bind, url_of

__all__ = ["served_here", "serve_tui", "WEB_DRIVER"]

#: what textual-serve sets TEXTUAL_DRIVER to in the processes it starts
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"


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
              host: str = "127.0.0.1") -> None:
    """Serve ``protolab ARGV`` (a TUI command) until Ctrl-C. ``run_db``: the option that names the
    file a live run writes (``--db``): each tab then writes its own file in a temporary folder.
    ``ready(url)`` is called once the server listens."""
    from aiohttp import web
    from textual_serve import server as ts
    from textual_serve.app_service import AppService
    from textual_serve.server import Server

    sock = bind(port, host)
    url = url_of(sock)
    folder = tempfile.mkdtemp(prefix="protolab-serve-") if run_db else None
    command = "exec " + shlex.join([sys.executable, "-m", "sim.cli", *argv])
    if run_db:  # the shell gives each tab's process its own file: $$ is its pid
        command += f" {run_db} {shlex.quote(folder)}/run-$$.db"

    started: list[int] = []
    services: list = []

    class _Tracked(AppService):
        """textual-serve's process for one tab, remembered: the server ends them all before it stops."""

        async def _open_app_process(self, width: int = 80, height: int = 24):
            process = await super()._open_app_process(width, height)
            started.append(process.pid)
            services.append(self)
            return process

    async def finish(service) -> None:
        process = service._process
        if process is None:
            return
        try:
            await asyncio.wait_for(service.stop(), 5)  # the app is asked to quit, as a closed tab does
        except Exception:  # noqa: BLE001 - a tab half open or already gone: ended below either way
            pass
        if process.returncode is None:
            try:
                process.terminate()
                await asyncio.wait_for(process.wait(), 5)
            except ProcessLookupError:
                pass
            except asyncio.TimeoutError:
                process.kill()
        await process.wait()  # reaped here, while the loop that started it still runs

    class _Server(Server):
        def initialize_logging(self) -> None:  # textual-serve's own banner and INFO lines stay quiet
            logging.getLogger("textual-serve").setLevel(logging.WARNING)

        async def on_startup(self, app) -> None:
            ready(url)

        async def on_shutdown(self, app) -> None:  # before aiohttp cancels the tabs' handlers
            await asyncio.gather(*(finish(s) for s in services), return_exceptions=True)

        def serve(self, debug: bool = False) -> None:
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

    plain = ts.AppService
    ts.AppService = _Tracked  # the server module makes one per websocket under this name
    try:
        _Server(command, host=host, port=sock.getsockname()[1], title=title, public_url=url.rstrip("/")).serve()
    finally:
        ts.AppService = plain
        sock.close()
        _end(started)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
