import json

import pytest

from sim import samples
from sim.digest import digest
from sim.envelope import FIELDS, Envelope, build_envelope, loads_strict, parse_envelope, parse_envelopes, role_of
from sim.errors import DigestError, EnvelopeError, InputError


def good() -> dict:
    return samples.m3().to_dict()


def test_the_envelope_has_every_field_of_the_seed_plus_digest_scheme():
    seed_fields = {
        "message_id", "trace_id", "task_id", "sender", "recipient", "type", "schema_version", "created_at",
        "idempotency_key", "payload_digest", "payload", "evidence_refs",
    }
    assert set(FIELDS) == seed_fields | {"digest_scheme"}


def test_an_envelope_round_trips_through_json():
    env = samples.m3()
    again = parse_envelope(json.loads(env.to_json()))
    assert again == env and isinstance(again, Envelope)


def test_build_envelope_computes_the_digest_under_the_chosen_scheme():
    for scheme in ("json-sorted-v1", "jcs-v2"):
        env = build_envelope(message_id="M-1", trace_id="R", task_id="T", sender="manager", recipient="writer",
                             type="task_request", payload={"goal": "g", "n": 1.0}, idempotency_key="k",
                             created_at="2026-07-13T04:00:00Z", digest_scheme=scheme)
        assert env.payload_digest == digest({"goal": "g", "n": 1.0}, scheme)


@pytest.mark.parametrize(
    "mutate, code",
    [
        (lambda d: d.pop("trace_id"), "E_MISSING_FIELD"),
        (lambda d: d.update(task_id=7), "E_FIELD_TYPE"),
        (lambda d: d.update(payload="succeeded"), "E_FIELD_TYPE"),
        (lambda d: d.update(evidence_refs="sha256:x"), "E_FIELD_TYPE"),
        (lambda d: d.update(type="task_done"), "E_UNKNOWN_TYPE"),
        (lambda d: d.update(sender="boss"), "E_UNKNOWN_ROLE"),
        (lambda d: d.update(schema_version="2"), "E_SCHEMA_VERSION"),
        (lambda d: d.update(digest_scheme="md5"), "E_UNKNOWN_SCHEME"),
        (lambda d: d.update(priority="high"), "E_UNKNOWN_FIELD"),
        (lambda d: d.update(created_at="yesterday"), "E_FIELD_VALUE"),
        (lambda d: d.update(payload_digest="sha256:abc"), "E_FIELD_VALUE"),
        (lambda d: d["payload"].update(summary="edited after digesting"), "E_DIGEST_MISMATCH"),
        (lambda d: d["payload"].pop("lease_version"), "E_MISSING_FIELD"),
        (lambda d: d["payload"].update(status="done"), "E_UNKNOWN_VALUE"),
        (lambda d: d["payload"].update(lease_version=True), "E_FIELD_TYPE"),
        (lambda d: d.update(message_id=""), "E_FIELD_VALUE"),
    ],
)
def test_a_bad_envelope_is_refused_with_a_stable_code(mutate, code):
    d = good()
    mutate(d)
    with pytest.raises(InputError) as e:
        parse_envelope(d)
    assert e.value.code == code


def test_a_nan_payload_is_refused_before_any_digest_is_trusted():
    text = good() | {}
    raw = json.dumps(text).replace('"summary": "3 claims, each with a source"', '"summary": NaN')
    with pytest.raises(InputError) as e:
        loads_strict(raw)
    assert e.value.code == "E_NAN"
    with pytest.raises(DigestError) as e2:
        digest({"x": float("nan")})
    assert e2.value.code == "E_NAN"


def test_duplicate_json_keys_are_refused_because_parsers_disagree_on_which_wins():
    with pytest.raises(InputError) as e:
        loads_strict('{"a": 1, "a": 2}')
    assert e.value.code == "E_DUPLICATE_KEY"


def test_invalid_utf8_and_malformed_json_are_refused():
    with pytest.raises(InputError) as e:
        loads_strict(b'{"a": "\xff"}')
    assert e.value.code == "E_NOT_UTF8"
    with pytest.raises(InputError) as e:
        loads_strict('{"a": ')
    assert e.value.code == "E_JSON"


def test_an_array_is_delivered_in_order_and_names_the_bad_entry():
    arr = [good(), good()]
    arr[1]["type"] = "nope"
    with pytest.raises(EnvelopeError) as e:
        parse_envelopes(json.dumps(arr))
    assert "entry 1" in e.value.message
    envs = parse_envelopes(json.dumps([samples.m1().to_dict(), samples.m2().to_dict()]))
    assert [e.message_id for e in envs] == ["M-1", "M-2"]


def test_a_participant_plays_the_role_before_its_suffix():
    assert role_of("researcher-2") == "researcher"
    assert role_of("reviewer") == "reviewer"
    with pytest.raises(EnvelopeError):
        role_of("researchers")


def test_the_seeds_twelve_field_envelope_is_read_under_the_default_scheme_and_the_run_says_so():
    """The seed's example envelope has no digest_scheme (the kit's thirteenth field): it is delivered, its
    digest read under json-sorted-v1, and a digest_scheme_assumed event records the assumption."""
    from sim.digest import digest
    from sim.envelope import parse_envelope, scheme_assumed
    from sim.runtime import deliver
    from sim.store import Store

    raw = {"message_id": "M-104", "trace_id": "R-7", "task_id": "T-20", "sender": "manager", "recipient": "researcher",
           "type": "task_request", "schema_version": "1", "created_at": "2026-07-13T04:00:00Z",
           "idempotency_key": "R-7:T-20:attempt-1", "payload": {"goal": "collect evidence"}, "evidence_refs": []}
    raw["payload_digest"] = digest(raw["payload"], "json-sorted-v1")
    env = parse_envelope(raw)
    assert env.digest_scheme == "json-sorted-v1" and scheme_assumed(env)
    store = Store.memory()
    out = deliver(store, env)
    assert out.decision == "accepted"
    assumed = [e for e in store.events() if e["type"] == "digest_scheme_assumed"]
    assert [(e["message_id"], e["data"]["scheme"]) for e in assumed] == [("M-104", "json-sorted-v1")]
    # the same envelope written with its scheme is no assumption
    assert not scheme_assumed(parse_envelope({**raw, "digest_scheme": "json-sorted-v1"}))
    # a wrong digest under the assumed scheme says the scheme was assumed
    with pytest.raises(Exception) as e:
        parse_envelope({**raw, "payload_digest": "sha256:" + "0" * 64})
    assert e.value.code == "E_DIGEST_MISMATCH" and "absent" in e.value.message
