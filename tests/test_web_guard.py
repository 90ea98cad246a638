"""The browser faces admit only their own page (issue 43, part 4): ``demo regression --serve`` and
``browse`` answer a request only when its Host names localhost (or a name given with --allow-host), a
WebSocket only from the server's own Origin, at most --max-sessions tabs at once; a tab's process ends
with its socket; a client's bad request is a clean 4xx and never a traceback on the host's terminal.

The servers are started as a person starts them, and every wait is on what they say: the URL line
printed once they listen, a tab's first screen, a process's exit (a pidfd becoming readable)."""

import asyncio
import http.client
import os
import select
import signal
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import run_cli
from servers import children_of as _children
from servers import server as _server

from sim.runner import run_scenario
from sim.scenario import load_scenario
from sim.web.guard import Guard

# ------------------------------------------------------------------------------------------ the checks


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1", "127.0.0.1:8000", "[::1]", "[::1]:8000",
                                  "LOCALHOST:8000", "class.local", "class.local:8000",
                                  "class.local:9000"])  # a name given with --allow-host: on a proxy's port too
def test_a_host_naming_this_server_passes(host):
    assert Guard(8000, ["class.local"]).host_refusal(host) is None


@pytest.mark.parametrize("host", [None, "", "evil.example", "evil.example:8000", "localhost:8001", "127.0.0.2:8000",
                                  "localhost.evil.example", "127.0.0.1.nip.io:8000", "[::2]:8000", "::1",
                                  "localhost:8000@evil", "local host", "class.local:99999"])
def test_any_other_host_is_refused(host):
    assert Guard(8000, ["class.local"]).host_refusal(host)


@pytest.mark.parametrize("origin,host", [("http://127.0.0.1:8000", "127.0.0.1:8000"), ("http://localhost:8000", "127.0.0.1:8000"),
                                         ("http://[::1]:8000", "[::1]:8000"),
                                         ("http://class.local", "class.local"),  # a proxy on port 80
                                         ("http://class.local:9000", "class.local:9000")])
def test_the_servers_own_origin_may_open_a_websocket(origin, host):
    assert Guard(8000, ["class.local"]).origin_refusal(origin, host) is None


@pytest.mark.parametrize("origin", [None, "", "null", "http://evil.example:8000", "http://evil.example",
                                    "http://localhost:8001", "http://localhost", "file://", "http://localhost:8000.evil",
                                    "http://127.0.0.1:8000/x"])
def test_a_websocket_from_any_other_page_is_refused(origin):
    assert Guard(8000).origin_refusal(origin, "127.0.0.1:8000")


def test_a_read_only_server_takes_get_and_head_only():
    g = Guard(8000)
    headers = {"host": "localhost:8000"}.get
    assert g.refusal("GET", headers, websocket=False, read_only=True) is None
    assert g.refusal("HEAD", headers, websocket=False, read_only=True) is None
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        assert g.refusal(method, headers, websocket=False, read_only=True)[0] == 405
    assert g.refusal("POST", headers, websocket=False, read_only=False) is None
    assert g.refusal("GET", {"host": "evil.example"}.get, websocket=False, read_only=True)[0] == 403


# ------------------------------------------------------------------------------------------ helpers


