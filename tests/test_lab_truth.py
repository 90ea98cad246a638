"""A lab says only what its runs show: every id, code, invariant and count its texts, README and
answer keys name is a fact read from its runs (sim/labs/facts.py), held here to the runs played
along each lab's reference path on both sides, and to what 'protolab run' records for the same
story. A wrong answer that names something real is told what it is; choices are shown in an order
that does not give the answer away; a README is what its sources make."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest

from conftest import journaled, run_cli

from sim.errors import InputError
from sim.labs.catalog import labs, load_lab, texts
from sim.labs.facts import (PLACEHOLDER, Side, evaluate, fill_known, lab_literals, literals, placeholders,
                            reference_sides, reference_values, render)
from sim.labs.paths import play, reference
from sim.labs.readme import readme, template_of, write_all
from sim.labs.session import LabSession
from sim.live import LiveRun
from sim.scenario import load_scenario
from sim.store import ProgressStore, Store

LABS = labs()
NOT_THAT = "Not that."

_PLAYED: dict = {}


def _played(lab, *, answers: bool = False):
    """The learner's run of ``lab`` along its reference path (made once per test session; with
    ``answers``, a fresh one whose reference answers are given too)."""
    key = (lab.folder, answers)
    if answers or key not in _PLAYED:
        live = LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy=lab.policy, faults=list(lab.faults))
        session = LabSession(lab, live.store, ProgressStore.open(None))
        session.refresh()
        play(live, session, [a for a in reference(lab) if answers or a["do"] != "answer"])
        if answers:
            return live, session
        _PLAYED[key] = (live, session)
    return _PLAYED[key]


def _used(lab) -> set[str]:
    """The facts a lab's texts, its README's source and its answer keys name (and those they read)."""
    names = {n for _, t, _ in texts(lab) for n in placeholders(t)}
    if template_of(lab).is_file():
        names |= set(placeholders(template_of(lab).read_text()))
    names &= set(lab.facts)
    stack = list(names)
    while stack:
        for r in lab.facts[stack.pop()].refs():
            if r not in names:
                names.add(r)
                stack.append(r)
    return names


# ------------------------------------------------------------------------------------ the lint


def test_no_lab_text_types_an_id_a_code_an_invariant_or_a_count_that_only_a_run_can_vouch_for():
    found = [(lab.dirname, *x) for lab in LABS for x in lab_literals(lab)]
    assert found == [], "name these as facts ({fact}) in lab.toml, or say under [literals] why they are no claim"
    for lab in LABS:
        assert template_of(lab).is_file(), f"{lab.dirname}: README.md is made from README.in.md"
        every = " ".join(t for _, t, _ in texts(lab)) + template_of(lab).read_text()
        stale = [lit for lit in lab.literals if lit not in every]
        assert stale == [], f"{lab.dirname}: [literals] keeps {stale}, which no text names any more"


@pytest.mark.parametrize("text, found", [
    ("g-lowest picks M-19 on your side", [("id", "M-19")]),
    ("under naive, M-7 published T-2", [("id", "M-7"), ("id", "T-2")]),
    ("refused with E_SCHEMA_VERSION", [("code", "E_SCHEMA_VERSION")]),
    ("NEWER_FIELDS_READ breaks", [("invariant", "NEWER_FIELDS_READ")]),
    ("T-1 was allotted 2 attempts; it holds lease v1", [("id", "T-1"), ("number", "v1"), ("number", "2")]),
    ("Do lab 99 first", [("lab", "99")]),
    ("{lowest_pick} is picked; schema 2.0 and 1.1 are the protocol's, json-sorted-v1 a scheme", []),
])
def test_the_lint_finds_what_a_lab_once_typed_and_leaves_facts_and_the_protocols_names_alone(text, found):
    assert sorted(literals(text)) == sorted(found)


def test_a_lab_naming_another_lab_that_does_not_exist_is_caught(tmp_path):
    lab = _copy(14, tmp_path, lambda s: s.replace('title = "A quorum with a dissent"',
                                                   'title = "A quorum with a dissent (see lab 99)"'))
    assert ("step 1 title", "lab", "99") in lab_literals(lab)


# ------------------------------------------------------------------ facts held to the runs


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.dirname)
def test_every_fact_a_lab_names_is_shown_by_its_reference_run_on_its_side(lab):
    values = reference_values(lab)
    used = _used(lab)
    missing = sorted(n for n in used if values.get(n) is None)
    assert missing == [], f"the reference run does not show: {missing}"
    # and no fact is declared for nothing: each is named by a text, read by another, or tells a wrong answer what it is
    idle = sorted(n for n, f in lab.facts.items() if n not in used and not f.about)
    assert idle == []
    # every text a face prints is filled: no {fact} is left once rendered
    shown = render(lab)
    for where, text, _checked in texts(shown):
        left = [n for n in placeholders(text) if n in lab.facts]
        assert left == [] or where.endswith("answer"), (where, text)


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.dirname)
def test_each_answer_key_is_what_the_learners_run_shows_on_the_reference_path(lab):
    live, session = _played(lab, answers=True)
    values = reference_values(lab)
    typed = {a["question"]: str(a["value"]) for a in reference(lab) if a["do"] == "answer"}
    for q in session.lab.questions:
        want = session.expected(q)
        assert want is not None, f"{q.id}: the learner's run does not show the answer"
        # the reference path's own answer (what a person who played it typed) is what the run gives
        assert typed[q.id].casefold() == want.casefold(), (q.id, typed[q.id], want)
        if q.answer is not None and placeholders(q.answer):
            # what the Guide shows (the reference run) and what the learner's run gives agree
            assert fill_known(q.answer, values) == want, q.id
        if q.kind == "choice":
            assert want in q.choices, (q.id, want, q.choices)
            assert set(q.feedback) <= set(q.choices), (q.id, set(q.feedback) - set(q.choices))
        assert session.answered(q), q.id
    live.close()


def _drives(action) -> bool:
    return action["do"] in ("step", "inject", "crash", "reconcile")


STEPPED = [lab for lab in LABS if lab.mode != "hand-delivery" and lab.facts
           and all(a["do"] == "step" or not _drives(a) for a in reference(lab))]


def test_the_labs_played_by_stepping_alone_include_the_workshops():
    assert {13, 14, 5, 16} <= {lab.number for lab in STEPPED}


@pytest.mark.parametrize("lab", STEPPED, ids=lambda lab: lab.dirname)
def test_a_labs_facts_are_what_protolab_run_records_for_the_same_story(lab, tmp_path, capsys):
    """The run the lab plays is the run 'protolab run' makes with the same scenario, seed and faults,
    on both sides: what the lab says of its run is what a student finds in their own."""
    stores, refused = {}, set()
    for policy in ("safe", "naive"):
        db = tmp_path / f"{policy}.db"
        args = ["run", lab.scenario, "--seed", str(lab.seed), "--policy", policy, "--db", str(db)]
        for f in lab.faults:
            args += ["--fault", f]
        code, _, err = run_cli(capsys, *args)
        if code == 2 and "E_FAULT_NO_MATCH" in err and policy != lab.policy:
            refused.add(policy)  # a starting fault that finds nothing to act on there: 'run' refuses it
            continue
        assert code == 0, err
        stores[policy] = Store.open(db, readonly=True)
    try:
        ref = reference_sides(lab)
        sides = {p: Side(s) for p, s in stores.items()}
        got = evaluate(lab.facts, lambda name: sides.get(name) or ref(name), lab.policy)
        want = reference_values(lab)

        def reads(n: str) -> set[str]:
            f = lab.facts[n]
            return {f.side or lab.policy} | {s for r in f.refs() for s in reads(r)}

        assert [n for n in _used(lab) if reads(n) & refused] == [], "a text names a side 'protolab run' refuses"
        compared = [n for n in lab.facts if not reads(n) & refused]
        differ = {n: (want[n], got[n]) for n in compared if want[n] != got[n]}
        assert differ == {}
    finally:
        for s in stores.values():
            s.close()


def test_lab_14s_lowest_pick_is_the_g_lowest_gather_reduced_selected_and_not_the_late_retry():
    """The issue's case: the key said M-19, the learner's safe run records g-lowest selected M-16
    and M-19 recorded late. Read here straight from the store, not through the facts."""
    lab = next(x for x in LABS if x.number == 14)
    live, session = _played(lab)
    picks = {e.data["gather"]: e.data.get("selected") for e in live.store.iter_events(etype="gather_reduced")}
    late = [d["message_id"] for d in live.store.deliveries() if d["decision"] == "late"]
    q = next(q for q in session.lab.questions if q.id == "lowest")
    assert session.expected(q) == picks["g-lowest"] and picks["g-lowest"] not in late
    assert late, "the story has a retry recorded late"
    said = session.feedback(q, late[0])
    assert late[0] in said and "late" in said, said
    said = session.feedback(q, picks["g-first"])
    assert "g-first" in said, said
    step = session.lab.steps[1].text
    assert f"({picks['g-lowest']})" in step or picks["g-lowest"] in step
    assert late[0] in step and "recorded late" in step


def _copy(number: int, tmp_path: Path, change) -> object:
    src = next(x for x in LABS if x.number == number).folder
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    toml = dst / "lab.toml"
    toml.write_text(change(toml.read_text()))
    return load_lab(dst)


def test_the_old_typed_key_of_lab_14_fails_the_lint_and_is_not_what_the_run_shows(tmp_path):
    """These tests fail on the key lab 14 shipped with (answer = "M-19")."""
    lab = _copy(14, tmp_path, lambda s: s.replace('answer = "{lowest_pick}"', 'answer = "M-19"'))
    assert ("question lowest answer", "id", "M-19") in lab_literals(lab)
    live = LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy=lab.policy, faults=list(lab.faults))
    session = LabSession(lab, live.store, ProgressStore.open(None))
    play(live, session, [a for a in reference(lab) if a["do"] != "answer"])
    picked = next(e.data["selected"] for e in live.store.iter_events(etype="gather_reduced")
                  if e.data["gather"] == "g-lowest")
    q = next(q for q in lab.questions if q.id == "lowest")
    assert session.expected(q) == "M-19" != picked
    live.close()


def test_lab_13_names_the_naive_sides_own_publication_not_its_fence():
    """The issue's case: the Guide said "under naive, M-7 published T-2"; on the naive side M-7 is
    the fence and M-6 published. Read here from a naive run of the same story, not through the facts."""
    lab = next(x for x in LABS if x.number == 13)
    live, session = _played(lab)
    naive = LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy="naive", faults=list(lab.faults))
    naive.run_to_end()
    published = [e.message_id for e in naive.store.iter_events(etype="effect_committed")]
    fence = [m["message_id"] for m in naive.store.messages() if m["type"] == "fence"]
    state = next(s for s in session.states if s.id == "naive-drops-field")
    shows = session.shows(state)
    assert state.met and f"from {published[0]}" in shows, shows
    assert not re.search(rf"\b{fence[0]}\b(?! ?,? handed)", shows.replace(f"your {fence[0]}", "")), shows
    naive.close()


# ---------------------------------------------------------------------------- wrong answers


def _named_things(lab) -> set[str]:
    """Values of the lab's facts that name something (an id, a code, an invariant)."""
    values = reference_values(lab)
    vals = {values[n] for n in lab.facts if values.get(n)}
    return {v for v in vals if literals(v) and all(k in ("id", "code", "invariant") for k, _ in literals(v))
            and "," not in v}


