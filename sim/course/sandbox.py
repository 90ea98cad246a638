"""Where student code runs when it is judged: a child process with limits.

The parent (:func:`run_test`) copies the student's folder to a private temporary folder, starts
``python -I`` on :func:`child_main` there with a clean environment and resource limits (address
space, CPU seconds, size of any file written, no core files), waits for the test's wall-clock
timeout, and kills the whole process group if it is exceeded. The child calls the judge, which
imports the student's files; it writes its verdict to a file the parent reads. Whatever happens
in the child (an exception, an endless loop, a flood of output, ``sys.exit``, a wrong return
type, running out of memory) comes back as a score of 0 with a one-line reason, never as a
traceback in the grader.

``isolate=False`` calls the judge in this process: only for the kit's own tests of its own
reference solutions, which are not hostile.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

from .judges import Judged, failed, resolve

__all__ = ["run_test", "judge_here", "LIMITS"]

#: Resource limits of a judged child process.
LIMITS = {"memory_mb": 2048, "file_mb": 32, "output_kb": 256, "copy_mb": 8}

_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the ``sim`` package
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from sim.course.sandbox import child_main; child_main(sys.argv[2:])"


class _Capped(io.TextIOBase):
    """stdout/stderr for student code: keeps the first ``limit`` characters, counts the rest."""

    def __init__(self, limit: int):
        self.limit, self.kept, self.total = limit, [], 0

    def writable(self) -> bool:
        return True

    def write(self, s) -> int:
        s = str(s)
        room = self.limit - self.total
        if room > 0:
            self.kept.append(s[:room])
        self.total += len(s)
        return len(s)

    def text(self) -> str:
        return "".join(self.kept)


def _where_in(sub: Path, tb) -> str:
    """``design.py line 12`` for the innermost frame in the student's files, if any."""
    where = ""
    frames = []
    exc = tb  # an exception, or a traceback
    if isinstance(exc, BaseException):
        seen = 0
        while exc is not None and seen < 5:  # the design's own frames hide behind a DesignError's cause
            frames = traceback.extract_tb(exc.__traceback__) + frames
            exc, seen = exc.__cause__ or exc.__context__, seen + 1
    else:
        frames = traceback.extract_tb(tb)
    for fs in frames:
        try:
            p = Path(fs.filename).resolve()
        except (OSError, ValueError):
            continue
        if sub in p.parents:
            where = f"{p.relative_to(sub)} line {fs.lineno}"
    return where


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def judge_here(judge: str, submission: Path, args: dict) -> Judged:
    """Call ``judge`` on ``submission`` in this process, turning anything the student's code does
    into a verdict."""
    from ..errors import ProtolabError

    sub = Path(submission).resolve()
    fn = resolve(judge)
    out = _Capped(LIMITS["output_kb"] * 1024)
    saved = sys.stdout, sys.stderr, sys.stdin
    sys.stdout = sys.stderr = out
    sys.stdin = io.StringIO("")
    limit = sys.getrecursionlimit()
    try:
        result = fn(sub, dict(args))
        if not isinstance(result, Judged):  # pragma: no cover - a judge bug, not the student's
            return failed(f"internal: judge {judge} returned {type(result).__name__}")
        if out.total > out.limit:
            return failed(f"your code printed more than {LIMITS['output_kb']} KB while judged ({out.total:,} "
                          "characters); a design computes, it does not print")
        return _private_paths(result, sub)
    except ProtolabError as e:
        where = _where_in(sub, e)
        return _private_paths(failed(_one_line(f"{e.code}: {e.message}" + (f" ({where})" if where else ""))), sub)
    except SystemExit as e:
        where = _where_in(sub, e)
        return failed(f"your code called sys.exit({e.code!r})" + (f" at {where}" if where else "") +
                      "; a design is a module of functions, it must not end the process")
    except MemoryError:
        return failed(f"your code ran out of memory (the limit is {LIMITS['memory_mb']} MB)")
    except RecursionError as e:
        where = _where_in(sub, e)
        return failed("your code recursed without end" + (f" ({where})" if where else ""))
    except Exception as e:
        where = _where_in(sub, e)
        return failed(_one_line(f"your code raised {type(e).__name__}: {e}" + (f" at {where}" if where else "")))
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved
        sys.setrecursionlimit(limit)
        if out.total > out.limit:
            pass  # the flood is reported below by the caller through judge_output()
        judge_here.last_output = out.text()
        judge_here.flooded = out.total > out.limit


def _private_paths(v: Judged, sub: Path) -> Judged:
    """Name the student's folder as ``{dir}``, never the sandbox's private copy."""
    from dataclasses import replace

    return replace(v, message=v.message.replace(str(sub), "{dir}"))


