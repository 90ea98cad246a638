"""protolab timeline: a run as one self-contained HTML page, parsed back here (the arrows, their
colours, the marks), and its refusals. The page in a real browser is tests/test_browser.py."""

import json
import re
import sqlite3
import shutil
from html.parser import HTMLParser
from pathlib import Path

from conftest import run_cli

from sim import timeline
from sim.palette import DECISION_STYLE, STATE_STYLE, WEB_COLOURS, web_colour
from sim.runner import run_scenario
from sim.scenario import load_scenario
from sim.store import Store


class Page(HTMLParser):
    """The elements of a timeline page that the tests read: every tag with its attributes, the
    scripts' text."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._script = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "script":
            self._script = (a, [])

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        if self._script is not None:
            self._script[1].append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script[0], "".join(self._script[1])))
            self._script = None

    def with_class(self, name: str) -> list[dict]:
        return [a for _t, a in self.tags if name in (a.get("class") or "").split()]

    def data(self, run: int = 0) -> dict:
        return json.loads(next(t for a, t in self.scripts if a.get("data-run") == str(run)))


def _run(tmp_path: Path, name: str, *, policy="safe", faults=()) -> Path:
    db = tmp_path / name
    run_scenario(load_scenario("publish-report"), policy=policy, faults=list(faults), db=db).close()
    return db


def _page(db: Path, **kw) -> tuple[str, Store]:
    store = Store.open(db, readonly=True)
    return timeline.render([timeline.read_run(store, db.name, **kw)]), store


def test_every_decision_and_state_has_a_colour_on_a_page():
    for style in list(DECISION_STYLE.values()) + list(STATE_STYLE.values()):
        assert re.fullmatch(r"#[0-9a-f]{6}", web_colour(style)), style
    assert web_colour(STATE_STYLE["needs_review"]) == WEB_COLOURS["dark_magenta"]  # the background stands out
    assert web_colour("dim") == WEB_COLOURS["dim"]
    assert len({web_colour(DECISION_STYLE[d]) for d in timeline.DECISIONS}) == 5  # each decision told apart


def test_the_page_has_one_arrow_per_delivery_and_a_duplicate_in_the_duplicate_colour(tmp_path):
    db = _run(tmp_path, "dup.db", faults=["duplicate"])
    text, store = _page(db)
    with store:
        deliveries = store.deliveries()
    page = Page(text)
    arrows = page.with_class("arrow")
    assert len(arrows) == len(deliveries) > 10
    assert [int(a["data-delivery"]) for a in arrows] == [d["delivery_id"] for d in deliveries]
    assert [a["data-decision"] for a in arrows] == [d["decision"] for d in deliveries]
    dups = [a for a in arrows if a["data-decision"] == "duplicate"]
    assert dups, "the duplicate fault made a duplicate delivery"
    colour = web_colour(DECISION_STYLE["duplicate"])
    assert {a["stroke"] for a in dups} == {colour}
    assert {a["marker-end"] for a in dups} == {"url(#h-duplicate)"}
    assert any(a.get("id") == "h-duplicate" for _t, a in page.tags)
    assert {a["stroke"] for a in arrows if a["data-decision"] == "accepted"} == {web_colour(DECISION_STYLE["accepted"])}


def test_each_row_carries_its_envelope_and_every_event_of_its_delivery(tmp_path):
    db = _run(tmp_path, "late.db", faults=["late-failure"])
    text, store = _page(db)
    data = Page(text).data()
    with store:
        for row in data["rows"]:
            events = store.events_of_delivery(row["d"])
            mine = [e for e in row["ev"]]
            assert {e["seq"] for e in events} <= {e[0] for e in mine}
            msg = store.delivery(row["d"])
            assert row["env"]["message_id"] == msg["message_id"] and row["dec"] == msg["decision"]
        every = [e[0] for row in data["rows"] for e in row["ev"]]
        assert sorted(every) == every == list(range(1, store.last_event() + 1))  # every event, once, in order
    late = [r for r in data["rows"] if r["dec"] == "late"]
    assert late and late[0]["env"]["payload"]["status"] == "failed"


def test_faults_are_marked_where_they_were_injected(tmp_path):
    db = _run(tmp_path, "faults.db", faults=["duplicate", "late-failure"])
    text, store = _page(db)
    page = Page(text)
    with store:
        faults = [e for e in store.iter_events() if e["type"] == "fault_injected"]
    marks = page.with_class("fault")
    data = page.data()
    assert len(faults) == 2
    assert sum(len(v) for v in data["faults"].values()) == len(faults)
    assert len(marks) == len(data["faults"])
    assert {m["fill"] for m in marks} == {web_colour("bold yellow")}


def test_a_naive_run_marks_the_broken_invariant_at_the_delivery_its_witness_names(tmp_path):
    db = _run(tmp_path, "naive.db", policy="naive", faults=["late-failure"])
    text, store = _page(db)
    page = Page(text)
    store.close()
    data = page.data()
    breaks = {name for marks in data["breaks"].values() for name, _w in marks}
    assert "NO_STATE_REGRESSION" in breaks
    row = next(int(i) for i, marks in data["breaks"].items() if any(n == "NO_STATE_REGRESSION" for n, _ in marks))
    assert data["rows"][row]["env"]["payload"]["status"] == "failed"  # the late failure that regressed T-1
    assert page.with_class("break")
    assert "NO_STATE_REGRESSION" in text and "every invariant holds" not in text
    safe = _run(tmp_path, "safe.db", faults=["late-failure"])
    text2, s2 = _page(safe)
    s2.close()
    assert "every invariant holds" in text2 and not Page(text2).with_class("break")


def test_the_state_column_shows_each_move_in_its_state_colour(tmp_path):
    db = _run(tmp_path, "happy.db")
    text, store = _page(db)
    with store:
        moves = [t for t in store.transitions()]
    shown = [a for a in Page(text).with_class("s")]
    assert len(shown) == len(moves)
    assert shown[-1]["fill"] == web_colour(STATE_STYLE["succeeded"])


def test_two_runs_sit_side_by_side(tmp_path, capsys):
    naive = _run(tmp_path, "naive.db", policy="naive", faults=["late-failure"])
    safe = _run(tmp_path, "safe.db", faults=["late-failure"])
    out = tmp_path / "side.html"
    code, stdout, err = run_cli(capsys, "timeline", "--db", naive, "--db", safe, "-o", out)
    assert code == 0, err
    assert "naive.db (naive)" in stdout and "safe.db (safe)" in stdout
    page = Page(out.read_text())
    svgs = [a for t, a in page.tags if t == "svg" and "run" in (a.get("class") or "")]
    assert [a["data-run"] for a in svgs] == ["0", "1"]
    assert len(page.data(0)["rows"]) > 0 and len(page.data(1)["rows"]) > 0


def test_the_page_is_self_contained_and_the_same_run_gives_the_same_bytes(tmp_path):
    db = _run(tmp_path, "one.db", faults=["conflicting-digest"])
    text, store = _page(db)
    store.close()
    text2, store2 = _page(db)
    store2.close()
    assert text == text2
    page = Page(text)
    assert not [a for t, a in page.tags if t in ("link", "img", "iframe") or (t == "script" and a.get("src"))]
    refs = re.findall(r'(?:src|href)="([^"#][^"]*)"', text)
    assert refs == []  # nothing fetched: no network needed to open it
    # a payload cannot close the script that carries the data
    assert text.count("</script>") == 2


def test_a_payload_that_looks_like_markup_stays_data(tmp_path):
    db = _run(tmp_path, "m.db")
    store = Store.open(db, readonly=True)
    pic = timeline.read_run(store, "<b>label</b>")
    store.close()
    pic.rows[0]["env"]["payload"] = {"x": "</script><script>alert(1)</script>"}
    pic.rows[0]["mid"] = "<i>M</i>"
    text = timeline.render([pic])
    assert "<b>label</b>" not in text and "<i>M</i>" not in text
    assert Page(text).data()["rows"][0]["env"]["payload"]["x"] == "</script><script>alert(1)</script>"


def test_a_1000_delivery_run_makes_a_page_under_2_mb(tmp_path, capsys):
    db = tmp_path / "stress.db"
    code, _out, err = run_cli(capsys, "run", "stress", "--tasks", "190", "--db", db)
    assert code == 0, err
    out = tmp_path / "stress.html"
    code, stdout, err = run_cli(capsys, "timeline", "--db", db, "-o", out)
    assert code == 0, err
    with Store.open(db, readonly=True) as store:
        n = store.count_of("deliveries")
    assert n >= 1000
    assert out.stat().st_size < 2 * 1024 * 1024
    assert len(Page(out.read_text()).with_class("arrow")) == n


def test_timeline_refuses_bad_input_in_one_line(tmp_path, capsys):
    good = _run(tmp_path, "good.db")
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    newer = tmp_path / "newer.db"
    shutil.copyfile(good, newer)
    con = sqlite3.connect(newer)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    cases = [
        (["--db", tmp_path / "none.db"], "E_DB_MISSING"),
        (["--db", foreign], "E_DB_NOT_PROTOLAB"),
        (["--db", newer], "E_DB_SCHEMA_NEWER"),
        (["--db", good, "--db", foreign], "E_DB_NOT_PROTOLAB"),
        (["--db", good, "-o", tmp_path / "no" / "such" / "x.html"], "E_OUTPUT"),
        (["--db", good, "-o", tmp_path], "E_OUTPUT"),
    ]
    for args, want in cases:
        out = tmp_path / "out.html"
        full = ["timeline", *args] + ([] if "-o" in args else ["-o", out])
        code, stdout, err = run_cli(capsys, *full)
        assert code == 2 and err.startswith(f"error: {want}: ") and err.count("\n") == 1, (args, err)
        assert not out.exists()


def test_the_readmes_timeline_commands_work_as_written(tmp_path, capsys, monkeypatch):
    import shlex

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = re.search(r"## In a browser.*?```bash\n(.*?)```", readme, re.S).group(1)
    lines = [ln.split("#")[0].strip() for ln in block.splitlines() if ln.startswith("protolab timeline")]
    assert len(lines) == 2
    monkeypatch.chdir(tmp_path)
    run_scenario(load_scenario("publish-report"), db=tmp_path / "protolab.db").close()
    run_scenario(load_scenario("publish-report"), policy="naive", faults=["late-failure"], db=tmp_path / "naive.db").close()
    run_scenario(load_scenario("publish-report"), faults=["late-failure"], db=tmp_path / "safe.db").close()
    for line in lines:
        args = shlex.split(line)[1:]
        code, out, err = run_cli(capsys, *args)
        assert code == 0, (line, err)
        page = tmp_path / args[args.index("-o") + 1]
        assert page.exists() and f"wrote {page.name}" in out


# ------------------------------------------------------------------ a big run: a window at a time




def _stress(tmp_path: Path, name: str, policy: str, tasks: int) -> Path:
    from dataclasses import replace

    sc = load_scenario("stress")
    db = tmp_path / name
    run_scenario(replace(sc, stress=replace(sc.stress, tasks=tasks)), policy=policy, db=db).close()
    return db


def test_a_window_shows_exactly_the_rows_the_whole_page_shows_for_those_deliveries(tmp_path):
    db = _stress(tmp_path, "naive.db", "naive", 60)
    with Store.open(db, readonly=True) as store:
        whole = timeline.read_run(store, "x")
        n = len(whole.rows)
        from sim.invariants import check

        results = check(store)
        for first, last in ((1, 37), (41, 250), (n - 90, n), (n // 2, n // 2)):
            part = timeline.read_window(store, "x", first, last, results=results)
            assert [r["d"] for r in part.rows] == list(range(first, last + 1))
            assert part.rows == whole.rows[first - 1:last], (first, last)  # envelopes, events, states moved
            assert part.faults == [dict(f, row=f["row"] - (first - 1)) for f in whole.faults
                                   if first - 1 <= f["row"] < last]
            assert part.decisions == whole.decisions and part.total == n
            assert [b["name"] for b in part.breaks] == [b["name"] for b in whole.breaks]
            for pb, wb in zip(part.breaks, whole.breaks):  # each witness on the row the whole page puts it
                assert [None if r is None else r + first - 1 for r, _w in pb["witnesses"]] == \
                    [r if r is not None and first - 1 <= r < last else None for r, _w in wb["witnesses"]]
                assert [d for d in pb["deliveries"]] == [None if r is None else whole.rows[r]["d"]
                                                         for r, _w in wb["witnesses"]]


def test_a_big_run_is_drawn_a_window_at_a_time_around_its_first_broken_invariant(tmp_path, capsys, monkeypatch):
    db = _stress(tmp_path, "naive.db", "naive", 60)
    monkeypatch.setattr(timeline, "WHOLE_UP_TO", 100)  # this run stands in for one of a million deliveries
    monkeypatch.setattr(timeline, "WINDOW_ROWS", 40)
    out = tmp_path / "big.html"
    code, stdout, err = run_cli(capsys, "timeline", "--db", db, "-o", out)
    assert code == 0, err
    with Store.open(db, readonly=True) as store:
        n = store.count_of("deliveries")
        from sim.invariants import check

        results = check(store)
        at, name = timeline.first_break(store, results)
        whole = timeline.read_run(store, "x", results=results)
    earliest = min(whole.rows[r]["d"] for b in whole.breaks for r, _w in b["witnesses"] if r is not None)
    assert at == earliest and n > 100
    page = Page(out.read_text())
    arrows = [int(a["data-delivery"]) for a in page.with_class("arrow")]
    first = max(1, at - 20)
    assert arrows == list(range(first, first + 40))  # the window, and nothing else of the run
    text = out.read_text()
    assert f"where {name} first broke" in text and f"around delivery {at:,}" in text
    assert f"--from {first + 40} --count 40" in text  # the command for the next window
    assert f"deliveries {first:,} to {first + 39:,} of {n:,}" in stdout
    # the command the page names draws that window
    nxt = tmp_path / "next.html"
    code, stdout, err = run_cli(capsys, "timeline", "--db", db, "-o", nxt, "--from", str(first + 40), "--count", "40")
    assert code == 0, err
    assert [int(a["data-delivery"]) for a in Page(nxt.read_text()).with_class("arrow")] == \
        list(range(first + 40, min(n, first + 79) + 1))


def test_a_window_is_asked_for_in_range_and_never_bigger_than_a_whole_page(tmp_path, capsys):
    db = _run(tmp_path, "r.db")
    out = tmp_path / "w.html"
    for args in (["--count", str(timeline.WHOLE_UP_TO + 1)], ["--count", "0"], ["--from", "0"],
                 ["--from", "999"], ["--from", "1", "--around", "2"]):
        code, _o, err = run_cli(capsys, "timeline", "--db", db, "-o", out, *args)
        assert code == 2 and err.startswith("error: E_USAGE: ") and err.count("\n") == 1, (args, err)
        assert not out.exists()
    code, stdout, err = run_cli(capsys, "timeline", "--db", db, "-o", out, "--around", "3", "--count", "3")
    assert code == 0, err
    assert [int(a["data-delivery"]) for a in Page(out.read_text()).with_class("arrow")] == [2, 3, 4]


# ------------------------------------------------------------------ on a projector (issue 45, part 4)


def test_the_regression_pair_marks_the_late_failure_on_the_message_it_made_and_opens_at_the_break(tmp_path, capsys):
    naive = _run(tmp_path, "naive.db", policy="naive", faults=["late-failure"])
    safe = _run(tmp_path, "safe.db", faults=["late-failure"])
    out = tmp_path / "side.html"
    code, _stdout, err = run_cli(capsys, "timeline", "--db", naive, "--db", safe, "-o", out)
    assert code == 0, err
    page = Page(out.read_text())
    for k, db in enumerate((naive, safe)):
        with Store.open(db, readonly=True) as store:
            [fault] = store.events_of_type("fault_injected")
            [made] = store.deliveries_of(fault["data"]["late"])  # the failed result the fault made
            before = store.deliveries_of(fault["message_id"])   # the result it was injected on
        data = page.data(k)
        [(row, summaries)] = data["faults"].items()
        assert data["rows"][int(row)]["d"] == made["delivery_id"] != before[0]["delivery_id"]
        assert data["rows"][int(row)]["env"]["message_id"] == fault["data"]["late"]
        assert any(fault["data"]["late"] in s for s in summaries)
        # the drawn mark: in this run's drawing, on the row of the arrow of that delivery
        start = next(i for i, (t, a) in enumerate(page.tags) if t == "svg" and a.get("id") == f"run{k}")
        end = next((i for i, (t, a) in enumerate(page.tags) if i > start and t == "svg"), len(page.tags))
        mine = [a for _t, a in page.tags[start:end]]
        [mark] = [a for a in mine if "fault" in (a.get("class") or "").split()]
        [arrow] = [a for a in mine if "arrow" in (a.get("class") or "").split() and a["data-row"] == mark["data-row"]]
        assert int(arrow["data-delivery"]) == made["delivery_id"]
    # it opens where the naive run first broke: the run and row the invariants' witnesses name
    with Store.open(naive, readonly=True) as store:
        from sim.invariants import check

        at, _name = timeline.first_break(store, check(store))
    [main] = [a for t, a in page.tags if t == "main"]
    assert main["data-open-run"] == "0"
    assert page.data(0)["rows"][int(main["data-open-row"])]["d"] == at


def test_a_page_where_every_invariant_holds_opens_at_the_top(tmp_path):
    db = _run(tmp_path, "safe.db", faults=["late-failure"])
    text, store = _page(db)
    store.close()
    [main] = [a for t, a in Page(text).tags if t == "main"]
    assert "data-open-run" not in main and "data-open-row" not in main
    # unchecked: nothing is known broken, so the top too
    text, store = _page(_run(tmp_path, "naive.db", policy="naive", faults=["late-failure"]), check=False)
    store.close()
    [main] = [a for t, a in Page(text).tags if t == "main"]
    assert "data-open-run" not in main


def test_the_page_opens_at_the_earliest_break_of_either_run(tmp_path):
    pics = []
    for name, faults in (("dup.db", ["duplicate"]), ("late.db", ["late-failure"])):
        db = _run(tmp_path, name, policy="naive", faults=faults)
        with Store.open(db, readonly=True) as store:
            pics.append(timeline.read_run(store, name))
    earliest = [min(p.rows[r]["d"] for b in p.breaks for r, _w in b["witnesses"] if r is not None) for p in pics]
    assert earliest[0] != earliest[1]
    k = earliest.index(min(earliest))
    for order in (pics, pics[::-1]):
        run, row = timeline.opening(order)
        assert order[run] is pics[k] and order[run].rows[row]["d"] == earliest[k]


def test_each_drawing_shrinks_to_its_column_and_the_lane_names_follow_it(tmp_path):
    db = _run(tmp_path, "one.db")
    text, store = _page(db)
    store.close()
    page = Page(text)
    [main] = [a for t, a in page.tags if t == "main"]
    assert "minmax(0,1fr)" in main["style"]  # columns share the page's width, never wider than it
    [svg] = [a for t, a in page.tags if t == "svg" and "run" in (a.get("class") or "")]
    assert svg["style"] == f'max-width:{svg["width"]}px' and svg["viewbox"] == f'0 0 {svg["width"]} {svg["height"]}'
    [lanes] = page.with_class("lanes")
    assert lanes["style"] == f'max-width:{svg["width"]}px'
    names = [dict(x.split(":") for x in a["style"].split(";")) for a in page.with_class("lane-name")]
    assert names and all(n["width"].endswith("%") for n in names)
    assert all(v == "0" or v.endswith("%") for n in names for k, v in n.items() if k in ("left", "right"))


def test_runs_too_wide_to_read_side_by_side_stack_below_the_width_the_page_names(tmp_path):
    pics = []
    for name, scenario in (("a.db", "publish-report"), ("b.db", "gathers")):
        db = tmp_path / name
        run_scenario(load_scenario(scenario), policy="naive", faults=["late-failure"], db=db).close()
        with Store.open(db, readonly=True) as store:
            pics.append(timeline.read_run(store, name))
    assert timeline.stack_width(pics[:1]) is None and "!important" not in timeline.render(pics[:1])  # one: shrinks
    for pair in ([pics[0], pics[0]], [pics[1], pics[1]]):
        widths = [int(a["width"]) for t, a in Page(timeline.render(pair)).tags
                  if t == "svg" and "run" in (a.get("class") or "")]
        at = timeline.stack_width(pair)
        # at that page width, side by side, each drawing would be shown at STACK_BELOW of its size (or less)
        assert (at - 24 * len(pair)) / sum(widths) >= timeline.STACK_BELOW > (at - 1 - 24 * len(pair) - 1) / sum(widths)
        text = timeline.render(pair)
        assert f"@media (max-width:{at - 1}px){{.runs{{grid-template-columns:minmax(0,1fr)!important}}" in text
        heads = [a["style"] for a in Page(text).with_class("head")]
        bodies = [a["style"] for a in Page(text).with_class("body")]
        assert heads == ["--o:0", "--o:2"] and bodies == ["--o:1", "--o:3"]  # stacked: each head above its run
    assert timeline.stack_width([pics[0]] * 2) < 1280 < timeline.stack_width([pics[1]] * 2)
