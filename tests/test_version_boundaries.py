"""Schema versions at their boundaries (issue 48, part 1: bugs planted by hand in sim/versions.py,
tests/gathers_versions_planted.py): what a consumer says of 1.0, 1.1, the next minor and the next major,
a major below every one it reads, a JSON true where a count goes, a field the run declares."""

import dataclasses

import pytest

from sim import versions
from sim.envelope import build_envelope
from sim.errors import EnvelopeError
from sim.versions import Version


def _result(version, **extra):
    return dict(message_id="M-3", trace_id="R-1", task_id="T-1", sender="researcher", recipient="manager",
                type="task_result", payload={"status": "succeeded", "lease_version": 1, **extra},
                idempotency_key="R-1:T-1:attempt-1", created_at="2026-07-13T04:00:10Z", evidence_refs=["M-1"],
                schema_version=version)


def test_the_next_minor_is_refused_naming_the_newest_minor_read():
    assert versions.refusal("1.2") == (
        "schema_version '1.2' is newer than this runtime reads (1.0 or 1.1): reading it as 1.1 would drop what "
        "1.2 added; send 1.1 or lower")


@pytest.mark.parametrize("text", ["0", "0.9", "2", "2.0", "3.1"])
def test_a_major_not_read_below_or_above_is_not_supported(text):
    assert versions.refusal(text) == f"schema_version {text!r} is not supported (this runtime speaks 1)"


def test_a_json_true_is_no_lease_version():
    with pytest.raises(EnvelopeError) as e:
        build_envelope(**_result("1.1", lease_version=True))
    assert e.value.code == "E_FIELD_TYPE"
    # and a consumer holding payloads to their shape says so of a message that got past its sender
    env = build_envelope(**_result("1.1"))
    env = dataclasses.replace(env, payload={**env.payload, "lease_version": True})
    assert versions.shape_refusal(env) == "payload.lease_version of task_result must be int in schema 1.1, got bool"


def test_a_field_the_run_declares_is_allowed_one_nobody_declares_is_not():
    env = build_envelope(**_result("1.1"))
    env = dataclasses.replace(env, payload={**env.payload, "patient_id": "p-1"})
    assert versions.shape_refusal(env, frozenset({"patient_id"})) is None
    assert "payload.patient_id is not declared for task_result in schema 1.1" in versions.shape_refusal(env)


def test_a_minor_s_field_belongs_to_its_own_major_only():
    assert "partial" in versions.shape("task_result", Version(1, 1))
    assert "partial" not in versions.shape("task_result", Version(1, 0))
    assert "partial" not in versions.shape("task_result", Version(2, 0))
