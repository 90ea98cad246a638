"""Bugs planted by hand in the grader's sandbox and limits (issue 48, part 1): sim/course/sandbox.py,
sim/course/limits.py and where they are called (sim/course/host.py, sim/course/pool.py), one at a time,
each run against the sandbox's tests: a bug is caught when one of them fails. Not a test: a measure of
the tests, like tests/gathers_versions_planted.py. Results: docs/performance.md.

    .venv/bin/python tests/sandbox_planted.py            # every planted bug
    .venv/bin/python tests/sandbox_planted.py S1 L5      # only these
    .venv/bin/python tests/sandbox_planted.py --before   # against the tests before issue 48 part 6

The loop is tests/planting.py's: each bug one small change (the text replaced occurs once), the file
restored after its run, whatever happens, and checked byte for byte the original at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planting  # noqa: E402
from planting import ROOT, Bug  # noqa: E402

#: the tests run against every bug (quick set, one process, -x), the new ones first (they are quick)
NEW = ["tests/test_sandbox_unprivileged.py"]
TESTS = ["tests/test_fail_closed.py", "tests/test_sandbox_hostile.py", "tests/test_sandbox_reach.py"]

S, L, H, P = "sim/course/sandbox.py", "sim/course/limits.py", "sim/course/host.py", "sim/course/pool.py"

BUGS = [
    Bug("L1", L, "the memory limit dropped", "((resource.RLIMIT_AS, memory_mb),", "((resource.RLIMIT_AS, None),"),
    Bug("L2", L, "the file-size limit given the memory's value",
     "(resource.RLIMIT_FSIZE, file_mb)", "(resource.RLIMIT_FSIZE, memory_mb)"),
    Bug("L3", L, "core files allowed", "(resource.RLIMIT_CORE, 0)", "(resource.RLIMIT_CORE, None)"),
    Bug("L4", L, "the hard-limit check inverted (an unlimited hard limit makes every limit unlimited)",
     "if hard != resource.RLIM_INFINITY:", "if hard == resource.RLIM_INFINITY:"),
    Bug("L5", L, "SIGXFSZ not ignored (a write past the limit kills the host)",
     "    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n", "", equivalent='Python ignores SIGXFSZ itself at start-up, so a write past the limit still fails with EFBIG and the host lives'),
    Bug("L6", L, "no processes only for root (the check inverted)",
     "if no_processes and os.geteuid() != 0:", "if no_processes and os.geteuid() == 0:"),
    Bug("L7", L, "one process allowed (RLIMIT_NPROC 1, not 0)",
     "(resource.RLIMIT_NPROC, (0, 0))", "(resource.RLIMIT_NPROC, (1, 1))"),
    Bug("L8", L, "every limit one MB over (off by one)", "want = value * _MB", "want = (value + 1) * _MB"),
    Bug("H1", H, "the host may start processes (no_processes off)", "no_processes=True", "no_processes=False"),
    Bug("P1", P, "the judge process's file-size limit dropped",
     'apply_limits(memory_mb=LIMITS["memory_mb"], file_mb=LIMITS["file_mb"])',
     'apply_limits(memory_mb=LIMITS["memory_mb"], file_mb=None)'),
    Bug("S1", S, "--die-with-parent dropped", 'a += ["--die-with-parent", "--new-session", "--clearenv"]',
     'a += ["--new-session", "--clearenv"]'),
    Bug("S2", S, "--new-session dropped", 'a += ["--die-with-parent", "--new-session", "--clearenv"]',
     'a += ["--die-with-parent", "--clearenv"]'),
    Bug("S3", S, "the system and the interpreter bound writable (--ro-bind to --bind)",
     'a.extend(["--ro-bind", src, dest])', 'a.extend(["--bind", src, dest])'),
    Bug("S4", S, "the kit's files bound writable", 'a.extend(["--ro-bind", src, src])', 'a.extend(["--bind", src, src])'),
    Bug("S5", S, "unprivileged: --disable-userns dropped (nested user namespaces)",
     '"--unshare-user", "--disable-userns", "--uid"', '"--unshare-user", "--uid"'),
    Bug("S6", S, "unprivileged: the code is uid 0 inside", '"--uid", "65534", "--gid", "65534"', '"--uid", "0", "--gid", "0"'),
    Bug("S7", S, "unprivileged: --unshare-all dropped (the grader's network, PIDs, IPC)",
     'a += ["--unshare-all", "--unshare-user",', 'a += ["--unshare-user",'),
    Bug("S8", S, "bwrap as root: --unshare-pid dropped", '"--unshare-ipc", "--unshare-pid", "--unshare-net"',
     '"--unshare-ipc", "--unshare-net"'),
    Bug("S9", S, "bwrap as root: the drop keeps root as the saved uid", "_os.setresuid(_u, _u, _u)",
     "_os.setresuid(_u, _u, 0)"),
    Bug("S10", S, "bwrap as root: the drop keeps root's groups", "_os.setgroups([]); ", ""),
    Bug("S11", S, "the fallback's uid drop skipped (a root grader's hosts run as root)",
     'kw = {"user": user[0], "group": user[1], "extra_groups": []}', "kw = {}"),
    Bug("S12", S, "the probe accepts a box whose code runs as root", 'return None if uid and uid != [b"0"] else',
     "return None if uid else"),
    Bug("S13", S, "root: bwrap as the sandbox's user never tried (bwrap runs as root)",
     'tries.append(Box("bubblewrap", f"as {acct[0]}", bwrap, as_user=acct, setpriv=setpriv))', "pass"),
    Bug("S14", S, "the copy's size cap dropped", '(total > LIMITS["copy_mb"] * _MB and f != main)', "(False and f != main)"),
    Bug("S15", S, "dot files copied into the box",
     'files += [os.path.join(dirpath, n) for n in sorted(filenames) if not n.startswith(".")]',
     "files += [os.path.join(dirpath, n) for n in sorted(filenames)]"),
    Bug("S16", S, "links followed into the box (O_NOFOLLOW dropped)", "os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC",
     "os.O_RDONLY | os.O_CLOEXEC"),
    Bug("S17", S, "the host's file limit given the memory's", '"file_mb": LIMITS["file_mb"]})',
     '"file_mb": LIMITS["memory_mb"]})'),
    Bug("S18", S, "no private /tmp", '"--proc", "/proc", "--perms", "1777", "--size", str(16 * _MB), "--tmpfs", "/tmp"]',
     '"--proc", "/proc"]'),
    Bug("S19", S, "--clearenv dropped", 'a += ["--die-with-parent", "--new-session", "--clearenv"]',
     'a += ["--die-with-parent", "--new-session"]', equivalent="bwrap is started with only PATH in its environment, which --setenv overrides: the box's environment is the same"),
    Bug("S20", S, "bwrap as root: --cap-drop ALL dropped",
     '"--cap-drop", "ALL", "--cap-add", "CAP_SETUID"', '"--cap-add", "CAP_SETUID"', equivalent='only the inheritable capability set differs; no-new-privileges is set and the ambient set is empty, so nothing can use it'),
]


def main(argv: list[str]) -> int:
    before = "--before" in argv
    tests = [t for t in (TESTS if before else NEW + TESTS) if (ROOT / t).exists()]
    return planting.main([a for a in argv if a != "--before"], BUGS, tests)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
