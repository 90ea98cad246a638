"""Run a command in a pseudo-terminal, as a person at a terminal would: read the screen, press keys."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time

_ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>NOMDEHc78]")


def plain(data: bytes) -> str:
    """The terminal output with escape sequences removed (cursor moves become nothing)."""
    return _ANSI.sub("", data.decode("utf-8", "replace"))


class Terminal:
    def __init__(self, argv: list[str], *, cwd, size=(100, 30), env=None):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        e = dict(os.environ if env is None else env)
        e.setdefault("TERM", "xterm-256color")
        e["TERM"] = "xterm-256color"
        e["COLUMNS"], e["LINES"] = str(size[0]), str(size[1])
        self.proc = subprocess.Popen(argv, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=e, close_fds=True,
                                     start_new_session=True)
        os.close(slave)
        self.buf = b""

    def read(self, timeout: float = 0.2) -> None:
        end = time.time() + timeout
        while time.time() < end:
            r, _, _ = select.select([self.master], [], [], 0.05)
            if r:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                self.buf += chunk

    def wait_for(self, *words: str, timeout: float = 30) -> str:
        end = time.time() + timeout
        while time.time() < end:
            self.read(0.2)
            text = plain(self.buf)
            if all(w in text for w in words):
                return text
            if self.proc.poll() is not None:
                self.read(0.3)
                break
        raise AssertionError(f"never saw {words!r}; screen so far:\n{plain(self.buf)[-3000:]}")

    def wait_until_reading(self, timeout: float = 60) -> None:
        """Until the program is blocked reading its terminal (read(2) on fd 0, as /proc shows it): whatever
        it printed before it asked is then written, and nothing more comes until a key does. A signal the
        kernel gives, instead of a pause long enough on a quiet machine."""
        read_nr = {"x86_64": "0", "aarch64": "63"}[os.uname().machine]
        end = time.time() + timeout
        while time.time() < end and self.proc.poll() is None:
            try:
                call = open(f"/proc/{self.proc.pid}/syscall").read().split()
            except OSError:
                call = []
            if call[:2] == [read_nr, "0x0"]:
                self.read(0.05)  # (what it wrote before the read, drained)
                return
            self.read(0.05)
        raise AssertionError(f"never blocked reading its terminal; screen so far:\n{plain(self.buf)[-3000:]}")

    def press(self, keys: str, pause: float = 0.15) -> None:
        for k in keys:
            os.write(self.master, k.encode())
            self.read(pause)

    def finish(self, timeout: float = 20) -> int:
        end = time.time() + timeout
        while self.proc.poll() is None and time.time() < end:
            self.read(0.2)
        if self.proc.poll() is None:
            self.proc.kill()
            raise AssertionError(f"did not exit; screen:\n{plain(self.buf)[-3000:]}")
        self.read(0.3)
        os.close(self.master)
        return self.proc.returncode

    @property
    def text(self) -> str:
        return plain(self.buf)