def _request(url: str, path: str = "/", *, method: str = "GET", host: str | None = None,
             headers: dict | None = None) -> tuple[int, str]:
    """(status, body) of one request to the server at ``url``, with the Host header ``host`` if given."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        h = dict(headers or {})
        if host is not None:
            h["Host"] = host
        conn.request(method, path, body=b"" if method == "POST" else None, headers=h)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


#: requests no browser sends, each with the first word of the status line it must get (or "" if the
#: server may just close the connection): none may print more than a line on the server's terminal
MALFORMED = [
    (b"GARBAGE\r\n\r\n", "400"),
    (b"GET / HTTP/1.0\r\n\r\n", "403"),  # no Host at all
    (b"GET / HTTP/1.1\r\nHost: localhost\x1b[31m\r\n\r\n", "40"),  # a terminal escape in the Host
    (b"GET / HTTP/1.1\r\nHost: localhost\r\nContent-Length: x\r\n\r\n", "400"),
]


def _raw(url: str, data: bytes) -> str:
    """The status line a server answers ``data`` with ("" if it closes the connection unanswered)."""
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        s.sendall(data)
        got = b""
        while b"\r\n" not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    return got.split(b"\r\n", 1)[0].decode("latin-1")


def _run(tmp_path: Path) -> Path:
    db = tmp_path / "run.db"
    run_scenario(load_scenario("publish-report"), db=db).close()
    return db


# ------------------------------------------------------------------------------------------ browse


def test_browse_answers_localhost_only_and_refuses_any_other_host(tmp_path):
    pytest.importorskip("datasette")
    db = _run(tmp_path)
    with _server(["browse", "--db", str(db), "--allow-host", "class.local"]) as (url, _p, result):
        port = urlsplit(url).port
        for host in ("localhost", f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", f"class.local:{port}"):
            status, body = _request(url, "/run", host=host)
            assert status == 200 and "tasks" in body, (host, status)
        for host in ("evil.example", f"evil.example:{port}", f"localhost:{port + 1}", f"127.0.0.1.nip.io:{port}"):
            status, body = _request(url, "/run/tasks.json", host=host)
            assert status == 403 and body.startswith("403 Forbidden: ") and body.count("\n") == 1, (host, status, body)
            assert '"rows"' not in body
        for data, status in MALFORMED:
            line = _raw(url, data)
            assert line.split(" ")[1:2][0].startswith(status) if line else status == "", (data, line)
        status, _body = _request(url, "/ws", headers={  # Datasette has no websocket: refused before it sees one
            "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Origin": f"http://127.0.0.1:{port}"})
        assert status == 403
    err = result.err
    refused = [x for x in err.splitlines() if x.startswith("protolab: refused GET")]
    assert len(refused) == 6, err
    assert "'evil.example'" in refused[0] and "\x1b" not in err  # the client's values quoted: no escapes
    assert len(err.splitlines()) <= 4 + len(MALFORMED) + 2, err  # a line at most per bad request, then "stopped"


def test_browse_gives_clean_404s_and_refuses_writes_with_no_traceback(tmp_path):
    pytest.importorskip("datasette")
    db = _run(tmp_path)
    before = db.read_bytes()
    with _server(["browse", "--db", str(db)]) as (url, _p, result):
        for path in ("/nope", "/run/nope", "/run/tasks/no-such-task", "/run/nope.json"):
            status, _body = _request(url, path)
            assert status == 404, path
        for method, path in (("POST", "/run/tasks/-/insert"), ("POST", "/run/-/create"), ("PUT", "/run/tasks"),
                             ("DELETE", "/run/tasks/-/drop"), ("POST", "/-/messages")):
            status, body = _request(url, path, method=method, headers={"Content-Type": "application/json"})
            assert status == 405 and "read-only" in body, (method, path, status, body)
        status, _body = _request(url, "/run/tasks")
        assert status == 200
    err = result.err
    assert "Traceback" not in err and "Error" not in err, err
    assert len(err.splitlines()) == 6, err  # one line per refused write, then "stopped"
    assert db.read_bytes() == before


def test_a_malformed_allow_host_is_one_line_before_any_server_starts(tmp_path, capsys):
    db = _run(tmp_path)
    for bad in ("http://class.local", "class.local:80", "class.local/x", ""):
        code, _o, err = run_cli(capsys, "browse", "--db", db, "--port", "0", "--allow-host", bad)
        assert code == 2 and err.startswith("error: E_USAGE: --allow-host") and err.count("\n") == 1, err
        code, _o, err = run_cli(capsys, "demo", "regression", "--serve", "--port", "0", "--allow-host", bad)
        assert code == 2 and err.startswith("error: E_USAGE: --allow-host") and err.count("\n") == 1, err
    code, _o, err = run_cli(capsys, "demo", "regression", "--serve", "--port", "0", "--max-sessions", "0")
    assert code == 2 and "--max-sessions" in err and "Traceback" not in err, err


# ------------------------------------------------------------------------------------------ --serve


def _ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "ws?width=100&height=30"


async def _first_screen(ws) -> None:
    """Wait for the tab's first output (the app's process has started and draws)."""
    import aiohttp

    async with asyncio.timeout(120):
        while True:
            msg = await ws.receive()
            if msg.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
                return
            raise AssertionError(f"the tab closed: {msg.type}")


async def _refused(url: str, origin: str | None) -> int:
    """The HTTP status a WebSocket from ``origin`` is refused with (fails if it is accepted)."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            async with session.ws_connect(_ws_url(url), **({"origin": origin} if origin else {})):
                pass
    return e.value.status