def child_main(argv: list[str]) -> None:
    """The child's entry: ``REQUEST RESULT`` files."""
    request, result = Path(argv[0]), Path(argv[1])
    req = json.loads(request.read_text())
    try:
        verdict = judge_here(req["judge"], Path(req["submission"]), req["args"])
    except BaseException as e:  # pragma: no cover - only a KeyboardInterrupt-like escape
        verdict = failed(_one_line(f"the judge stopped: {type(e).__name__}: {e}"))
    data = verdict.to_dict()
    data["output"] = getattr(judge_here, "last_output", "")[-2000:]
    data["flooded"] = getattr(judge_here, "flooded", False)
    try:
        text = json.dumps(data, default=str)
    except (TypeError, ValueError):
        data["witness"] = None
        text = json.dumps(data, default=str)
    result.write_text(text)
    sys.stdout.flush()
    os._exit(0)  # no atexit handlers the student's code may have registered


def _limits(timeout: float):
    def apply():  # runs in the child between fork and exec
        import resource

        mb = 1024 * 1024
        for res, value in (
            (resource.RLIMIT_AS, LIMITS["memory_mb"] * mb),
            (resource.RLIMIT_FSIZE, LIMITS["file_mb"] * mb),
            (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_CPU, int(timeout) + 2),
        ):
            try:
                resource.setrlimit(res, (value, value))
            except (ValueError, OSError):  # pragma: no cover - a platform without that limit
                pass
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing

    return apply


def _copy_submission(src: Path, dst: Path) -> None:
    """Regular files only (no symlinks out of the folder), at most ``copy_mb`` in all."""
    total = 0
    dst.mkdir(parents=True)
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            continue
        if p.is_symlink():
            continue
        if p.is_dir():
            (dst / rel).mkdir(parents=True, exist_ok=True)
        elif p.is_file():
            total += p.stat().st_size
            if total > LIMITS["copy_mb"] * 1024 * 1024:
                raise OSError(f"the submission holds more than {LIMITS['copy_mb']} MB")
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dst / rel)


def run_test(judge: str, submission: Path, args: dict, *, timeout: float, isolate: bool = True) -> dict:
    """Judge ``submission`` with ``judge``; a dict with score (0..1), message, reproduce, witness,
    output (what the student's code printed, cut short) and seconds."""
    import time

    t0 = time.perf_counter()
    if not isolate:
        v = judge_here(judge, submission, args).to_dict()
        v.update(output=getattr(judge_here, "last_output", ""), flooded=getattr(judge_here, "flooded", False))
        v["seconds"] = round(time.perf_counter() - t0, 3)
        return _flood_note(v)
    with tempfile.TemporaryDirectory(prefix="protolab-judge-") as tmp:
        tmpd = Path(tmp)
        sub = tmpd / "submission"
        try:
            _copy_submission(Path(submission), sub)
        except OSError as e:
            return {**failed(f"the submission cannot be read: {e}").to_dict(), "seconds": 0.0, "output": ""}
        request, result, log = tmpd / "request.json", tmpd / "result.json", tmpd / "output.log"
        request.write_text(json.dumps({"judge": judge, "submission": str(sub), "args": args}))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmpd), "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        with open(log, "wb") as logf:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-c", _BOOT, _ROOT, str(request), str(result)],
                cwd=sub, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, preexec_fn=_limits(timeout),
            )
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill(proc)
                return {**failed(f"did not finish within {timeout:g} s: an endless loop, or far too slow "
                                 "(each test has its own time limit)").to_dict(),
                        "seconds": round(time.perf_counter() - t0, 3), "output": _tail(log)}
            finally:
                _kill(proc)
        seconds = round(time.perf_counter() - t0, 3)
        if result.is_file():
            try:
                v = json.loads(result.read_text())
                v["seconds"] = seconds
                return _flood_note(v)
            except (ValueError, OSError):
                pass
        rc = proc.returncode
        if rc is not None and rc < 0:
            sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            why = {"SIGXCPU": f"used more than {int(timeout) + 2} s of CPU", "SIGKILL": "was killed (out of memory?)",
                   "SIGSEGV": "crashed the interpreter (SIGSEGV)"}.get(sig, f"was stopped by {sig}")
        else:
            why = f"ended with exit status {rc} before giving a verdict"
        tail = _tail(log)
        last = tail.strip().splitlines()[-1] if tail.strip() else ""
        return {**failed(_one_line(f"the judged process {why}" + (f": {last}" if last else ""))).to_dict(),
                "seconds": seconds, "output": tail}


def _flood_note(v: dict) -> dict:
    if v.get("flooded") and "printed more than" not in v.get("message", ""):
        v["message"] = v.get("message", "") + f" (your code printed more than {LIMITS['output_kb']} KB; the rest was dropped)"
    return v


def _tail(log: Path, n: int = 2000) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass
