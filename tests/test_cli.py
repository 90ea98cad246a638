"""The ``protolab`` command line, driven the way a student drives it.

Every command runs in-process through :func:`sim.cli.main` (it always ends in
``SystemExit``), and one test runs the real ``python -m sim`` in a subprocess to show
that no traceback reaches a user. Databases live in ``tmp_path``; the sample files are
read from the repository's ``data/`` folder.

Bugs this suite found (usage errors from Typer's vendored click, huge integers, a foreign
``meta`` table, a reconcile the machine refuses) are fixed; their tests stay as regressions.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import random
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sim.cli import main
from sim.digest import SCHEMES, digest

DATA = Path(__file__).parent.parent / "data"
ENVELOPES = DATA / "envelopes"
ARTIFACTS = DATA / "artifacts"
MACHINES = DATA / "machines"

ERROR_LINE = re.compile(r"^error: (E_[A-Z0-9_]+): .+$")  # digits: E_NOT_UTF8

SAMPLES = (
    "ack.json",
    "conflicting-digest.json",
    "duplicate.json",
    "happy-path.json",
    "jcs-v2.json",
    "late-failure.json",
    "rejected.json",
)


# ---------------------------------------------------------------------------- helpers


def _invoke(args) -> tuple[int | str | None, bool]:
    """Run ``main(args)``; return (exit code, whether main exited through SystemExit)."""
    try:
        main([str(a) for a in args])
    except SystemExit as e:
        return e.code, True
    except Exception as e:  # noqa: BLE001 - this is exactly what must never happen
        return f"uncaught {type(e).__name__}: {e}", False
    return None, False


def run(capsys, *args) -> tuple[int | None, str, str]:
    """Run the CLI in-process; return (exit status, stdout, stderr)."""
    capsys.readouterr()  # drop anything printed before
    code, exited = _invoke(args)
    out, err = capsys.readouterr()
    if not exited:
        pytest.fail(
            f"protolab {' '.join(map(str, args))} did not end in SystemExit ({code}); "
            "a user would see a traceback"
        )
    return code, out, err


def ok(capsys, *args) -> str:
    code, out, err = run(capsys, *args)
    assert code == 0, f"protolab {' '.join(map(str, args))} exited {code}: {err}"
    assert "Traceback" not in out + err
    return out


def ok_json(capsys, *args):
    return json.loads(ok(capsys, *args, "--json"))


def ok_json_plain(capsys, *args):
    """For commands that print JSON without a --json flag (artifact show)."""
    return json.loads(ok(capsys, *args))


def quiet(*args) -> None:
    """Run the CLI outside capsys (session fixtures), insisting it succeeds."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code, exited = _invoke(args)
    assert exited and code == 0, f"setup command {args} failed: {code} {err.getvalue()}"


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every file in ``folder``: equal snapshots, byte-for-byte equal files."""
    if not folder.exists():
        return {}
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def assert_one_error_line(code, out: str, err: str, expected: str | tuple[str, ...]) -> None:
    """Exit 2, exactly one ``error: E_CODE: message`` line on stderr, nothing on stdout.

    ``expected`` is the code, or (for a known bug whose fix may pick either) the codes accepted.
    """
    assert "Traceback" not in out + err
    assert code == 2, f"exit {code}, stderr {err!r}"
    assert err.endswith("\n") and err.count("\n") == 1, f"stderr is not exactly one line: {err!r}"
    m = ERROR_LINE.match(err.rstrip("\n"))
    assert m, f"stderr does not read 'error: E_CODE: message': {err!r}"
    accepted = (expected,) if isinstance(expected, str) else expected
    assert m.group(1) in accepted, f"expected {expected}, got {err!r}"
    assert out == "", f"an error printed to stdout: {out!r}"


def by_task(state: dict) -> dict[str, dict]:
    return {t["task_id"]: t for t in state["tasks"]}


# ---------------------------------------------------------------------------- sample inputs

HAPPY = json.loads((ENVELOPES / "happy-path.json").read_text(encoding="utf-8"))
M1 = HAPPY[0]  # a valid task_request: the base every bad envelope is mutated from


def envelope(mutate=None, *, redigest: bool = True, array: bool = False) -> bytes:
    """A copy of M-1, mutated, with its digest recomputed so only the targeted error fires."""
    e = copy.deepcopy(M1)
    if mutate is not None:
        mutate(e)
    if redigest and isinstance(e.get("payload"), dict) and e.get("digest_scheme") in SCHEMES:
        e["payload_digest"] = digest(e["payload"], e["digest_scheme"])
    return json.dumps([e] if array else e, indent=2, ensure_ascii=False).encode("utf-8")


def _with_payload(**extra):
    def mutate(e):
        e["payload"].update(extra)

    return mutate


def _set(**fields):
    def mutate(e):
        e.update(fields)

    return mutate


def _drop(name):
    def mutate(e):
        del e[name]

    return mutate


def _drop_payload(name):
    def mutate(e):
        del e["payload"][name]

    return mutate


def _nan_literal(value: float) -> bytes:
    """M-1 with a NaN/Infinity literal in its payload (json.dumps writes NaN, Infinity, -Infinity)."""
    e = copy.deepcopy(M1)
    e["payload"]["score"] = value
    text = json.dumps(e)
    assert any(lit in text for lit in ("NaN", "Infinity"))
    return text.encode("utf-8")


def _dup_top_level_key() -> bytes:
    text = json.dumps(M1)
    return (text[:-1] + ', "type": "ack"}').encode("utf-8")


def _dup_payload_key() -> bytes:
    text = json.dumps(M1)
    assert '"goal": "collect evidence"' in text
    return text.replace('"goal": "collect evidence"', '"goal": "collect evidence", "goal": "collect less"').encode()


def _edited_after_digest_in_array() -> bytes:
    """happy-path.json with M-3's payload edited after digesting: entries 0 and 1 are valid."""
    envs = copy.deepcopy(HAPPY)
    envs[2]["payload"]["summary"] = "4 claims"
    return json.dumps(envs).encode()


def _bad_envelope_in_array() -> bytes:
    envs = copy.deepcopy(HAPPY)
    envs[3]["type"] = "receipt"
    return json.dumps(envs).encode()


NOT_UTF8 = envelope().replace(b"collect evidence", b"collect \xff\xfe evidence")
LATIN1 = envelope().replace(b"collect evidence", "collecte de preuves r\u00e9elles".encode("latin-1"))
FACTS_BYTES = (ARTIFACTS / "facts-T-1.json").read_bytes()

V2_TOML = (MACHINES / "task-v2.toml").read_text(encoding="utf-8")
V3_TOML = V2_TOML.replace('version = "task-v2"', 'version = "task-v3"')
assert V3_TOML != V2_TOML


def _toml_replace(old: str, new: str) -> bytes:
    assert old in V3_TOML
    return V3_TOML.replace(old, new, 1).encode("utf-8")