@pytest.mark.parametrize("lab", [x for x in LABS if any(q.kind == "value" for q in x.questions)],
                         ids=lambda lab: lab.dirname)
def test_a_wrong_answer_that_names_something_real_is_told_what_it_is(lab):
    live, session = _played(lab)
    for q in session.lab.questions:
        if q.kind != "value":
            continue
        right = (session.expected(q) or "").casefold()
        for v in sorted(_named_things(lab)):
            if v.casefold() == right:
                continue
            said = session.feedback(q, v)
            assert not said.startswith(NOT_THAT), (q.id, v, said)
            written = {k.casefold() for k in q.feedback}
            assert v.casefold() in written or v in said, (q.id, v, said)


def test_a_wrong_answer_naming_nothing_in_the_runs_gets_the_plain_word():
    lab = next(x for x in LABS if x.number == 14)
    _live, session = _played(lab)
    q = next(q for q in session.lab.questions if q.id == "lowest")
    assert session.feedback(q, "M-999").startswith(NOT_THAT)
    assert session.feedback(q, "banana").startswith(NOT_THAT)


# ------------------------------------------------------------------------------- choice order


def test_choices_are_shown_in_an_order_the_author_did_not_choose(tmp_path):
    """Reversing the choices in lab.toml changes nothing the learner sees."""
    def reverse(s: str) -> str:
        return re.sub(r"^choices = \[(.*)\]$", lambda m: "choices = [" + ", ".join(
            reversed(re.findall(r'"(?:[^"\\]|\\.)*"', m.group(1)))) + "]", s, flags=re.M)

    for number in (1, 8, 15):
        lab = next(x for x in LABS if x.number == number)
        flipped = _copy(number, tmp_path / str(number), reverse)
        assert [q.choices for q in lab.questions] == [q.choices for q in flipped.questions]
        assert [q.choices for q in render(lab).questions] == [q.choices for q in render(flipped).questions]


