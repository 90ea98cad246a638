"""Envelope schema versions: MAJOR.MINOR read, the patch ignored, a newer minor's field read by the
safe runtime and dropped by the naive one, a major nobody here reads refused, the digest scheme
versioned on its own."""

import pytest

from sim import versions
from sim.envelope import build_envelope, parse_envelope
from sim.errors import EnvelopeError
from sim.invariants import check
from sim.policy import NAIVE, SAFE
from sim.runner import run_scenario
from sim.scenario import load_scenario
from sim.versions import Version


@pytest.mark.parametrize("text, want", [("1", (1, 0)), ("1.0", (1, 0)), ("1.1", (1, 1)), ("1.0.7", (1, 0)),
                                        ("1.1.0", (1, 1)), ("2.0", (2, 0)), ("0", (0, 0))])
def test_a_version_is_major_minor_and_a_patch_is_ignored(text, want):
    assert versions.parse_version(text) == want


@pytest.mark.parametrize("text", ["", "v1", "1.", "1.x", "01.0", "1.0.0.0", " 1.0", "1,0"])
def test_a_version_that_is_not_major_minor_is_refused_with_its_code(text):
    with pytest.raises(EnvelopeError) as e:
        versions.parse_version(text)
    assert e.value.code == "E_SCHEMA_VERSION"


def test_the_runtime_reads_1_0_and_1_1_and_refuses_a_newer_minor_or_another_major():
    for ok in ("1", "1.0", "1.1", "1.0.3", "1.1.9"):
        assert versions.refusal(ok) is None
    assert "newer than this runtime reads" in versions.refusal("1.2")
    assert "not supported (this runtime speaks 1)" in versions.refusal("2.0")
    # a consumer that reads only 1.0 refuses 1.1 rather than drop what 1.1 added
    assert "drop what 1.1 added" in versions.refusal("1.1", reads=(Version(1, 0),))


def test_negotiation_picks_the_newest_version_both_sides_know():
    assert versions.negotiate((Version(1, 0), Version(1, 1))) == Version(1, 1)
    assert versions.negotiate((Version(1, 0), Version(1, 1)), (Version(1, 0),)) == Version(1, 0)
    with pytest.raises(EnvelopeError) as e:
        versions.negotiate((Version(2, 0),))
    assert e.value.code == "E_SCHEMA_VERSION"


def _result(version, **extra):
    return dict(message_id="M-3", trace_id="R-1", task_id="T-1", sender="researcher", recipient="manager",
                type="task_result", payload={"status": "succeeded", "lease_version": 1, **extra},
                idempotency_key="R-1:T-1:attempt-1", created_at="2026-07-13T04:00:10Z", evidence_refs=["M-1"],
                schema_version=version)


def test_the_partial_field_belongs_to_1_1_and_a_1_0_envelope_carrying_it_is_refused():
    assert build_envelope(**_result("1.1", partial=True)).payload["partial"] is True
    with pytest.raises(EnvelopeError) as e:
        build_envelope(**_result("1", partial=True))
    assert e.value.code == "E_SCHEMA_FIELD"
    with pytest.raises(EnvelopeError) as e:
        build_envelope(**_result("1.1", partial="yes"))
    assert e.value.code == "E_FIELD_TYPE"


def test_parsing_a_major_this_kit_does_not_read_says_which_versions_it_reads():
    raw = build_envelope(**_result("1")).to_dict()
    raw["schema_version"] = "2.0"
    with pytest.raises(EnvelopeError) as e:
        parse_envelope(raw)
    assert e.value.code == "E_SCHEMA_VERSION" and "1.0 or 1.1" in e.value.message


def test_a_lenient_1_0_reader_drops_what_1_1_added_and_the_log_keeps_it():
    env = build_envelope(**_result("1.1", partial=True))
    assert "partial" not in versions.read_as(env, Version(1, 0)).payload
    assert versions.read_as(env, Version(1, 1)) is env


@pytest.mark.parametrize("scheme", ["json-sorted-v1", "jcs-v2"])
def test_the_digest_scheme_is_versioned_apart_from_the_envelope(scheme):
    env = build_envelope(**_result("1.1", partial=True), digest_scheme=scheme)
    assert parse_envelope(env.to_dict()).digest_scheme == scheme


def _run(policy, faults):
    return run_scenario(load_scenario("publish-report"), policy=policy, faults=faults, seed=0)


def test_an_upgraded_writer_under_safe_its_partial_draft_is_read_and_not_published():
    s = _run(SAFE.name, ["upgrade"])
    m6 = next(m for m in s.messages() if m["message_id"] == "M-6")
    assert (m6["schema_version"], m6["payload"]["partial"]) == ("1.1", True)
    assert [e["type"] for e in s.events() if e["type"].startswith("effect_")] == ["effect_withheld"]
    assert all(r.ok for r in check(s))


def test_an_upgraded_writer_under_naive_its_mark_is_dropped_and_the_partial_draft_published():
    s = _run(NAIVE.name, ["upgrade"])
    broken = {r.name: r for r in check(s) if not r.ok}
    assert set(broken) == {"NEWER_FIELDS_READ"}
    assert broken["NEWER_FIELDS_READ"].witnesses[0]["message_id"] == "M-6"


def test_a_major_2_result_is_refused_under_safe_and_read_anyway_under_naive():
    safe = _run(SAFE.name, ["new-major"])
    first = next(d for d in safe.deliveries() if d["type"] == "task_result")
    assert (first["decision"], first["code"]) == ("rejected", "E_SCHEMA_VERSION")
    assert all(r.ok for r in check(safe))
    naive = _run(NAIVE.name, ["new-major"])
    assert {r.name for r in check(naive) if not r.ok} == {"VERSION_READ"}


def test_runs_without_the_new_faults_still_send_the_bare_major_of_the_seed_example():
    s = _run(SAFE.name, [])
    assert {m["schema_version"] for m in s.messages()} == {"1"}