def test_serve_refuses_a_foreign_host_and_a_websocket_from_another_page_and_starts_nothing():
    pytest.importorskip("textual_serve")
    with _server(["demo", "regression", "--paused", "--serve", "--allow-host", "class.local"]) as (url, p, result):
        port = urlsplit(url).port
        status, page = _request(url, "/", host=f"localhost:{port}")
        assert status == 200 and f"ws://localhost:{port}/ws" in page  # the page speaks to its own origin
        status, page = _request(url, "/", host="class.local:9000")  # a classroom's proxy
        assert status == 200 and "ws://class.local:9000/ws" in page
        status, body = _request(url, "/", host="evil.example")
        assert status == 403 and body.startswith("403 Forbidden: ") and "protolab demo" not in body
        status, _body = _request(url, "/ws", host="evil.example", headers={
            "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Origin": f"http://evil.example:{port}"})
        assert status == 403
        for origin in ("http://evil.example", f"http://evil.example:{port}", f"http://localhost:{port + 1}", "null",
                       None):
            assert asyncio.run(_refused(url, origin)) == 403, origin
        for data, status in MALFORMED:
            line = _raw(url, data)
            assert line.split(" ")[1:2][0].startswith(status) if line else status == "", (data, line)
        assert _children(p.pid) == []  # no demo process was started
    err = result.err
    refused = [x for x in err.splitlines() if x.startswith("protolab: refused")]
    assert len(refused) == 8, err  # 7, and the request with no Host
    assert "\x1b" not in err
    assert len(err.splitlines()) <= 7 + len(MALFORMED) + 1, err  # a line at most per bad request, then "stopped"


def _pidfd_wait(pids: list[int], timeout: float) -> list[int]:
    """The pids of ``pids`` that have ended (exited, reaped or not) within ``timeout`` seconds: waits on
    each one's pidfd, which becomes readable when it exits."""
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            fds[None] = pid  # gone already
    ended = [pid for fd, pid in fds.items() if fd is None]
    live = [fd for fd in fds if fd is not None]
    try:
        while live:
            ready, _w, _x = select.select(live, [], [], timeout)
            if not ready:
                break
            for fd in ready:
                ended.append(fds[fd])
                live.remove(fd)
    finally:
        for fd in fds:
            if fd is not None:
                os.close(fd)
    return sorted(ended)


@pytest.mark.slow
def test_own_origin_opens_tabs_up_to_the_cap_and_a_closed_socket_ends_its_process():
    pytest.importorskip("textual_serve")
    import aiohttp

    with _server(["demo", "regression", "--paused", "--serve", "--max-sessions", "2"]) as (url, p, result):
        port = urlsplit(url).port

        async def scenario() -> tuple[list[int], list[int]]:
            async with aiohttp.ClientSession() as session:
                a = await session.ws_connect(_ws_url(url), origin=url.rstrip("/"))  # the page's own origin
                await _first_screen(a)
                one = _children(p.pid)
                # a second tab, opened from the page under the name localhost, dropped without a close frame
                raw = socket.create_connection(("127.0.0.1", port), timeout=60)
                raw.sendall((f"GET /ws?width=100&height=30 HTTP/1.1\r\nHost: localhost:{port}\r\n"
                             "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                             f"Origin: http://localhost:{port}\r\n\r\n").encode())
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = await asyncio.to_thread(raw.recv, 4096)
                    assert chunk, head
                    head += chunk
                assert head.startswith(b"HTTP/1.1 101"), head
                if not head.split(b"\r\n\r\n", 1)[1]:
                    assert await asyncio.to_thread(raw.recv, 4096)  # its first screen: its process runs
                two = _children(p.pid)
                assert len(two) == 2, two
                hung = (set(two) - set(one)).pop()
                with pytest.raises(aiohttp.WSServerHandshakeError) as e:  # a third tab: refused, nothing started
                    await session.ws_connect(_ws_url(url), origin=url.rstrip("/"))
                assert e.value.status == 503
                assert sorted(_children(p.pid)) == sorted(two)
                await a.send_str("not a message")  # the server ends this tab: its socket closes
                async with asyncio.timeout(60):
                    while (await a.receive()).type not in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                        pass
                os.kill(hung, signal.SIGSTOP)  # an app that would never quit by itself (busy, or hung)
                raw.close()  # and its socket dropped without a close frame
                return two, await asyncio.to_thread(_pidfd_wait, two, 30)

        two, ended = asyncio.run(scenario())
        assert ended == sorted(two), f"a closed tab's process was left running: {set(two) - set(ended)}"
    err = result.err
    assert "refused a tab: 2 of --max-sessions 2 are open" in err, err
    assert "a tab ended on a bad message: JSONDecodeError" in err, err