def test_the_right_choice_is_first_about_as_often_as_chance_gives_and_no_lab_leads_with_it():
    """Written first in 14 of the 20 choice questions once; shown first now about as often as a
    random order would put it there (within two standard deviations), and in no lab for most of
    its choice questions."""
    first, expected, var, total = 0, 0.0, 0.0, 0
    for lab in LABS:
        shown = render(lab)
        values = reference_values(lab)
        qs = [q for q in shown.questions if q.kind == "choice"]
        mine = [q.choices[0] == fill_known(q.answer, values) for q in qs]
        if len(qs) >= 3:
            assert sum(mine) * 2 <= len(qs), lab.dirname
        first += sum(mine)
        total += len(qs)
        expected += sum(1 / len(q.choices) for q in qs)
        var += sum((1 / len(q.choices)) * (1 - 1 / len(q.choices)) for q in qs)
    assert total >= 20
    assert first <= expected + 2 * math.sqrt(var) and first * 2 < total, (first, total, expected)


# ------------------------------------------------------------------------------------ README


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.dirname)
def test_each_readme_is_what_its_sources_and_the_reference_run_make(lab):
    assert (lab.folder / "README.md").read_text() == readme(lab), \
        f"{lab.dirname}/README.md is stale: python -m sim.labs.readme writes it"
    assert not PLACEHOLDER.search((lab.folder / "README.md").read_text())


