"""A run's gathers in its exported trace (issue 29, item 4): each ``[[gather]]`` the runtime reduced is
declared with its rule, its frozen membership and its opener; the results it took are the gather's
contributions (beside each result, the value, success and vote it was reduced on); its ``result`` is the
runtime's own reduction. ``trace validate`` reduces the contributions again: the safe runtime's
reduction agrees and the trace validates; the naive one (majority mints truth and drops the dissent, the
first success picked by the senders' clocks) is E_GATHER_RESULT_MISMATCH."""

import dataclasses
import json

import pytest

from sim.cli import main
from sim.conversation import export_trace
from sim.protocol.trace import validate
from sim.runner import run_scenario
from sim.scenario import load_scenario


def _gathers(*keep: str):
    """The gathers scenario (lab 14) without its planted delay, keeping the gathers named (all by default)."""
    sc = load_scenario("gathers")
    gathers = tuple(g for g in sc.gathers if not keep or g.id in keep)
    return dataclasses.replace(sc, faults=(), gathers=gathers)


@pytest.fixture(scope="module")
def traces():
    return {p: export_trace(run_scenario(_gathers(), policy=p, seed=0)) for p in ("safe", "naive")}


def test_the_export_declares_each_gather_the_runtime_reduced_with_its_rule_and_contributions(traces):
    t = traces["safe"]
    by_id = {g["id"]: g for g in t["gathers"]}
    review, first = by_id["g-review"], by_id["g-first"]
    assert (review["rule"], review["threshold"]) == ("QUORUM", 2)
    assert (first["rule"], first["tieBreak"]) == ("FIRST_SUCCESS", "supplied-order")
    assert review["membership"] == ["researcher-1", "researcher-2", "researcher-3"]
    contributions = [m for m in t["messages"] if m.get("gatherId") == "g-review"]
    assert [m["kind"] for m in contributions] == ["CONTRIBUTION"] * 3
    assert sorted(m["payload"]["vote"] for m in contributions) == ["accept", "reject", "reject"]
    # every gather is exported: a message contributes to one gather, so each has finders of its own
    lowest = by_id["g-lowest"]
    assert (lowest["rule"], lowest["tieBreak"]) == ("FIRST_SUCCESS", "lowest-sender")
    assert lowest["membership"] == ["researcher-7", "researcher-8", "researcher-9"]
    took = [m["gatherId"] for m in t["messages"] if m.get("gatherId")]
    assert sorted(set(took)) == ["g-first", "g-lowest", "g-review"] and len(took) == 9
    # each declared with its deadline: opened by its first request, and the rounds the scenario declares
    assert all(g["deadline"] > next(m["at"] for m in t["messages"] if m["id"] == g["opener"]) for g in t["gathers"])


def test_safe_keeps_the_dissent_and_the_declared_tie_break_and_its_trace_validates(traces):
    t = traces["safe"]
    report = validate(t)
    assert report.valid, report.errors
    (review,) = [g for g in t["gathers"] if g["id"] == "g-review"]
    assert review["result"]["value"] == "reject" and [d["value"] for d in review["result"]["dissent"]] == ["accept"]


def test_naive_majority_drops_the_dissent_and_picks_by_clock_and_its_trace_fails_with_the_code(traces):
    report = validate(traces["naive"])
    mismatched = {f.pointer for f in report.errors if f.code == "E_GATHER_RESULT_MISMATCH"}
    assert {f.code for f in report.errors} == {"E_GATHER_RESULT_MISMATCH"}
    assert mismatched == {"/gathers/0/result", "/gathers/1/result", "/gathers/2/result"}  # the dissent, both picks
    (review,) = [g for g in traces["naive"]["gathers"] if g["id"] == "g-review"]
    assert review["result"]["dissent"] == []


@pytest.mark.parametrize("policy, valid", [("safe", True), ("naive", False)])
def test_the_lowest_sender_tie_break_is_checked_when_its_gather_is_the_one_exported(policy, valid):
    t = export_trace(run_scenario(_gathers("g-review", "g-lowest"), policy=policy, seed=0))
    (lowest,) = [g for g in t["gathers"] if g["id"] == "g-lowest"]
    assert lowest["tieBreak"] == "lowest-sender"
    report = validate(t)
    assert report.valid == valid
    if not valid:
        assert "/gathers/1/result" in {f.pointer for f in report.errors if f.code == "E_GATHER_RESULT_MISMATCH"}
    else:
        assert lowest["result"]["selected"] in {m["id"] for m in t["messages"] if m["sender"] == "researcher-7"}


def test_the_cli_round_trip_of_the_shipped_gathers_run_shows_the_mismatch_under_naive_only(tmp_path, capsys):
    codes = {}
    for policy in ("naive", "safe"):
        db, out = tmp_path / f"{policy}.db", tmp_path / f"{policy}.json"
        for argv in (["run", "gathers", "--policy", policy, "--db", db, "--json"], ["trace", "export", "--db", db, "-o", out]):
            with pytest.raises(SystemExit) as e:
                main([str(a) for a in argv])
            assert e.value.code == 0
        capsys.readouterr()
        with pytest.raises(SystemExit):
            main(["trace", "validate", str(out), "--json"])
        report = json.loads(capsys.readouterr().out)
        codes[policy] = {(x["code"], x["pointer"]) for x in report["errors"]}
    assert ("E_GATHER_RESULT_MISMATCH", "/gathers/0/result") in codes["naive"]  # the dissent dropped
    assert ("E_GATHER_RESULT_MISMATCH", "/gathers/0/result") not in codes["safe"]
