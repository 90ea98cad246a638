"""Similarity of a class's submissions: pairs of students whose files match, and copies of the model
answer or of the starter, found by copydetect (winnowed fingerprints of the tokenised code, so a copy
with its identifiers renamed still matches), with copydetect's HTML report of the matching lines.

Nothing here runs a student's code: it reads text. Only the exercise's own files of each submission
are read (``design.py`` for exercise 1), and each is first copied, vetted, into a private folder that
copydetect alone reads:

* a symbolic link, a file whose real path leaves the submission's folder, or anything but a regular
  file is skipped, and said so;
* a file that is not UTF-8 text (a NUL byte, or bytes UTF-8 cannot decode) is skipped, and said so;
* a file over :data:`FILE_CAP` bytes is compared on its first :data:`FILE_CAP` bytes only, and said so.

The kit's starter files and the other shared files of the exercise's folder are copydetect's
*boilerplate*: what every student was handed matches nothing. A copy of the starter (nothing of the
student's own) is found apart, against the starter itself.

copydetect is an optional dependency (``pip install 'protolab[similarity]'``): without it,
:func:`check_similarity` refuses with E_NO_SIMILARITY, naming the install command.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import InputError

__all__ = ["Flag", "Similarity", "check_similarity", "FILE_CAP", "DEFAULT_THRESHOLD", "available"]

#: The most bytes of one file compared (the rest is left out, and the result says so).
FILE_CAP = 256 * 1024
#: The share of a file's code (after the starter is taken out) found in another that flags the pair.
DEFAULT_THRESHOLD = 0.6
#: The share of a submission's code found in the starter that makes it a copy of the starter.
STARTER_THRESHOLD = 0.9
#: The shortest matching run (characters of tokenised code) counted; copydetect's noise threshold.
NOISE = 20
#: A flag needs at least this many matching tokens, so that two files that each add one line to the
#: starter are not "100% the same".
MIN_OVERLAP = 40

MODEL = "the model answer"
STARTER = "the starter"


@dataclass(frozen=True)
class Flag:
    student: str
    kind: str  # "pair" (another student), "model" (the model answer), "starter" (the starter unchanged)
    other: str  # the other student, or MODEL / STARTER
    similarity: float  # the share of the student's code found in the other (0..1)
    other_similarity: float  # the share of the other's code found in the student's
    file: str  # which of the exercise's files

    @property
    def text(self) -> str:
        """The flag as one line for a note: what, how much, which file."""
        pct = f"{self.similarity:.0%}"
        if self.kind == "model":
            return f"similarity: {pct} of {self.file} matches the model answer"
        if self.kind == "starter":
            return f"similarity: {self.file} is the starter unchanged ({pct} of it)"
        return f"similarity: {pct} of {self.file} matches {self.other}'s ({self.other_similarity:.0%} of theirs)"

    def to_dict(self) -> dict:
        return {**asdict(self), "text": self.text}


@dataclass
class Similarity:
    flags: list[Flag] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (student, why a file was not compared or cut)
    report: Path | None = None  # copydetect's HTML report, when one was written
    compared: int = 0  # students whose files were compared
    threshold: float = DEFAULT_THRESHOLD

    def of(self, student: str) -> list[Flag]:
        return [f for f in self.flags if f.student == student]

    def notes(self, student: str) -> list[str]:
        """Every flag and skip of ``student``, as lines for a note."""
        return [f.text for f in self.of(student)] + [f"similarity: {why}" for s, why in self.skipped if s == student]

    def to_dict(self) -> dict:
        return {"threshold": self.threshold, "compared": self.compared, "report": str(self.report) if self.report else None,
                "flags": [f.to_dict() for f in self.flags],
                "skipped": [{"student": s, "why": w} for s, w in self.skipped]}


def available() -> bool:
    try:
        import copydetect  # noqa: F401
    except ImportError:
        return False
    return True


def _require():
    os.environ.setdefault("MPLBACKEND", "Agg")  # copydetect draws its report's charts with matplotlib: no window
    try:
        import copydetect
    except ImportError:
        raise InputError("--similarity needs copydetect, which is not installed: pip install 'protolab[similarity]' "
                         "(or pip install copydetect)", code="E_NO_SIMILARITY") from None
    return copydetect


def _vet(path: Path, root: Path) -> tuple[str | None, str | None]:
    """(text, None) for a file that may be compared (capped at FILE_CAP), else (None, why); a cut file
    is (text, why)."""
    try:
        if path.is_symlink():
            return None, f"{path.name} is a symbolic link: not compared"
        real = path.resolve()
        if not real.is_relative_to(root.resolve()):
            return None, f"{path.name} lies outside the submission's folder: not compared"
        if not path.is_file():
            return None, f"{path.name} is not a regular file: not compared"
        with open(path, "rb") as fh:
            data = fh.read(FILE_CAP + 1)
    except OSError as e:
        return None, f"{path.name} cannot be read ({e.strerror or e}): not compared"
    cut = len(data) > FILE_CAP
    data = data[:FILE_CAP]
    if b"\x00" in data:
        return None, f"{path.name} is binary, not text: not compared"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if not (cut and e.start >= len(data) - 4):  # a character cut in two at the cap is not binary
            return None, f"{path.name} is not UTF-8 text: not compared"
        text = data[: e.start].decode("utf-8")
    return text, (f"{path.name} is over {FILE_CAP // 1024} KB: only its first {FILE_CAP // 1024} KB compared"
                  if cut else None)


def _slug(name: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:60].strip("._") or "student"
    slug, n = base, 1
    while slug in taken:
        n += 1
        slug = f"{base}-{n}"
    taken.add(slug)
    return slug


def check_similarity(ex, subs, *, threshold: float = DEFAULT_THRESHOLD, report: Path | None = None,
                     reads=()) -> Similarity:
    """Compare the files of ``subs`` (:class:`~sim.course.grade.Submission`, collected) with each other
    and with ``ex``'s model answer and starter; flag a pair or a copy when at least ``threshold`` of a
    file's own code (the starter taken out) matches. ``report``: where to write copydetect's HTML report
    of the matching lines (never over one of ``reads``)."""
    if not 0 < threshold <= 1:
        raise InputError(f"--similarity-threshold must be above 0 and at most 1, not {threshold:g}", code="E_USAGE")
    _require()  # copydetect installed, or the one-line refusal that says how
    from copydetect import CodeFingerprint, CopyDetector, compare_files

    from .catalog import solutions_dir

    out = Similarity(threshold=threshold)
    files = list(ex.files)
    exts = sorted({Path(f).suffix.lstrip(".") or "*" for f in files})
    with tempfile.TemporaryDirectory(prefix="protolab-similarity-") as tmp:
        root = Path(tmp)
        students = root / "students"
        who: dict[str, str] = {}  # staged folder -> student
        taken: set[str] = set()
        for s in subs:
            if s.folder is None:
                continue
            slug = _slug(s.name, taken)
            staged = 0
            for f in files:
                text, why = _vet(s.folder / f, s.folder)
                if why:
                    out.skipped.append((s.name, why))
                if text is None:
                    continue
                dest = students / slug / f
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(text, encoding="utf-8")
                staged += 1
            if staged:
                who[slug] = s.name
        out.compared = len(who)
        model = root / "model-answer"
        sol = solutions_dir(ex)
        for f in files:
            src = sol / f if sol is not None else None
            if src is not None and src.is_file():
                (model / f).parent.mkdir(parents=True, exist_ok=True)
                (model / f).write_text(src.read_text(encoding="utf-8", errors="replace"), encoding="utf-8")
        boiler = [p for p in sorted(ex.folder.rglob("*"))
                  if p.is_file() and not p.is_symlink() and p.suffix.lstrip(".") in exts and "__pycache__" not in p.parts]
        if not who:
            return out
        detector = CopyDetector(test_dirs=[str(students)], ref_dirs=[str(students)] + ([str(model)] if model.is_dir() else []),
                                extensions=exts, noise_t=NOISE, guarantee_t=NOISE, display_t=min(threshold, 0.99),
                                same_name_only=True, ignore_leaf=True, autoopen=False, silent=True,
                                out_file=str(root / "report.html"))
        for p in boiler:
            detector.add_file(str(p), type="boilerplate")
        detector.run()

        def name_of(path: str) -> tuple[str, str]:
            rel = Path(path).relative_to(root)
            if rel.parts[0] == "model-answer":
                return MODEL, str(Path(*rel.parts[1:]))
            return who[rel.parts[1]], str(Path(*rel.parts[2:]))

        seen: set[tuple] = set()
        sims = detector.similarity_matrix
        for i, test_f in enumerate(detector.test_files):
            for j, ref_f in enumerate(detector.ref_files):
                if not len(sims) or sims[i, j, 0] < 0:
                    continue
                a, b = float(sims[i, j, 0]), float(sims[i, j, 1])
                if max(a, b) < threshold or int(detector.token_overlap_matrix[i, j]) < MIN_OVERLAP:
                    continue
                student, file = name_of(test_f)
                other, _ = name_of(ref_f)
                if other == MODEL:
                    out.flags.append(Flag(student, "model", MODEL, a, b, file))
                    continue
                key = (file, *sorted((student, other)))
                if key in seen:
                    continue
                seen.add(key)
                out.flags.append(Flag(student, "pair", other, a, b, file))
                out.flags.append(Flag(other, "pair", student, b, a, file))
        # a copy of the starter: its code is all boilerplate, so it is compared with the starter itself
        for slug, student in who.items():
            for f in files:
                mine, start = students / slug / f, ex.folder / f
                if not mine.is_file() or not start.is_file():
                    continue
                try:
                    fa = CodeFingerprint(str(mine), NOISE, 1)
                    fb = CodeFingerprint(str(start), NOISE, 1)
                except (UnicodeDecodeError, ValueError):
                    continue
                if not fa.token_coverage:
                    continue
                _overlap, (a, b), _slices = compare_files(fa, fb)
                if float(a) >= STARTER_THRESHOLD:
                    out.flags.append(Flag(student, "starter", STARTER, float(a), float(b), f))
        if report is not None:
            import warnings

            with warnings.catch_warnings():  # copydetect 0.5 reads its template with a deprecated importlib call
                warnings.simplefilter("ignore", DeprecationWarning)
                html = detector.generate_html_report(output_mode="return") if len(detector.similarity_matrix) else None
            if html is not None:
                from ..files import written_whole

                html = html.replace(str(students) + "/", "").replace(str(root) + "/", "")
                Path(report).parent.mkdir(parents=True, exist_ok=True)
                with written_whole(Path(report), code="E_OUTPUT", reads=reads, option="--similarity") as fh:
                    fh.write(html)
                out.report = Path(report)
    out.flags.sort(key=lambda f: (f.student, f.kind, -f.similarity, f.other))
    return out