def test_the_readme_writer_checks_without_writing(tmp_path):
    import io

    out = io.StringIO()
    assert write_all(check=True, out=out) == 0 and out.getvalue() == ""


# ------------------------------------------------------------------------ a lab file's facts


@pytest.mark.parametrize("facts, words", [
    ('x = { guess = "g-lowest", field = "selected" }', "give exactly one kind of fact"),
    ('x = { gather = "g-lowest", field = "selected", sid = "naive" }', "unknown key 'sid'"),
    ('x = { gather = "g-lowest", field = "selected", side = "other" }', "side must be safe or naive"),
    ('x = { event = "gather_reduce", field = "selected" }', "unknown event type 'gather_reduce'"),
    ('x = { invariant = "TIE_BREAK", field = "name" }', "unknown invariant 'TIE_BREAK'"),
    ('x = { delivery = "task_result", field = "decison" }', "'decison' is no column"),
    ('x = { delivery = "task_result", where = { decison = "late" }, field = "message_id" }', "'decison' is no column"),
    ('x = { gather = "g-lowest" }', "give a field, or count = true"),
    ('x = { gather = "g-lowest", field = "selected", nth = 0 }', "nth is 1"),
    ('x = { message = "*", where = { message_id = "{y}" }, field = "sender" }', "names no fact 'y'"),
    ('x = { message = "*", where = { message_id = "{y}" }, field = "sender" }\n'
     'y = { message = "*", where = { message_id = "{x}" }, field = "sender" }', "in a circle"),
    ('message_id = { gather = "g-lowest", field = "selected" }', "already use for something else"),
    ('steps = { gather = "g-lowest", field = "selected" }', "already use for something else"),
])
def test_a_fact_the_kit_cannot_read_fails_the_labs_load(tmp_path, facts, words):
    with pytest.raises(InputError) as e:
        _copy(14, tmp_path, lambda s: s.replace("[facts]\n", f"[facts]\n{facts}\n", 1))
    assert e.value.code == "E_LAB_FILE" and words in str(e.value), str(e.value)


