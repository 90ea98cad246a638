"""A lab submission: one file (a zip) holding the learner's run, their progress (answers, recorded
actions, time) and the checkpoint results, and its verification on the instructor's side: the run
is re-delivered through the reference runtime (:mod:`sim.labs.verify`) and every checkpoint and
answer is checked again from the run itself, so neither a hand-edited database nor an edited
manifest passes.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
import zlib
from pathlib import Path

from ..errors import InputError
from ..files import check_output, not_a_file, written_whole
from ..store import ProgressStore, Store
from .catalog import get_lab
from .judge import LAB_RUN_MAX_BYTES, check_file_fits, check_run_fits, judge

__all__ = ["write_submission", "verify_submission", "FORMAT"]

FORMAT = "protolab-lab-submission/1"


def write_submission(lab, db: Path, progress_path: Path, out: Path) -> dict:
    """Pack ``db`` and the lab's progress into ``out``; returns the judgement's summary (the one
    ``verify_submission`` will give: the same run, re-delivered, and the same actions and answers)."""
    check_output(out, [db, progress_path])  # first: an output that is an input exists, and would be refused as such
    if not Path(db).exists():
        raise InputError(f"{db} does not exist; play the lab first with 'protolab lab start {lab.number}'",
                         code="E_DB_MISSING")
    if Path(out).exists():
        raise InputError(f"{out} already exists; choose another -o or remove it", code="E_FILE_EXISTS")
    if not Path(out).resolve().parent.is_dir():
        raise InputError(f"folder {Path(out).parent} does not exist", code="E_FILE_MISSING")
    check_file_fits(lab, db)
    store = Store.open(db, readonly=True)
    try:
        check_run_fits(lab, store)  # before a copy of it is made
    except BaseException:
        store.close()
        raise
    progress = ProgressStore.open(progress_path, readonly=True) if Path(progress_path).exists() else ProgressStore.open(None)
    try:
        # the copy judged and packed, in a working folder beside the submission (.NAME.partial-PID-*): one a
        # kill -9 leaves is swept by the next write of the same submission, like its partial file
        with tempfile.TemporaryDirectory(dir=Path(out).resolve().parent, prefix=f".{Path(out).name}.partial-{os.getpid()}-") as tmp:
            copy = Path(tmp) / "run.db"
            store.save_copy(copy)  # judged as packed: a run still being written is judged as it is sent
            dump = progress.dump(lab.number)  # judged from what the manifest carries, as verification will
            packed = Store.open(copy, readonly=True)
            try:
                summary = judge(lab, packed, dump["actions"],
                                {q: a["answer"] for q, a in dump["answers"].items()}).to_dict()
            finally:
                packed.close()
            manifest = {"format": FORMAT, "lab": lab.number, "slug": lab.slug, "title": lab.title,
                        "summary": summary, "progress": dump}
            with written_whole(out, "wb", reads=[db, progress_path]) as fh, \
                    zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as z:
                z.writestr("manifest.json", json.dumps(manifest, indent=2, sort_keys=True))
                z.write(copy, "run.db")
    finally:
        progress.close()
        store.close()
    return summary


#: The largest run a submission may carry (uncompressed): a lab's run holds at most
#: :data:`~sim.labs.judge.LAB_RUN_MAX_DELIVERIES` deliveries, a few megabytes; anything larger is
#: refused before it is unpacked (the bound a run's file has: :data:`~sim.labs.judge.LAB_RUN_MAX_BYTES`).
MAX_BYTES = LAB_RUN_MAX_BYTES


def _too_large(path: Path) -> str:
    return (f"{path} unpacks to more than {MAX_BYTES >> 20} MB; a lab's run is a few megabytes at most "
            "(its story and the faults played on it): this is not a lab submission")


def _read(path: Path, run_to: Path) -> dict:
    """The submission's manifest; its run is copied to ``run_to`` a block at a time (a large run
    never sits whole in memory)."""
    if (special := not_a_file(path, "submission")) is not None:  # a folder, a FIFO or a device: said so
        raise special
    if not Path(path).is_file():
        raise InputError(f"{path} does not exist", code="E_FILE_MISSING")
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if not {"manifest.json", "run.db"} <= names:
                raise InputError(f"{path} is not a lab submission (it lacks manifest.json or run.db)",
                                 code="E_NOT_A_SUBMISSION")
            big = max(z.getinfo("run.db").file_size, z.getinfo("manifest.json").file_size)
            if big > MAX_BYTES:
                raise InputError(_too_large(path), code="E_LAB_RUN_TOO_LARGE")
            manifest = json.loads(z.read("manifest.json"))
            with z.open("run.db") as src, open(run_to, "wb") as dst:
                copied = 0
                while block := src.read(1 << 20):  # (a size the zip's header understates is caught too)
                    copied += len(block)
                    if copied > MAX_BYTES:
                        raise InputError(_too_large(path), code="E_LAB_RUN_TOO_LARGE")
                    dst.write(block)
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise InputError(f"{path} is not a lab submission (not a zip file)", code="E_NOT_A_SUBMISSION") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: manifest.json is not valid JSON", code="E_NOT_A_SUBMISSION") from e
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(f"{path} is not a lab submission of format {FORMAT}", code="E_NOT_A_SUBMISSION")
    return manifest


def verify_submission(path: Path, progress=None) -> dict:
    """Re-deliver the submitted run, then re-check the lab from it: ``genuine`` (the run is what
    protolab's runtime makes of its own messages), ``difference`` (the first point where it is not),
    checkpoints and answers as the run supports them: ``done`` met in all, ``verified`` those the run
    shows, ``self_reported`` those met only through a screen action the manifest lists (a view
    opened, a visit in time: nothing can replay it; each checkpoint says which it is)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "run.db"
        manifest = _read(path, db)
        lab = get_lab(str(manifest.get("lab", "")))
        store = Store.open(db, readonly=True)
        try:
            check_run_fits(lab, store, name=f"{path}'s run")
            # The learner's recorded actions (time-travel visits, views opened) and answers come
            # from the manifest; checkpoints and answers are worked out again from the run.
            prog = manifest.get("progress") or {}
            actions = [a for a in prog.get("actions") or [] if isinstance(a, dict)]
            given = {q: (a or {}).get("answer") for q, a in (prog.get("answers") or {}).items() if isinstance(a, dict)}
            j = judge(lab, store, actions, given, progress=progress)
        finally:
            store.close()
    summary = j.to_dict()
    return {"lab": lab.number, "title": lab.title, "genuine": j.genuine, "difference": j.difference,
            "done": j.done, "verified": j.verified, "self_reported": j.self_reported, "total": j.total,
            "answered": j.answered, "questions": len(lab.questions),
            "checkpoints": summary["checkpoints"], "made_by_lab": j.made_by_lab}