BAD_TOML = {
    "malformed-toml": (b'version = "task-x"\n[[rule]\nfrom = "pending"\nto = \n', "E_TOML"),
    "unknown-to-state": (_toml_replace('to = "ready"', 'to = "done"'), "E_UNKNOWN_STATE"),
    "unknown-from-state": (_toml_replace('from = "pending"', 'from = "limbo"'), "E_UNKNOWN_STATE"),
    "unknown-role": (_toml_replace('roles = ["manager"]', 'roles = ["boss"]'), "E_UNKNOWN_ROLE"),
    "missing-version": (_toml_replace('version = "task-v3"', ""), "E_MISSING_FIELD"),
    "not-utf8": (V3_TOML.encode("utf-8").replace(b"task assigned", b"task \xe9 assigned"), "E_NOT_UTF8"),
}


# ---------------------------------------------------------------------------- databases


def _make_foreign(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    con.execute("INSERT INTO notes (body) VALUES ('not a protolab database')")
    con.commit()
    con.close()


def _make_foreign_with_meta(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE meta (k TEXT, v TEXT)")
    con.execute("INSERT INTO meta VALUES ('owner', 'another app')")
    con.commit()
    con.close()


@pytest.fixture(scope="session")
def templates(tmp_path_factory) -> dict[str, Path]:
    """Databases built once and copied into each test (every one closed, WAL checkpointed)."""
    root = tmp_path_factory.mktemp("templates")
    t: dict[str, Path] = {}

    t["fresh"] = root / "fresh.db"
    quiet("init", "--db", t["fresh"])

    t["happy"] = root / "happy.db"
    quiet("init", "--db", t["happy"])
    quiet("deliver", "--db", t["happy"], ENVELOPES / "happy-path.json")

    t["conflict"] = root / "conflict.db"
    quiet("init", "--db", t["conflict"])
    quiet("deliver", "--db", t["conflict"], ENVELOPES / "conflicting-digest.json")

    t["newer"] = root / "newer.db"
    shutil.copyfile(t["fresh"], t["newer"])
    con = sqlite3.connect(t["newer"])
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()

    t["corrupt"] = root / "corrupt.db"
    t["corrupt"].write_bytes(random.Random(1).randbytes(8192))

    t["corrupt-header"] = root / "corrupt-header.db"
    t["corrupt-header"].write_bytes(b"SQLite format 3\x00" + random.Random(2).randbytes(8192))

    # 64 zeroed bytes mid-file, on a page boundary: PRAGMA integrity_check calls the file malformed
    t["damaged"] = root / "damaged.db"
    raw = bytearray(t["happy"].read_bytes())
    mid = len(raw) // 2 // 4096 * 4096
    raw[mid:mid + 64] = bytes(64)
    t["damaged"].write_bytes(bytes(raw))

    t["truncated"] = root / "truncated.db"
    t["truncated"].write_bytes(t["happy"].read_bytes()[: len(raw) // 2 // 4096 * 4096])

    t["foreign"] = root / "foreign.db"
    _make_foreign(t["foreign"])

    t["foreign-meta"] = root / "foreign-meta.db"
    _make_foreign_with_meta(t["foreign-meta"])

    t["empty"] = root / "empty.db"
    t["empty"].write_bytes(b"")

    for p in t.values():
        assert not Path(str(p) + "-wal").exists()
    return t


@pytest.fixture
def workspace(tmp_path, templates):
    """(db folder, factory) where factory(kind) puts a database of that kind at db/run.db."""
    db_dir = tmp_path / "db"
    db_dir.mkdir()

    def make(kind: str) -> Path:
        db = db_dir / "run.db"
        if kind != "none":
            shutil.copyfile(templates[kind], db)
        return db

    return db_dir, make


# ---------------------------------------------------------------------------- 1. bad input

# Each case: (id, database kind, argv with {db}/{in}/{data} placeholders, input bytes or None, code).
# "none" means no database file exists, and none may be created.


def _envelope_cases():
    fresh = "fresh"
    deliver = ["deliver", "{in}", "--db", "{db}"]
    rows = [
        ("malformed-json", b'{"message_id": "M-1", "type": ', "E_JSON"),
        ("trailing-garbage", envelope() + b"\n}", "E_JSON"),
        ("duplicate-key", _dup_top_level_key(), "E_DUPLICATE_KEY"),
        ("duplicate-key-in-payload", _dup_payload_key(), "E_DUPLICATE_KEY"),
        ("nan-literal", _nan_literal(float("nan")), "E_NAN"),
        ("infinity-literal", _nan_literal(float("inf")), "E_NAN"),
        ("minus-infinity-literal", _nan_literal(float("-inf")), "E_NAN"),
        ("overflowing-float-1e400", envelope(redigest=False).replace(b'"budget": 3', b'"budget": 3, "x": 1e400'), "E_NAN"),
        ("not-utf8", NOT_UTF8, "E_NOT_UTF8"),
        ("latin1", LATIN1, "E_NOT_UTF8"),
        ("empty-array", b"[]", "E_EMPTY"),
        ("missing-field", envelope(_drop("idempotency_key")), "E_MISSING_FIELD"),
        ("missing-evidence-refs", envelope(_drop("evidence_refs")), "E_MISSING_FIELD"),
        ("missing-payload-goal", envelope(_drop_payload("goal")), "E_MISSING_FIELD"),
        ("payload-as-string", envelope(_set(payload="collect evidence")), "E_FIELD_TYPE"),
        ("evidence-refs-as-string", envelope(_set(evidence_refs="M-3")), "E_FIELD_TYPE"),
        ("evidence-ref-not-a-string", envelope(_set(evidence_refs=[3])), "E_FIELD_TYPE"),
        ("message-id-as-number", envelope(_set(message_id=1)), "E_FIELD_TYPE"),
        ("budget-as-string", envelope(_with_payload(budget="3")), "E_FIELD_TYPE"),
        ("budget-as-true", envelope(_with_payload(budget=True)), "E_FIELD_TYPE"),
        ("entry-is-a-number", b"[1]", "E_FIELD_TYPE"),
        ("unknown-message-type", envelope(_set(type="task_done")), "E_UNKNOWN_TYPE"),
        ("unknown-field", envelope(_set(priority="high")), "E_UNKNOWN_FIELD"),
        ("unknown-digest-scheme", envelope(_set(digest_scheme="md5-v0")), "E_UNKNOWN_SCHEME"),
        ("unknown-sender", envelope(_set(sender="boss")), "E_UNKNOWN_ROLE"),
        ("unknown-recipient", envelope(_set(recipient="nobody")), "E_UNKNOWN_ROLE"),
        ("schema-version-2", envelope(_set(schema_version="2")), "E_SCHEMA_VERSION"),
        ("payload-edited-after-digest", envelope(_with_payload(budget=30), redigest=False), "E_DIGEST_MISMATCH"),
        ("array-third-entry-edited-after-digest", _edited_after_digest_in_array(), "E_DIGEST_MISMATCH"),
        ("array-fourth-entry-unknown-type", _bad_envelope_in_array(), "E_UNKNOWN_TYPE"),
    ]
    out = [(f"deliver-{name}", fresh, deliver, data, code) for name, data, code in rows]
    out.append(("deliver-bad-digest.json", fresh, ["deliver", "{data}/envelopes/bad-digest.json", "--db", "{db}"], None, "E_DIGEST_MISMATCH"))
    out.append(("deliver-bad-digest.json-json", fresh, ["deliver", "{data}/envelopes/bad-digest.json", "--db", "{db}", "--json"], None, "E_DIGEST_MISMATCH"))
    out.append(("deliver-bad-digest.json-on-happy-db", "happy", ["deliver", "{data}/envelopes/bad-digest.json", "--db", "{db}"], None, "E_DIGEST_MISMATCH"))
    out.append(("deliver-missing-input-file", fresh, ["deliver", "{in}.nope", "--db", "{db}"], b"", "E_FILE_MISSING"))
    return out


def _json_file_cases():
    """digest and artifact put read any JSON value, strictly."""
    rows = [
        ("malformed-json", b'{"kind": "fact-table", ', "E_JSON"),
        ("duplicate-key", b'{"kind": "fact-table", "kind": "draft"}', "E_DUPLICATE_KEY"),
        ("nan-literal", b'{"kind": "fact-table", "score": NaN}', "E_NAN"),
        ("infinity-literal", b'{"kind": "fact-table", "score": -Infinity}', "E_NAN"),
        ("overflowing-float-1e400", b'{"kind": "fact-table", "score": 1e400}', "E_NAN"),
        ("not-utf8", b'{"kind": "fact-\xff-table"}', "E_NOT_UTF8"),
    ]
    out = []
    for name, data, code in rows:
        out.append((f"digest-{name}", "none", ["digest", "{in}"], data, code))
        out.append((f"artifact-put-{name}", "fresh", ["artifact", "put", "{in}", "--db", "{db}", "--kind", "fact-table", "--task", "T-1"], data, code))
    out.append(("digest-unknown-scheme", "none", ["digest", "{in}", "--scheme", "md5-v0"], FACTS_BYTES, "E_UNKNOWN_SCHEME"))
    out.append(("digest-unknown-scheme-bytes", "none", ["digest", "{in}", "--scheme", "md5-v0", "--bytes"], FACTS_BYTES, "E_UNKNOWN_SCHEME"))
    return out


def _machine_cases():
    out = []
    for name, (data, code) in BAD_TOML.items():
        out.append((f"init-machine-{name}", "none", ["init", "--db", "{db}", "--machine", "{in}"], data, code))
        out.append((f"machine-load-{name}", "fresh", ["machine", "load", "{in}", "--db", "{db}"], data, code))
        out.append((f"machine-check-{name}", "none", ["machine", "check", "{in}"], data, code))
    out.append(("machine-load-task-v1-again", "fresh", ["machine", "load", str(Path(__file__).parent.parent / "sim" / "machines" / "task-v1.toml"), "--db", "{db}"], None, "E_MACHINE_EXISTS"))
    return out


def _reconcile_cases():
    base = ["reconcile", "T-1", "--db", "{db}", "--decision", "ready"]
    return [
        ("reconcile-by-writer", "conflict", base + ["--by", "writer", "--evidence", "M-3"], None, "E_ROLE_NOT_ALLOWED"),
        ("reconcile-by-manager", "conflict", base + ["--by", "manager", "--evidence", "M-3"], None, "E_ROLE_NOT_ALLOWED"),
        ("reconcile-by-unknown-role", "conflict", base + ["--by", "boss", "--evidence", "M-3"], None, "E_UNKNOWN_ROLE"),
        ("reconcile-task-not-in-review", "happy", base + ["--by", "reviewer", "--evidence", "M-3"], None, "E_NOT_IN_REVIEW"),
        ("reconcile-evidence-not-stored", "conflict", base + ["--by", "reviewer", "--evidence", "M-3", "--evidence", "M-99"], None, "E_EVIDENCE_UNRESOLVED"),
        ("reconcile-artifact-not-stored", "conflict", base + ["--by", "reviewer", "--evidence", "sha256:" + "0" * 64], None, "E_EVIDENCE_UNRESOLVED"),
        ("reconcile-unknown-decision", "conflict", ["reconcile", "T-1", "--db", "{db}", "--decision", "approve", "--by", "reviewer", "--evidence", "M-3"], None, "E_UNKNOWN_VALUE"),
        ("reconcile-unknown-task", "conflict", ["reconcile", "T-9", "--db", "{db}", "--decision", "ready", "--by", "reviewer", "--evidence", "M-3"], None, "E_UNKNOWN_TASK"),
        ("reconcile-missing-db", "none", base + ["--by", "reviewer", "--evidence", "M-3"], None, "E_DB_MISSING"),
    ]


_BAD_DBS = {
    "none": "E_DB_MISSING",
    "corrupt": "E_DB_CORRUPT",
    "corrupt-header": "E_DB_CORRUPT",
    "damaged": "E_DB_CORRUPT",
    "truncated": "E_DB_CORRUPT",
    "foreign": "E_DB_NOT_PROTOLAB",
    "empty": "E_DB_NOT_PROTOLAB",
    "newer": "E_DB_SCHEMA_NEWER",
}


def _database_cases():
    commands = {
        "messages": ["messages", "--db", "{db}"],
        "messages-json": ["messages", "--db", "{db}", "--json"],
        "events": ["events", "--db", "{db}"],
        "events-json": ["events", "--db", "{db}", "--json"],
        "state": ["state", "--db", "{db}"],
        "state-json": ["state", "--db", "{db}", "--json"],
        "check": ["check", "--db", "{db}"],
        "replay": ["replay", "--db", "{db}"],
        "trace-export": ["trace", "export", "--db", "{db}"],
        "a2a-export": ["a2a", "export", "--db", "{db}"],
        "artifact-show": ["artifact", "show", "sha256:" + "0" * 64, "--db", "{db}"],
        "reconcile": ["reconcile", "T-1", "--db", "{db}", "--decision", "ready", "--by", "reviewer", "--evidence", "M-3"],
    }
    out = []
    for kind, code in _BAD_DBS.items():
        for name, argv in commands.items():
            out.append((f"{name}-on-{kind}-db", kind, argv, None, code))
        out.append((f"deliver-on-{kind}-db", kind, ["deliver", "{data}/envelopes/happy-path.json", "--db", "{db}"], None, code))
        out.append((f"artifact-put-on-{kind}-db", kind, ["artifact", "put", "{data}/artifacts/facts-T-1.json", "--db", "{db}"], None, code))
        out.append((f"machine-load-on-{kind}-db", kind, ["machine", "load", "{data}/machines/task-v2.toml", "--db", "{db}"], None, code))
        out.append((f"machine-show-on-{kind}-db", kind, ["machine", "show", "--db", "{db}"], None, code))
    for kind in ("foreign", "corrupt"):
        out.append((f"tour-on-{kind}-db", kind, ["tour", "--db", "{db}"], None, _BAD_DBS[kind]))
    out.append(("init-over-protolab-db", "fresh", ["init", "--db", "{db}"], None, "E_DB_EXISTS"))
    out.append(("init-over-other-file", "corrupt", ["init", "--db", "{db}"], None, "E_DB_EXISTS"))
    out.append(("init-over-foreign-sqlite", "foreign", ["init", "--db", "{db}", "--machine", "{data}/machines/task-v2.toml"], None, "E_DB_EXISTS"))
    out.append(("init-bad-start-time", "none", ["init", "--db", "{db}", "--start-time", "yesterday"], None, "E_FIELD_VALUE"))
    out.append(("events-unknown-type", "happy", ["events", "--db", "{db}", "--type", "gossip"], None, "E_UNKNOWN_VALUE"))
    return out


BAD_INPUT_CASES = _envelope_cases() + _json_file_cases() + _machine_cases() + _reconcile_cases() + _database_cases()
assert len({c[0] for c in BAD_INPUT_CASES}) == len(BAD_INPUT_CASES), "case ids must be unique"


def _prepare(case, tmp_path, make):
    _id, kind, argv, data, _code = case
    db = make(kind)
    inputs = tmp_path / "in"
    inputs.mkdir()
    src = inputs / ("input.toml" if "machine" in _id else "input.json")
    if data is not None:
        src.write_bytes(data)
    return [a.format(db=db, data=DATA, **{"in": src}) for a in argv]


def _check_bad_input(case, tmp_path, workspace, capsys):
    db_dir, make = workspace
    argv = _prepare(case, tmp_path, make)
    before = snapshot(db_dir)
    code, out, err = run(capsys, *argv)
    assert_one_error_line(code, out, err, case[4])
    assert snapshot(db_dir) == before, "the database folder changed (a file was written, created or left behind)"


@pytest.mark.parametrize("case", BAD_INPUT_CASES, ids=[c[0] for c in BAD_INPUT_CASES])
def test_bad_input_exits_2_with_one_error_line_and_leaves_the_database_byte_for_byte_unchanged(case, tmp_path, workspace, capsys):
    _check_bad_input(case, tmp_path, workspace, capsys)


def test_the_bad_input_matrix_covers_every_required_error_code():
    required = {
        "E_JSON", "E_DUPLICATE_KEY", "E_NAN", "E_NOT_UTF8", "E_EMPTY", "E_MISSING_FIELD", "E_FIELD_TYPE",
        "E_UNKNOWN_TYPE", "E_UNKNOWN_FIELD", "E_UNKNOWN_SCHEME", "E_UNKNOWN_ROLE", "E_SCHEMA_VERSION",
        "E_DIGEST_MISMATCH", "E_UNKNOWN_STATE", "E_TOML", "E_ROLE_NOT_ALLOWED", "E_NOT_IN_REVIEW",
        "E_EVIDENCE_UNRESOLVED", "E_DB_MISSING", "E_DB_CORRUPT", "E_DB_NOT_PROTOLAB", "E_DB_SCHEMA_NEWER",
        "E_DB_EXISTS",
    }
    assert required <= {c[4] for c in BAD_INPUT_CASES}
    commands = {tuple(c[2][:2]) if c[2][0] in ("machine", "artifact") else (c[2][0],) for c in BAD_INPUT_CASES}
    for cmd in [("deliver",), ("init",), ("machine", "load"), ("machine", "check"), ("reconcile",),
                ("artifact", "put"), ("digest",), ("messages",), ("events",), ("state",)]:
        assert cmd in commands, cmd


# Known bugs: input that still gets a traceback, or the wrong code.

_SURROGATE_PAYLOAD = envelope(redigest=False).replace(b"collect evidence", b"collect \\ud800 evidence")
_SURROGATE_REF = envelope(_set(evidence_refs=["\\ud800"])).replace(b"\\\\ud800", b"\\ud800")
_HUGE_INT = envelope(redigest=False).replace(b'"budget": 3', b'"budget": ' + b"9" * 5000)
assert b"\\ud800" in _SURROGATE_PAYLOAD and b'"\\ud800"' in _SURROGATE_REF and b"9" * 5000 in _HUGE_INT

_HUGE_INT_CODES = ("E_JSON", "E_DIGEST_DOMAIN", "E_FIELD_VALUE")

# A JSON "\\ud800" escape parses into a lone surrogate, which has no UTF-8 form: refused by the digest.
SURROGATE_CASES = [
    ("deliver-lone-surrogate-in-payload", "fresh", ["deliver", "{in}", "--db", "{db}"], _SURROGATE_PAYLOAD, "E_DIGEST_DOMAIN"),
    ("deliver-lone-surrogate-in-evidence-refs", "fresh", ["deliver", "{in}", "--db", "{db}"], _SURROGATE_REF, "E_DIGEST_DOMAIN"),
    ("digest-lone-surrogate", "none", ["digest", "{in}"], b'{"a": "\\ud800"}', "E_DIGEST_DOMAIN"),
    ("digest-lone-surrogate-jcs-v2", "none", ["digest", "{in}", "--scheme", "jcs-v2"], b'{"a": "\\ud800"}', "E_DIGEST_DOMAIN"),
    ("artifact-put-lone-surrogate", "fresh", ["artifact", "put", "{in}", "--db", "{db}"], b'{"a": "\\udfff"}', "E_DIGEST_DOMAIN"),
]


@pytest.mark.parametrize("case", SURROGATE_CASES, ids=[c[0] for c in SURROGATE_CASES])
def test_a_lone_surrogate_is_refused_with_one_error_line_and_nothing_written(case, tmp_path, workspace, capsys):
    _check_bad_input(case, tmp_path, workspace, capsys)


REGRESSION_CASES = [
    pytest.param(("deliver-huge-integer", "fresh", ["deliver", "{in}", "--db", "{db}"], _HUGE_INT, _HUGE_INT_CODES), id="deliver-huge-integer"),
    pytest.param(("digest-huge-integer", "none", ["digest", "{in}"], b"9" * 5000, _HUGE_INT_CODES), id="digest-huge-integer"),
    pytest.param(("artifact-put-huge-integer", "fresh", ["artifact", "put", "{in}", "--db", "{db}"], b"[" + b"1" * 4400 + b"]", _HUGE_INT_CODES), id="artifact-put-huge-integer"),
    pytest.param(("state-on-foreign-db-with-meta-table", "foreign-meta", ["state", "--db", "{db}"], None, "E_DB_NOT_PROTOLAB"), id="state-on-foreign-db-with-meta-table"),
    pytest.param(("deliver-on-foreign-db-with-meta-table", "foreign-meta", ["deliver", "{data}/envelopes/happy-path.json", "--db", "{db}"], None, "E_DB_NOT_PROTOLAB"), id="deliver-on-foreign-db-with-meta-table"),
]


@pytest.mark.parametrize("case", REGRESSION_CASES)
def test_bad_input_that_still_escapes_the_error_contract(case, tmp_path, workspace, capsys):
    _check_bad_input(case, tmp_path, workspace, capsys)


@pytest.mark.slow  # measured over 25 s in the quick loop at load 6-10 on 2 cores (2026-12-07)
def test_no_traceback_reaches_a_user_of_the_real_command(tmp_path):
    """The same contract through ``python -m sim`` in a subprocess (what a student runs)."""
    db = tmp_path / "run.db"
    init = subprocess.run([sys.executable, "-m", "sim", "init", "--db", str(db)], capture_output=True, text=True, cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(random.Random(3).randbytes(4096))
    bad_json = tmp_path / "bad.json"
    bad_json.write_bytes(b'{"message_id": "M-1", "message_id": "M-2"}')
    cases = [
        (["deliver", str(ENVELOPES / "bad-digest.json"), "--db", str(db)], "E_DIGEST_MISMATCH", db),
        (["deliver", str(bad_json), "--db", str(db)], "E_DUPLICATE_KEY", db),
        (["state", "--db", str(corrupt)], "E_DB_CORRUPT", corrupt),
        (["events", "--db", str(tmp_path / "missing.db")], "E_DB_MISSING", None),
        (["reconcile", "T-1", "--db", str(db), "--decision", "ready", "--by", "writer", "--evidence", "M-3"], "E_ROLE_NOT_ALLOWED", db),
        (["init", "--db", str(db)], "E_DB_EXISTS", db),
    ]
    for argv, code, _touched in cases:
        before = snapshot(tmp_path)
        p = subprocess.run([sys.executable, "-m", "sim", *argv], capture_output=True, text=True, cwd=tmp_path)
        assert "Traceback" not in p.stdout + p.stderr, (argv, p.stderr)
        assert p.returncode == 2, (argv, p.returncode, p.stderr)
        lines = p.stderr.splitlines()
        assert len(lines) == 1 and ERROR_LINE.match(lines[0]) and lines[0].startswith(f"error: {code}: "), (argv, p.stderr)
        assert p.stdout == ""
        assert snapshot(tmp_path) == before, argv
    assert not (tmp_path / "missing.db").exists()


# ---------------------------------------------------------------------------- 2. usage errors

USAGE_CASES = [
    ("unknown-option", ["deliver", "--bogus", "x.json"]),
    ("missing-argument", ["deliver"]),
    ("missing-required-option", ["reconcile", "T-1", "--by", "reviewer", "--evidence", "M-3"]),
    ("option-without-value", ["state", "--db"]),
    ("unknown-command", ["publish"]),
    ("unknown-subcommand", ["machine", "unload"]),
]


@pytest.mark.parametrize("argv", [c[1] for c in USAGE_CASES], ids=[c[0] for c in USAGE_CASES])
def test_usage_errors_give_one_e_usage_line_and_exit_2(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert_one_error_line(code, out, err, "E_USAGE")
    assert list(tmp_path.iterdir()) == []


def test_a_usage_error_raised_by_protolab_itself_gives_one_e_usage_line(capsys):
    code, out, err = run(capsys, "bench", "intake", "-n", "3")
    assert_one_error_line(code, out, err, "E_USAGE")


# ---------------------------------------------------------------------------- 3. end to end


@pytest.fixture
def fresh_db(tmp_path, capsys):
    db = tmp_path / "run.db"
    out = ok(capsys, "init", "--db", db)
    assert "task-v1" in out and db.exists()
    return db


def deliver_json(capsys, db, name) -> list[dict]:
    path = name if isinstance(name, Path) else ENVELOPES / name
    return ok_json(capsys, "deliver", path, "--db", db)


def test_the_shipped_samples_are_the_ones_these_tests_walk_through():
    assert sorted(p.name for p in ENVELOPES.glob("*.json")) == sorted(SAMPLES + ("bad-digest.json",))


def test_every_sample_delivers_with_exit_0_and_one_decision_per_envelope(capsys, tmp_path):
    for name in SAMPLES:
        db = tmp_path / f"{name}.db"
        ok(capsys, "init", "--db", db)
        raw = json.loads((ENVELOPES / name).read_text(encoding="utf-8"))
        outcomes = deliver_json(capsys, db, name)
        assert len(outcomes) == (len(raw) if isinstance(raw, list) else 1), name
        for o in outcomes:
            assert {"message_id", "task_id", "decision", "code", "state", "state_version"} <= set(o), name


def test_happy_path_is_all_accepted_and_publishes_once(fresh_db, capsys):
    outcomes = deliver_json(capsys, fresh_db, "happy-path.json")
    assert [o["decision"] for o in outcomes] == ["accepted"] * 8
    assert [o["code"] for o in outcomes] == [None] * 8
    last = {o["task_id"]: o for o in outcomes if o["type"] != "ack"}
    assert (last["T-1"]["state"], last["T-1"]["state_version"]) == ("succeeded", 3)
    assert (last["T-2"]["state"], last["T-2"]["state_version"]) == ("succeeded", 3)
    state = ok_json(capsys, "state", "--db", fresh_db)
    tasks = by_task(state)
    assert {t: (v["state"], v["state_version"]) for t, v in tasks.items()} == {"T-1": ("succeeded", 3), "T-2": ("succeeded", 3)}
    assert [e["effect_key"] for e in state["effects"]] == ["publish:R-1:T-2"]
    assert state["effects"][0]["message_id"] == "M-6"


def test_duplicate_is_recorded_without_re_executing(fresh_db, capsys):
    outcomes = deliver_json(capsys, fresh_db, "duplicate.json")
    assert [o["decision"] for o in outcomes] == ["accepted", "accepted", "accepted", "duplicate"]
    assert outcomes[-1]["state"] == "succeeded"
    assert outcomes[-1]["state_version"] == outcomes[-2]["state_version"] == 3
    assert outcomes[-1]["reused"]["decision"] == "accepted"
    events = ok_json(capsys, "events", "--db", fresh_db)
    types = [e["type"] for e in events]
    assert types.count("duplicate_recorded") == 1
    assert types.count("transition_applied") == 3  # pending->ready->running->succeeded, nothing more
    dup = [e for e in events if e["type"] == "duplicate_recorded"][0]
    assert dup["message_id"] == "M-3" and dup["data"]["first_message_id"] == "M-3"
    assert all(e["seq"] < dup["seq"] for e in events if e["type"] == "transition_applied")
    state = ok_json(capsys, "state", "--db", fresh_db)
    (intent,) = [i for i in state["intents"] if i["idempotency_key"] == "R-1:T-1:attempt-1"]
    assert intent["seen"] == 2


def test_conflicting_digest_freezes_the_task_and_keeps_both_payloads(fresh_db, capsys):
    outcomes = deliver_json(capsys, fresh_db, "conflicting-digest.json")
    assert [o["decision"] for o in outcomes] == ["accepted", "accepted", "accepted", "conflict"]
    assert (outcomes[-1]["state"], outcomes[-1]["state_version"]) == ("needs_review", 4)

    state = ok_json(capsys, "state", "--db", fresh_db)
    t1 = by_task(state)["T-1"]
    assert t1["state"] == "needs_review"
    assert t1["trusted"] is False
    assert t1["a2a_state"] == "TASK_STATE_INPUT_REQUIRED"

    rows = [i for i in state["intents"] if i["idempotency_key"] == "R-1:T-1:attempt-1"]
    assert [r["message_id"] for r in rows] == ["M-3", "M-4"]
    assert rows[0]["arrival"] < rows[1]["arrival"]
    assert rows[0]["payload_digest"] != rows[1]["payload_digest"]
    assert [r["trusted"] for r in rows] == [0, 0]

    raw = {e["message_id"]: e for e in json.loads((ENVELOPES / "conflicting-digest.json").read_text(encoding="utf-8"))}
    kept = [a for a in state["artifacts"] if a["kind"] == "conflicting-payload"]
    assert sorted(a["message_id"] for a in kept) == ["M-3", "M-4"]
    for a in kept:
        assert a["ref"] == digest(raw[a["message_id"]]["payload"])
        shown = ok_json_plain(capsys, "artifact", "show", a["ref"], "--db", fresh_db)
        assert shown["content"] == raw[a["message_id"]]["payload"]

    events = ok_json(capsys, "events", "--db", fresh_db)
    (conflict,) = [e for e in events if e["type"] == "conflict_recorded"]
    assert conflict["data"]["first"]["message_id"] == "M-3" and conflict["data"]["second"]["message_id"] == "M-4"


def test_reviewer_releases_the_conflicted_task_citing_both_messages(fresh_db, capsys):
    deliver_json(capsys, fresh_db, "conflicting-digest.json")
    out = ok(capsys, "reconcile", "T-1", "--decision", "ready", "--by", "reviewer",
             "--evidence", "M-3", "--evidence", "M-4", "--db", fresh_db)
    assert "ready" in out
    state = ok_json(capsys, "state", "--db", fresh_db)
    t1 = by_task(state)["T-1"]
    assert (t1["state"], t1["state_version"]) == ("ready", 5)
    assert t1["trusted"] is True
    (approval,) = state["approvals"]
    assert approval["task_id"] == "T-1"
    assert approval["decision"] == "ready"
    assert approval["reviewer"] == "reviewer"
    assert approval["evidence"] == ["M-3", "M-4"]
    last = state["transitions"][-1]
    assert (last["old_state"], last["new_state"], last["executor"]) == ("needs_review", "ready", "reviewer")
    # The task is no longer frozen: a second reconcile is refused and writes nothing.
    before = snapshot(fresh_db.parent)
    code, out, err = run(capsys, "reconcile", "T-1", "--decision", "ready", "--by", "reviewer", "--evidence", "M-3", "--db", fresh_db)
    assert_one_error_line(code, out, err, "E_NOT_IN_REVIEW")
    assert snapshot(fresh_db.parent) == before


def test_reconcile_as_json_reports_the_accepted_review(fresh_db, capsys):
    deliver_json(capsys, fresh_db, "conflicting-digest.json")
    o = ok_json(capsys, "reconcile", "T-1", "--decision", "canceled", "--by", "reviewer-ana",
                "--evidence", "M-4", "--note", "two fact tables", "--db", fresh_db)
    assert (o["decision"], o["state"], o["type"]) == ("accepted", "canceled", "review_decision")
    assert by_task(ok_json(capsys, "state", "--db", fresh_db))["T-1"]["a2a_state"] == "TASK_STATE_CANCELED"


def test_late_failure_is_recorded_and_success_stands(fresh_db, capsys):
    outcomes = deliver_json(capsys, fresh_db, "late-failure.json")
    assert [o["decision"] for o in outcomes] == ["accepted", "accepted", "accepted", "late"]
    assert (outcomes[-1]["state"], outcomes[-1]["state_version"]) == ("succeeded", 3)
    t1 = by_task(ok_json(capsys, "state", "--db", fresh_db))["T-1"]
    assert (t1["state"], t1["state_version"], t1["late_results"]) == ("succeeded", 3, 1)


def test_an_ack_is_accepted_but_is_not_completion(fresh_db, capsys):
    outcomes = deliver_json(capsys, fresh_db, "ack.json")
    assert [o["decision"] for o in outcomes] == ["accepted", "accepted", "accepted"]
    assert outcomes[-1]["type"] == "ack"
    assert (outcomes[-1]["state"], outcomes[-1]["state_version"]) == ("running", 2)
    t1 = by_task(ok_json(capsys, "state", "--db", fresh_db))["T-1"]
    assert (t1["state"], t1["a2a_state"]) == ("running", "TASK_STATE_WORKING")


def test_rejected_moves_carry_their_codes(fresh_db, capsys):
    outcomes = deliver_json(capsys, fresh_db, "rejected.json")
    assert [(o["decision"], o["code"]) for o in outcomes] == [
        ("accepted", None),
        ("rejected", "E_NOT_ASSIGNEE"),
        ("rejected", "E_STALE_LEASE"),
    ]
    assert all((o["state"], o["state_version"]) == ("ready", 1) for o in outcomes)
    t1 = by_task(ok_json(capsys, "state", "--db", fresh_db))["T-1"]
    assert (t1["state"], t1["rejected"]) == ("ready", 2)


def test_a_jcs_v2_envelope_is_accepted(fresh_db, capsys):
    (o,) = deliver_json(capsys, fresh_db, "jcs-v2.json")
    assert (o["decision"], o["state"], o["state_version"]) == ("accepted", "ready", 1)
    (intent,) = ok_json(capsys, "state", "--db", fresh_db)["intents"]
    assert intent["digest_scheme"] == "jcs-v2"


def test_delivering_happy_path_twice_commits_the_publish_effect_once(fresh_db, capsys):
    first = deliver_json(capsys, fresh_db, "happy-path.json")
    digest_after_first = ok_json(capsys, "state", "--db", fresh_db)["state_digest"]
    second = deliver_json(capsys, fresh_db, "happy-path.json")
    assert [o["decision"] for o in first] == ["accepted"] * 8
    assert [o["decision"] for o in second] == ["duplicate"] * 8
    assert all(o["effects"] == [] for o in second)
    assert [o["effects"] for o in first if o["effects"]] == [["publish:R-1:T-2"]]
    state = ok_json(capsys, "state", "--db", fresh_db)
    assert [e["effect_key"] for e in state["effects"]] == ["publish:R-1:T-2"]
    assert {t: v["state_version"] for t, v in by_task(state).items()} == {"T-1": 3, "T-2": 3}
    events = ok_json(capsys, "events", "--db", fresh_db)
    assert [e["type"] for e in events].count("effect_committed") == 1
    # Only the intents' "seen" counters moved.
    assert all(i["seen"] == 2 for i in state["intents"])
    assert state["state_digest"] != digest_after_first


def test_the_readme_flow_stores_the_fact_table_so_evidence_resolves(fresh_db, capsys):
    ref = ok(capsys, "artifact", "put", ARTIFACTS / "facts-T-1.json", "--db", fresh_db, "--kind", "fact-table", "--task", "T-1").strip()
    assert ref == ok(capsys, "digest", ARTIFACTS / "facts-T-1.json").strip()
    deliver_json(capsys, fresh_db, "happy-path.json")
    events = ok_json(capsys, "events", "--db", fresh_db, "--type", "evidence_unresolved")
    unresolved = {r for e in events for r in e["data"]["refs"]}
    assert ref not in unresolved
    assert ok_json_plain(capsys, "artifact", "show", ref, "--db", fresh_db)["kind"] == "fact-table"


# ---------------------------------------------------------------------------- 4. views


@pytest.fixture
def duplicate_db(fresh_db, capsys):
    deliver_json(capsys, fresh_db, "duplicate.json")
    return fresh_db


def test_messages_json_has_messages_and_one_delivery_per_attempt(duplicate_db, capsys):
    view = ok_json(capsys, "messages", "--db", duplicate_db)
    assert set(view) == {"messages", "deliveries"}
    assert [m["message_id"] for m in view["messages"]] == ["M-1", "M-2", "M-3"]  # M-3 twice is one envelope
    assert [d["message_id"] for d in view["deliveries"]] == ["M-1", "M-2", "M-3", "M-3"]
    assert [d["decision"] for d in view["deliveries"]] == ["accepted", "accepted", "accepted", "duplicate"]
    assert [d["delivery_id"] for d in view["deliveries"]] == [1, 2, 3, 4]
    only_t2 = ok_json(capsys, "messages", "--db", duplicate_db, "--task", "T-2")
    assert only_t2 == {"messages": [], "deliveries": []}


def test_events_json_are_numbered_1_to_n_without_gaps(duplicate_db, capsys):
    events = ok_json(capsys, "events", "--db", duplicate_db)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "machine_loaded"
    filtered = ok_json(capsys, "events", "--db", duplicate_db, "--type", "transition_applied")
    assert [e["type"] for e in filtered] == ["transition_applied"] * 3


def test_state_json_holds_every_kind_of_authoritative_state(fresh_db, capsys):
    deliver_json(capsys, fresh_db, "happy-path.json")
    state = ok_json(capsys, "state", "--db", fresh_db)
    assert {"tasks", "transitions", "intents", "effects", "artifacts", "approvals", "budget", "state_digest"} <= set(state)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", state["state_digest"])
    assert all(t["a2a_state"] == "TASK_STATE_COMPLETED" for t in state["tasks"])
    assert len(state["transitions"]) == 6
    assert len(state["intents"]) == 8
    assert state["approvals"] == []
    assert sum(b["delta"] for b in state["budget"] if b["task_id"] == "T-1") == by_task(state)["T-1"]["budget_left"] == 2
    assert state["current_machine"] == "task-v1"
    # Reading is not writing: the digest is stable across reads.
    assert ok_json(capsys, "state", "--db", fresh_db)["state_digest"] == state["state_digest"]
    only_t1 = ok_json(capsys, "state", "--db", fresh_db, "--task", "T-1")
    assert [t["task_id"] for t in only_t1["tasks"]] == ["T-1"] and only_t1["effects"] == []


def test_table_views_show_their_pane_titles(fresh_db, capsys):
    deliver_json(capsys, fresh_db, "conflicting-digest.json")
    messages = ok(capsys, "messages", "--db", fresh_db)
    assert "Messages" in messages and "Deliveries" in messages
    assert "conflict" in messages
    events = ok(capsys, "events", "--db", fresh_db)
    assert "Events" in events and "conflict_recorded" in events
    state = ok(capsys, "state", "--db", fresh_db)
    for title in ("Tasks", "Transitions", "Intents", "Artifacts"):
        assert title in state, title
    assert "needs_review" in state
    deliver_out = ok(capsys, "deliver", ENVELOPES / "late-failure.json", "--db", fresh_db)
    assert "deliver" in deliver_out


def test_reading_views_leaves_the_database_byte_for_byte_unchanged(fresh_db, capsys):
    deliver_json(capsys, fresh_db, "happy-path.json")
    before = snapshot(fresh_db.parent)
    for view in ("messages", "events", "state"):
        ok(capsys, view, "--db", fresh_db)
        ok(capsys, view, "--db", fresh_db, "--json")
    ok(capsys, "machine", "show", "--db", fresh_db)
    assert snapshot(fresh_db.parent) == before


# ---------------------------------------------------------------------------- 5. machine versions


def test_machine_load_applies_to_new_tasks_only_and_refuses_a_version_twice(fresh_db, capsys):
    deliver_json(capsys, fresh_db, "ack.json")  # T-1 exists, running, under task-v1
    out = ok(capsys, "machine", "check", MACHINES / "task-v2.toml")
    assert "task-v2" in out
    out = ok(capsys, "machine", "load", MACHINES / "task-v2.toml", "--db", fresh_db)
    assert "task-v2" in out

    t2_request = fresh_db.parent / "t2-request.json"
    t2_request.write_text(json.dumps(HAPPY[4]), encoding="utf-8")  # M-4: the task_request creating T-2
    (o,) = deliver_json(capsys, fresh_db, t2_request)
    assert (o["task_id"], o["decision"]) == ("T-2", "accepted")

    state = ok_json(capsys, "state", "--db", fresh_db)
    tasks = by_task(state)
    assert tasks["T-1"]["machine_version"] == "task-v1"
    assert tasks["T-2"]["machine_version"] == "task-v2"
    assert state["current_machine"] == "task-v2"
    assert state["machine_versions"] == ["task-v1", "task-v2"]
    shown = ok_json(capsys, "machine", "show", "--db", fresh_db, "--version", "task-v2")
    assert shown["current"] == "task-v2"
    assert ["waiting_human", "running"] in [[r["from_state"], r["to_state"]] for r in shown["rules"]]

    before = snapshot(fresh_db.parent)
    code, out, err = run(capsys, "machine", "load", MACHINES / "task-v2.toml", "--db", fresh_db)
    assert_one_error_line(code, out, err, "E_MACHINE_EXISTS")
    assert snapshot(fresh_db.parent) == before


def test_init_with_a_machine_file_starts_on_that_version(tmp_path, capsys):
    db = tmp_path / "v2.db"
    assert "task-v2" in ok(capsys, "init", "--db", db, "--machine", MACHINES / "task-v2.toml")
    assert ok_json(capsys, "state", "--db", db)["machine_versions"] == ["task-v2"]


# A review the machine does not allow is recorded as a rejected delivery, yet the CLI says
# "approval recorded" and exits 0.
_NO_RELEASE_MACHINE = """\
version = "task-no-release"
[[rule]]
from = "pending"
to = "ready"
roles = ["manager"]
reason = "assigned"
[[rule]]
from = "ready"
to = "running"
roles = ["researcher", "writer"]
reason = "started"
[[rule]]
from = "running"
to = "succeeded"
roles = ["researcher", "writer"]
reason = "done"
[[rule]]
from = "*"
to = "needs_review"
roles = ["runtime"]
reason = "frozen"
"""


def test_a_reconcile_the_machine_does_not_allow_is_refused_not_reported_as_an_approval(tmp_path, capsys):
    machine = tmp_path / "no-release.toml"
    machine.write_text(_NO_RELEASE_MACHINE, encoding="utf-8")
    db_dir = tmp_path / "db"
    db_dir.mkdir()
    db = db_dir / "run.db"
    ok(capsys, "init", "--db", db, "--machine", machine)
    deliver_json(capsys, db, "conflicting-digest.json")
    assert by_task(ok_json(capsys, "state", "--db", db))["T-1"]["state"] == "needs_review"
    before = snapshot(db_dir)
    code, out, err = run(capsys, "reconcile", "T-1", "--decision", "ready", "--by", "reviewer", "--evidence", "M-3", "--db", db)
    assert "approval recorded" not in out
    assert_one_error_line(code, out, err, "E_TRANSITION_NOT_ALLOWED")
    assert snapshot(db_dir) == before


# ---------------------------------------------------------------------------- 6. tour

_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")


def test_tour_exits_0_publishes_once_and_is_deterministic(tmp_path, capsys):
    db = tmp_path / "tour.db"
    first = ok(capsys, "tour", "--db", db)
    assert "publish:R-1:T-2" in first
    d1 = _DIGEST_RE.findall(first)[-1]
    second = ok(capsys, "tour", "--db", db)  # replaces its own earlier run
    assert "publish:R-1:T-2" in second
    d2 = _DIGEST_RE.findall(second)[-1]
    assert d1 == d2
    state = ok_json(capsys, "state", "--db", db)
    assert state["state_digest"] == d2
    assert [e["effect_key"] for e in state["effects"]] == ["publish:R-1:T-2"]
    other = tmp_path / "elsewhere.db"
    assert _DIGEST_RE.findall(ok(capsys, "tour", "--db", other))[-1] == d1


def test_bare_protolab_prints_help_listing_every_command_and_exits_0(capsys):
    code, out, err = run(capsys)
    assert code == 0 and err == ""
    for command in ("init", "tour", "run", "compare", "replay", "check", "deliver", "messages", "events", "state", "reconcile", "digest", "machine", "artifact", "bench"):
        assert command in out


def test_run_help_names_every_fault_the_transport_knows():
    from typer.testing import CliRunner

    from sim.cli import app
    from sim.faults import FAULTS

    out = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    # a name may be wrapped at its hyphen ("late-" at a line's end, "conflict" on the next)
    text = " ".join(out.output.replace("-\n", "-").split()).replace("- ", "-")
    for name in FAULTS:
        assert name in text, name


def test_help_names_every_shipped_scenario_and_every_policy():
    from typer.testing import CliRunner

    from sim.cli import app
    from sim.policy import POLICIES
    from sim.scenario import scenario_names

    for cmd in (["run", "--help"], ["tui", "--help"]):
        out = CliRunner().invoke(app, cmd, env={"COLUMNS": "200"})
        text = " ".join(out.output.split()).replace("- ", "-")  # a name wrapped at its hyphen
        assert all(name in text for name in scenario_names()), (cmd, text)
        assert all(name in text for name in POLICIES), (cmd, text)


# ---------------------------------------------------------------------------- big runs: views stream


@pytest.fixture(scope="module")
def stress_db(tmp_path_factory):
    from sim.runner import run_scenario
    from sim.scenario import load_scenario

    db = tmp_path_factory.mktemp("big") / "run.db"
    run_scenario(load_scenario("publish-report"), faults=["duplicate", "crash"], db=db).close()
    return db


def test_a_long_event_log_streams_every_row_in_aligned_columns(stress_db, capsys, monkeypatch):
    import sim.output as common  # where the views read it
    from sim.store import Store

    monkeypatch.setattr(common, "TABLE_ROWS", 5)
    with Store.open(str(stress_db), readonly=True) as s:
        evs = s.events()
    out = ok(capsys, "events", "--db", stress_db)
    lines = out.splitlines()
    assert lines[0] == f"Events ({len(evs)})"
    assert lines[1].split() == ["seq", "time", "event", "task", "msg", "what"]
    body = lines[3:]
    assert [int(line.split()[0]) for line in body] == [e["seq"] for e in evs]
    # every row's event column starts where the header's does
    col = lines[1].index("event")
    assert all(line[col:].split()[0] == e["type"] for line, e in zip(body, evs))


def test_a_streamed_json_log_is_the_same_json_as_before(stress_db, capsys, monkeypatch):
    from sim.store import Store

    with Store.open(str(stress_db), readonly=True) as s:
        evs = s.events()
    out = ok(capsys, "events", "--db", stress_db, "--json")
    assert out == json.dumps([dict(e) for e in evs], indent=2, ensure_ascii=False) + "\n"
    t2 = ok(capsys, "events", "--db", stress_db, "--json", "--task", "T-2", "--type", "transition_applied")
    assert json.loads(t2) == [e for e in evs if e["task_id"] == "T-2" and e["type"] == "transition_applied"]
    assert ok(capsys, "events", "--db", stress_db, "--json", "--task", "T-404") == "[]\n"


def test_a_long_state_view_streams_each_table_with_its_count(stress_db, capsys, monkeypatch):
    import sim.output as common  # where the views read it

    monkeypatch.setattr(common, "TABLE_ROWS", 1)
    out = ok(capsys, "state", "--db", stress_db)
    state = ok_json(capsys, "state", "--db", stress_db)
    assert f"Tasks (authoritative: written only by the runtime) ({len(state['tasks'])})" in out
    assert f"Transitions ({len(state['transitions'])})" in out
    assert f"Intents (deduplication: task, key, digest, scheme) ({len(state['intents'])})" in out
    assert state["state_digest"] in out