def test_a_text_naming_no_fact_fails_the_labs_load(tmp_path):
    with pytest.raises(InputError) as e:
        _copy(14, tmp_path, lambda s: s.replace('text = "Which message does g-lowest pick on your side?"',
                                                'text = "Which message does g-lowest pick, {lowest_pik}?"'))
    assert e.value.code == "E_LAB_FILE" and "{lowest_pik}" in str(e.value)


def test_a_hand_delivery_lab_declares_no_facts(tmp_path):
    from test_lab_by_hand import LAB

    folder = tmp_path / "90-by-hand"
    folder.mkdir()
    (folder / "lab.toml").write_text(LAB.replace('mode = "hand-delivery"\n', 'mode = "hand-delivery"\n\n[facts]\n'
                                                 'x = { delivery = "*", field = "message_id" }\n', 1))
    with pytest.raises(InputError) as e:
        load_lab(folder)
    assert e.value.code == "E_LAB_FILE" and "no simulated run" in str(e.value)


# ------------------------------------------------------------------------------- the faces


def test_lab_check_prints_every_text_filled(tmp_path, capsys):
    lab = next(x for x in LABS if x.number == 14)
    db, prog = tmp_path / lab.default_db, tmp_path / "progress.db"
    live = journaled(LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy=lab.policy, faults=list(lab.faults), db=db))
    progress = ProgressStore.open(prog)
    session = LabSession(lab, live.store, progress)
    play(live, session, [{"do": "step", "until": "M-14"}])  # some checkpoints met, some not: hints too
    live.close()
    progress.close()
    code, out, _ = run_cli(capsys, "lab", "check", "14", "--db", str(db), "--progress", str(prog), "--json")
    got = json.loads(out)
    every = [got["title"]] + [x for c in got["checkpoints"] for x in (c["title"], c["hint"] or "", c["shows"] or "")] + \
        [q["text"] for q in got["questions"]]
    assert code == 1 and not any(PLACEHOLDER.search(t) for t in every), every
    code, out, _ = run_cli(capsys, "lab", "check", "14", "--db", str(db), "--progress", str(prog))
    dissent = reference_values(next(x for x in LABS if x.number == 14))["dissent"]
    assert "{" not in out and dissent in out  # the dissent the naive side drops, named in a hint


async def test_the_question_dialog_shows_the_question_and_choices_filled():
    from textual.widgets import OptionList, Static

    from sim.tui.guide import AskQuestion
    from sim.tui.workshop import WorkshopApp

    lab = next(x for x in LABS if x.number == 14)
    live = LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy=lab.policy, faults=list(lab.faults))
    naive = LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy="naive", faults=list(lab.faults))
    session = LabSession(lab, live.store, ProgressStore.open(None))
    play(live, session, [{"do": "step", "until": "end"}])
    for q in ("dissent", "lowest"):
        session.answer(q, session.expected(next(x for x in session.lab.questions if x.id == q)))
    app = WorkshopApp(naive, live, lab=session)
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AskQuestion) and app.screen.q.id == "clock"
        text = " ".join(str(s.content) for s in app.screen.query(Static))
        assert "{" not in text and reference_values(lab)["naive_pick"] in text, text
        options = app.screen.query_one(OptionList)
        shown = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert shown == list(app.screen.q.choices) and not any("{" in c for c in shown)
    live.close()
    naive.close()


# -------------------------------------------------- each kind of fact reads what the store holds


