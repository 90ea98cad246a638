"""One way to run a protolab server command in the tests (browse, timeline --serve, demo/tui --serve):
``protolab ARGV --port 0`` started, its URL read from the line it prints once it listens, and Ctrl-C on
the way out, which must stop it cleanly: exit 0, "stopped" said, no traceback, and none of the processes
it started (a served tab each) left running, not even as a zombie. Every wait is on what the server
says or does; nothing sleeps."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


@dataclass
class Served:
    """What a test learns of a running server: the processes it saw it start (checked gone at the end)
    and, once it stopped, everything it wrote on stderr."""

    children: list[int] = field(default_factory=list)
    err: str = ""


@contextmanager
def server(argv: list[str]):
    """``protolab ARGV --port 0`` running; yields (URL, the process, a :class:`Served`)."""
    p = subprocess.Popen([sys.executable, "-m", "sim.cli", *argv, "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    served = Served()
    lines: list[str] = []
    drain = threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True)  # read as it comes: never blocks it
    drain.start()
    try:
        line = p.stdout.readline()  # printed once the server listens
        assert "http://127.0.0.1:" in line, (line, p.wait(), drain.join(), "".join(lines))
        yield line[line.index("http://"):].split()[0], p, served
    finally:
        if p.poll() is None:
            if Path("/proc").is_dir():
                served.children += children_of(p.pid)
            p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise
        finally:
            drain.join()
            p.stdout.close()
            served.err = "".join(lines)
    assert p.returncode == 0 and "stopped" in served.err and "Traceback" not in served.err, served.err
    for pid in served.children:  # every app process the server started has ended (reaped: not even a zombie)
        assert not Path(f"/proc/{pid}").exists(), f"process {pid} was left running"
