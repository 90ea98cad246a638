"""Bugs planted by hand in the grader's sandbox and limits (issue 48, part 1): sim/course/sandbox.py,
sim/course/limits.py and where they are called (sim/course/host.py, sim/course/pool.py), one at a time,
each run against the sandbox's tests: a bug is caught when one of them fails. Not a test: a measure of
the tests, like tests/gathers_versions_planted.py. Results: docs/performance.md.

    .venv/bin/python tests/sandbox_planted.py            # every planted bug
    .venv/bin/python tests/sandbox_planted.py S1 L5      # only these
    .venv/bin/python tests/sandbox_planted.py --before   # against the tests before issue 48 part 6

Each bug is one small change to a file (the text replaced occurs once); the file is restored after its
run in a ``finally``, whatever happens, and the script checks it is byte for byte the original at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the tests run against every bug (quick set, one process, -x), the new ones first (they are quick)
NEW = ["tests/test_sandbox_unprivileged.py"]
TESTS = ["tests/test_fail_closed.py", "tests/test_sandbox_hostile.py", "tests/test_sandbox_reach.py"]

S, L, H, P = "sim/course/sandbox.py", "sim/course/limits.py", "sim/course/host.py", "sim/course/pool.py"

#: (id, file, what the bug does, the text, the bug)
BUGS = [
    ("L1", L, "the memory limit dropped", "((resource.RLIMIT_AS, memory_mb),", "((resource.RLIMIT_AS, None),"),
    ("L2", L, "the file-size limit given the memory's value",
     "(resource.RLIMIT_FSIZE, file_mb)", "(resource.RLIMIT_FSIZE, memory_mb)"),
    ("L3", L, "core files allowed", "(resource.RLIMIT_CORE, 0)", "(resource.RLIMIT_CORE, None)"),
    ("L4", L, "the hard-limit check inverted (an unlimited hard limit makes every limit unlimited)",
     "if hard != resource.RLIM_INFINITY:", "if hard == resource.RLIM_INFINITY:"),
    ("L5", L, "SIGXFSZ not ignored (a write past the limit kills the host)",
     "    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n", ""),
    ("L6", L, "no processes only for root (the check inverted)",
     "if no_processes and os.geteuid() != 0:", "if no_processes and os.geteuid() == 0:"),
    ("L7", L, "one process allowed (RLIMIT_NPROC 1, not 0)",
     "(resource.RLIMIT_NPROC, (0, 0))", "(resource.RLIMIT_NPROC, (1, 1))"),
    ("L8", L, "every limit one MB over (off by one)", "want = value * _MB", "want = (value + 1) * _MB"),
    ("H1", H, "the host may start processes (no_processes off)", "no_processes=True", "no_processes=False"),
    ("P1", P, "the judge process's file-size limit dropped",
     'apply_limits(memory_mb=LIMITS["memory_mb"], file_mb=LIMITS["file_mb"])',
     'apply_limits(memory_mb=LIMITS["memory_mb"], file_mb=None)'),
    ("S1", S, "--die-with-parent dropped", 'a += ["--die-with-parent", "--new-session", "--clearenv"]',
     'a += ["--new-session", "--clearenv"]'),
    ("S2", S, "--new-session dropped", 'a += ["--die-with-parent", "--new-session", "--clearenv"]',
     'a += ["--die-with-parent", "--clearenv"]'),
    ("S3", S, "the system and the interpreter bound writable (--ro-bind to --bind)",
     'a.extend(["--ro-bind", src, dest])', 'a.extend(["--bind", src, dest])'),
    ("S4", S, "the kit's files bound writable", 'a.extend(["--ro-bind", src, src])', 'a.extend(["--bind", src, src])'),
    ("S5", S, "unprivileged: --disable-userns dropped (nested user namespaces)",
     '"--unshare-user", "--disable-userns", "--uid"', '"--unshare-user", "--uid"'),
    ("S6", S, "unprivileged: the code is uid 0 inside", '"--uid", "65534", "--gid", "65534"', '"--uid", "0", "--gid", "0"'),
    ("S7", S, "unprivileged: --unshare-all dropped (the grader's network, PIDs, IPC)",
     'a += ["--unshare-all", "--unshare-user",', 'a += ["--unshare-user",'),
    ("S8", S, "bwrap as root: --unshare-pid dropped", '"--unshare-ipc", "--unshare-pid", "--unshare-net"',
     '"--unshare-ipc", "--unshare-net"'),
    ("S9", S, "bwrap as root: the drop keeps root as the saved uid", "_os.setresuid(_u, _u, _u)",
     "_os.setresuid(_u, _u, 0)"),
    ("S10", S, "bwrap as root: the drop keeps root's groups", "_os.setgroups([]); ", ""),
    ("S11", S, "the fallback's uid drop skipped (a root grader's hosts run as root)",
     'kw = {"user": user[0], "group": user[1], "extra_groups": []}', "kw = {}"),
    ("S12", S, "the probe accepts a box whose code runs as root", 'return None if uid and uid != [b"0"] else',
     "return None if uid else"),
    ("S13", S, "root: bwrap as the sandbox's user never tried (bwrap runs as root)",
     'tries.append(Box("bubblewrap", f"as {acct[0]}", bwrap, as_user=acct, setpriv=setpriv))', "pass"),
    ("S14", S, "the copy's size cap dropped", '(total > LIMITS["copy_mb"] * _MB and f != main)', "(False and f != main)"),
    ("S15", S, "dot files copied into the box",
     'files += [os.path.join(dirpath, n) for n in sorted(filenames) if not n.startswith(".")]',
     "files += [os.path.join(dirpath, n) for n in sorted(filenames)]"),
    ("S16", S, "links followed into the box (O_NOFOLLOW dropped)", "os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC",
     "os.O_RDONLY | os.O_CLOEXEC"),
    ("S17", S, "the host's file limit given the memory's", '"file_mb": LIMITS["file_mb"]})',
     '"file_mb": LIMITS["memory_mb"]})'),
    ("S18", S, "no private /tmp", '"--proc", "/proc", "--perms", "1777", "--size", str(16 * _MB), "--tmpfs", "/tmp"]',
     '"--proc", "/proc"]'),
    ("S19", S, "--clearenv dropped", 'a += ["--die-with-parent", "--new-session", "--clearenv"]',
     'a += ["--die-with-parent", "--new-session"]'),
    ("S20", S, "bwrap as root: --cap-drop ALL dropped",
     '"--cap-drop", "ALL", "--cap-add", "CAP_SETUID"', '"--cap-add", "CAP_SETUID"'),
]


def _stop(signum, _frame):
    raise SystemExit(128 + signum)  # a kill (SIGTERM) still runs the finally that restores the file


def main(argv: list[str]) -> int:
    import signal

    signal.signal(signal.SIGTERM, _stop)
    before = "--before" in argv
    only = {a for a in argv if not a.startswith("--")}
    tests = [t for t in (TESTS if before else NEW + TESTS) if (ROOT / t).exists()]
    files = sorted({b[1] for b in BUGS})
    originals = {f: (ROOT / f).read_bytes() for f in files}
    caught = total = 0
    try:
        for bid, path, name, old, new in BUGS:
            if only and bid not in only:
                continue
            p = ROOT / path
            src = originals[path].decode()
            assert src.count(old) == 1, (bid, old)
            t0 = time.time()
            try:
                p.write_text(src.replace(old, new))
                r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:cacheprovider",
                                    *tests], cwd=ROOT, capture_output=True, text=True,
                                   env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})  # no stale .pyc of a bug
            finally:
                p.write_bytes(originals[path])
            failed = [ln for ln in r.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
            ok = r.returncode != 0
            caught += ok
            total += 1
            print(json.dumps({"bug": bid, "name": name, "caught": ok, "by": failed[:1],
                              "seconds": round(time.time() - t0, 1)}), flush=True)
    finally:
        for f, b in originals.items():
            (ROOT / f).write_bytes(b)
    for f, b in originals.items():
        assert (ROOT / f).read_bytes() == b, f
    print(f"caught {caught} of {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