def test_each_kind_of_fact_reads_what_the_store_holds(tmp_path):
    """The evaluator held to the store's own reads, kind by kind and option by option, on lab 3's
    reference run (a duplicate delivered and recorded) and its naive side: a planted slip in a kind
    (the wrong row, the wrong side, a filter ignored) gives another value here."""
    lab = next(x for x in LABS if x.number == 3)
    ref = reference_sides(lab)
    safe, naive = ref("safe").store, ref("naive").store
    ds = safe.deliveries()
    results = [d for d in ds if d["type"] == "task_result"]
    facts_toml = "\n".join([
        'a_first = { delivery = "task_result", field = "message_id" }',
        'a_last = { delivery = "task_result", nth = -1, field = "decision" }',
        'a_second = { delivery = "task_result", nth = 2, field = "message_id" }',
        'a_count = { delivery = "*", where = { decision = "duplicate" }, count = true }',
        'a_any = { delivery = "*", where = { decision = ["late", "duplicate"] }, field = "message_id" }',
        'a_not = { delivery = "task_result", where = { "sender!" = "researcher" }, field = "sender" }',
        'a_has = { delivery = "*", where = { "reason~" = "already" }, field = "message_id" }',
        'a_all = { delivery = "task_result", field = "task_id", all = true }',
        'a_map = { delivery = "*", where = { decision = "duplicate" }, field = "decision", map = { duplicate = "twice" } }',
        'a_payload = { message = "task_result", nth = 1, field = "payload.status" }',
        'a_event = { event = "fault_injected", field = "fault" }',
        'a_event_data = { event = "fault_injected", field = "again_at" }',
        'a_task = { task = "{a_first_task}", field = "state" }',
        'a_first_task = { delivery = "task_result", field = "task_id" }',
        'a_a2a = { task = "{a_first_task}", field = "a2a_state" }',
        'a_move = { transition = "{a_first_task}", nth = -1, field = "new_state" }',
        'a_moves = { transition = "{a_first_task}", count = true }',
        'a_effects = { effect = "publish", count = true }',
        'a_naive_effects = { effect = "publish", side = "naive", count = true }',
        'a_holds = { invariant = "EFFECT_AT_MOST_ONCE", field = "status" }',
        'a_naive_breaks = { invariant = "EFFECT_AT_MOST_ONCE", side = "naive", field = "status" }',
        'a_trace = { trace = "errors", field = "code" }',
        'a_terminal = { trace = "report", field = "valid" }',
        'a_again = { replay = "report", field = "effects_committed_again.#" }',
        'a_none = { delivery = "*", where = { decision = "conflict" }, field = "message_id" }',
    ])
    copy = _copy(3, tmp_path, lambda s: s.replace("[facts]\n", f"[facts]\n{facts_toml}\n", 1))
    v = reference_values(copy)
    from sim.invariants import check as invariants
    from sim.machine import A2A_STATE, TaskState

    dup = [d for d in ds if d["decision"] == "duplicate"]
    first_task = results[0]["task_id"]
    task = safe.get_task(first_task)
    faults = list(safe.iter_events(etype="fault_injected"))
    trace_codes = [f.code for f in __import__("sim.protocol.trace", fromlist=["validate"]).validate(
        __import__("sim.conversation", fromlist=["export_trace"]).export_trace(safe)).errors]
    want = {
        "a_first": results[0]["message_id"], "a_last": results[-1]["decision"], "a_second": results[1]["message_id"],
        "a_count": str(len(dup)), "a_any": dup[0]["message_id"],
        "a_not": next(safe.message_by_id(d["message_id"])["sender"] for d in results
                      if safe.message_by_id(d["message_id"])["sender"] != "researcher"),
        "a_has": next(d["message_id"] for d in ds if "already" in (d["reason"] or "")),
        "a_all": ", ".join(dict.fromkeys(d["task_id"] for d in results)), "a_map": "twice",
        "a_payload": safe.message_by_id(next(m["message_id"] for m in safe.messages() if m["type"] == "task_result"))["payload"]["status"],
        "a_event": faults[0].data["fault"], "a_event_data": str(faults[0].data["again_at"]),
        "a_task": task.state.value, "a_first_task": first_task, "a_a2a": A2A_STATE[TaskState(task.state.value)],
        "a_move": safe.transitions(first_task)[-1]["new_state"], "a_moves": str(len(safe.transitions(first_task))),
        "a_effects": str(len(safe.effects())), "a_naive_effects": str(len(naive.effects())),
        "a_holds": "holds" if next(r for r in invariants(safe) if r.name == "EFFECT_AT_MOST_ONCE").ok else "broken",
        "a_naive_breaks": "broken" if not next(r for r in invariants(naive) if r.name == "EFFECT_AT_MOST_ONCE").ok else "holds",
        "a_trace": trace_codes[0] if trace_codes else None, "a_terminal": "false" if trace_codes else "true",
        "a_again": "0", "a_none": None,
    }
    assert {k: v[k] for k in want} == want
    assert want["a_naive_effects"] != want["a_effects"] and want["a_naive_breaks"] == "broken"


