"""--serve on 'demo' and 'tui': the TUI served by textual-serve on localhost, spoken to here over its
websocket as the page's script speaks to it (no browser needed; tests/test_browser.py drives a real
one). Every wait is on what the server sends; Ctrl-C stops it and ends every tab's process."""

import asyncio
import json
import re
import socket

import pytest
from conftest import run_cli
from servers import server

from sim.runner import run_scenario
from sim.scenario import load_scenario

pytest.importorskip("textual_serve", reason="textual-serve is a dependency of protolab: pip install -e .")


def serving(*args: str):
    """``protolab ARGS --serve`` running: see tests/servers.py."""
    return server([*args, "--serve"])


def _plain(raw: str) -> str:
    return re.sub(r"\x1b\[[0-9;?$]*[A-Za-z]|\x1b\][^\x07]*\x07", "", raw)


async def _session(url: str, steps, *, timeout: float = 60) -> None:
    """Open a tab's websocket; ``steps`` is a list of (text to send or None, predicate on the screen so far)."""
    import aiohttp

    ws_url = url.replace("http://", "ws://") + "ws?width=160&height=40"
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(ws_url, origin=url.rstrip("/")) as ws:  # the page's own Origin
            seen = ""
            for send, until in steps:
                if send is not None:
                    await ws.send_str(json.dumps(["stdin", send]))
                async with asyncio.timeout(timeout):
                    while not until(_plain(seen)):
                        msg = await ws.receive()
                        if msg.type == aiohttp.WSMsgType.BINARY:
                            seen += msg.data.decode("utf-8", "replace")
                        elif msg.type == aiohttp.WSMsgType.TEXT:
                            seen += msg.data
                        else:
                            raise AssertionError(f"the tab closed: {msg.type}; screen so far: {_plain(seen)[-2000:]}")


def test_the_served_workshop_draws_both_sides_and_a_space_steps_both(tmp_path):
    with serving("demo", "regression", "--paused") as (url, p, children):
        import urllib.request

        with urllib.request.urlopen(url, timeout=30) as r:
            page = r.read().decode()
        assert "protolab demo regression" in page and url.replace("http://", "ws://") + "ws" in page
        steps = [
            (None, lambda s: "naive: last write wins" in s and s.count("(0 deliveries)") >= 2),
            (" ", lambda s: s.count("(1 deliveries)") >= 2),
        ]
        asyncio.run(_session(url, steps))


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
def test_a_live_tui_is_served_on_a_file_of_its_own_and_a_finished_run_read_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the served live run writes in the server's temporary folder, not here
    with serving("tui", "fan-out", "--fault", "crash", "--paused") as (url, p, children):
        asyncio.run(_session(url, [(None, lambda s: "fan-out" in s and "State" in s)]))
    db = tmp_path / "done.db"
    run_scenario(load_scenario("publish-report"), db=db).close()
    before = db.read_bytes()
    with serving("tui", "--db", str(db)) as (url, p, children):
        asyncio.run(_session(url, [(None, lambda s: "publish:R-1:T-2" in s or "T-2" in s)]))
    assert db.read_bytes() == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["done.db"]


def test_serve_refuses_a_taken_port_headless_and_a_file_that_is_not_a_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code, _o, err = run_cli(capsys, "demo", "regression", "--serve", "--port", port)
        assert code == 2 and err.startswith("error: E_PORT_IN_USE: ") and err.count("\n") == 1, err
        code, _o, err = run_cli(capsys, "tui", "fan-out", "--serve", "--port", port)
        assert code == 2 and err.startswith("error: E_PORT_IN_USE: "), err
    code, _o, err = run_cli(capsys, "demo", "regression", "--serve", "--headless")
    assert code == 2 and err.startswith("error: E_USAGE: "), err
    (tmp_path / "notes.db").write_text("not a database")
    code, _o, err = run_cli(capsys, "tui", "--db", tmp_path / "notes.db", "--serve", "--port", "0")
    assert code == 2 and err.startswith("error: E_DB_CORRUPT: "), err
    code, _o, err = run_cli(capsys, "tui", "no-such-scenario", "--serve", "--port", "0")
    assert code == 2 and err.startswith("error: E_"), err
    assert sorted(x.name for x in tmp_path.iterdir()) == ["notes.db"]  # nothing written