def test_an_answer_key_is_read_from_the_learners_own_run_not_from_the_reference():
    """Stopped before the finders' gathers are reduced, the learner's run shows no pick: the key
    is not taken from the reference run, where it is there."""
    lab = next(x for x in LABS if x.number == 14)
    live = LiveRun(load_scenario(lab.scenario), seed=lab.seed, policy=lab.policy, faults=list(lab.faults))
    session = LabSession(lab, live.store, ProgressStore.open(None))
    play(live, session, [{"do": "step", "until": "M-14"}])
    q = next(q for q in session.lab.questions if q.id == "lowest")
    assert reference_values(lab)["lowest_pick"] and session.expected(q) is None
    ok, said = session.answer("lowest", reference_values(lab)["lowest_pick"])
    assert not ok and "does not show this yet" in said
    play(live, session, [{"do": "step", "until": "end"}])
    assert session.answer("lowest", reference_values(lab)["lowest_pick"])[0]
    live.close()


_STATE_CLAIM = re.compile(r"\b([A-Z]-\d+)\b((?:[\s,]+(?:is|stays|still|goes|moves|went|freezes|frozen|ended|in|to|from|"
                          r"now|back|was|waits|its|state|\(|\))){0,4})[\s(]+(" + "|".join(
                              __import__("sim.machine", fromlist=["TaskState"]).TaskState._value2member_map_) + r")\b")


def test_a_state_a_lab_gives_a_task_is_one_that_task_passes_through_in_its_runs():
    """'T-1 stays succeeded', 'T-1 is frozen in needs_review': as the learner reads them (filled),
    each task named with a state reaches that state on some side of the lab's reference run."""
    claims = 0
    for lab in LABS:
        text = " ".join(t for _, t, _ in texts(render(lab))) + readme(lab)
        ref = reference_sides(lab)
        for m in _STATE_CLAIM.finditer(text):
            tid, state = m.group(1), m.group(3)
            claims += 1
            assert any(r["task_id"] == tid and r["new_state"] == state
                       for side in ("safe", "naive", *lab.runs) for r in ref(side).rows("transition", "*")), \
                (lab.dirname, m.group(0))
    assert claims >= 20


def test_the_readme_command_the_header_names_runs_and_a_stale_readme_is_named_not_written(tmp_path, monkeypatch):
    import io
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "sim.labs.readme", "--check"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    stale = _copy(14, tmp_path, lambda s: s)
    (stale.folder / "README.md").write_text("# Lab 14\n\ng-lowest picks M-19.\n")
    monkeypatch.setattr("sim.labs.catalog.labs", lambda: [stale])
    out = io.StringIO()
    assert write_all(check=True, out=out) == 1 and "README.md: not what" in out.getvalue()
    assert (stale.folder / "README.md").read_text() == "# Lab 14\n\ng-lowest picks M-19.\n"
    assert write_all(out=out) == 1 and (stale.folder / "README.md").read_text() == readme(stale)


@pytest.mark.parametrize("lab", [x for x in LABS if x.runs], ids=lambda lab: lab.dirname)
def test_the_runs_a_lab_asks_for_in_a_shell_are_what_protolab_run_makes(lab, tmp_path, capsys):
    """A fact read from a run of [runs] (the 'protolab run --policy naive -f zombie' a step asks for)
    is what that command records."""
    cli = {}
    for name, spec in lab.runs.items():
        db = tmp_path / f"{name}.db"
        args = ["run", spec.scenario or lab.scenario, "--seed", str(spec.seed if spec.seed is not None else lab.seed),
                "--policy", spec.policy, "--db", str(db)]
        for f in spec.faults:
            args += ["-f", f]
        code, _, err = run_cli(capsys, *args)
        assert code == 0, err
        cli[name] = Side(Store.open(db, readonly=True))
    try:
        ref = reference_sides(lab)
        got = evaluate(lab.facts, lambda name: cli.get(name) or ref(name), lab.policy)
        want = reference_values(lab)
        on_runs = [n for n, f in lab.facts.items() if f.side in lab.runs]
        assert on_runs and {n: got[n] for n in on_runs} == {n: want[n] for n in on_runs}
    finally:
        for side in cli.values():
            side.store.close()
