"""Test vectors for the two digest schemes in ``sim.digest``.

``json-sorted-v1`` is pinned byte for byte (and hash for hash, with the expected
hex computed here from literal bytes). ``jcs-v2`` is pinned with the vectors of
RFC 8785 (sections 3.2.2 and 3.2.3 and the number table of appendix B).
"""

from __future__ import annotations

import hashlib
import json
import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim import digest as d
from sim.errors import DigestError

V1 = "json-sorted-v1"
JCS = "jcs-v2"
BOTH = pytest.mark.parametrize("scheme", [V1, JCS])


def _ids(values) -> list[str]:
    """Test ids a shell and a test selector can pass as they are (no brackets, quotes or spaces)."""
    import re

    return [f"{i}-" + re.sub(r"[^A-Za-z0-9_.+-]+", "_", repr(v)).strip("_")[:36] for i, v in enumerate(values)]


def sha(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def code_of(excinfo) -> str:
    return excinfo.value.code


# ---------------------------------------------------------------------------
# Module surface
# ---------------------------------------------------------------------------


@pytest.fixture(autouse=True, params=["stdlib", "msgspec"])
def writer(request, monkeypatch):
    """Every test here runs under both writers of json-sorted-v1: the standard library's, and msgspec's,
    which a process switches to once it has written many values (sim.digest.QUICK_AFTER)."""
    if request.param == "msgspec":
        assert d.use_quick_writer()
    else:
        monkeypatch.setattr(d, "_quick", None)
        monkeypatch.setattr(d, "_slow_writes", -(10 ** 9))  # (never switches during the test)
    return request.param


_ANY = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2 ** 70), max_value=2 ** 70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.tuples(kids, kids)
    | st.dictionaries(st.text(max_size=5) | st.integers(0, 9), kids, max_size=4),
    max_leaves=12)


def _reference(value):
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as e:
        return type(e)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_ANY)
def test_the_store_writer_is_the_standard_library_byte_for_byte(value, writer):
    """sorted_dumps (how the store keeps JSON) gives json.dumps's text for any value, floats, NaN, big
    integers, tuples, keys that are not strings and lone surrogates included, under either writer."""
    want = _reference(value)
    try:
        got = d.sorted_dumps(value)
    except (TypeError, ValueError) as e:
        got = type(e)
    assert got == want


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_ANY)
def test_json_sorted_v1_bytes_are_the_same_under_either_writer(value, writer):
    try:
        want = ("ok", d._sorted_strict(value).encode("utf-8")) if not _refuses(value) else None
    except (UnicodeEncodeError, ValueError):
        want = None
    try:
        got = ("ok", d.canonical_bytes(value, V1))
    except DigestError:
        got = None
    assert got == want


_JCS_KEYS = st.text(max_size=5) | st.sampled_from(["\ue000", "\U0001f600", "a\U0001f600", "\ud800", "\x7f"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2 ** 60), max_value=2 ** 60)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.tuples(kids, kids) | st.dictionaries(_JCS_KEYS, kids, max_size=4),
    max_leaves=12))
def test_jcs_v2_bytes_are_rfc8785s_under_either_writer(value, writer):
    """jcs-v2 through msgspec (integers inside the safe range, keys within the Basic Multilingual Plane)
    gives rfc8785's bytes exactly, and what rfc8785 refuses (big integers, lone surrogates) is refused."""
    import rfc8785

    try:
        want = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeEncodeError):  # (a lone surrogate in a key: the latter)
        want = None
    try:
        got = d.canonical_bytes(value, "jcs-v2")
    except DigestError:
        got = None
    assert got == want


def _refuses(value) -> bool:
    try:
        d._refuse_non_finite(value)
    except DigestError:
        return True
    return False


def test_the_two_schemes_are_listed_and_json_sorted_v1_is_the_default():
    assert d.SCHEMES == ("json-sorted-v1", "jcs-v2")
    assert d.DEFAULT_SCHEME == "json-sorted-v1"
    value = {"b": 1.0, "a": [1, "x"]}
    assert d.digest(value) == d.digest(value, V1)
    assert d.canonical_bytes(value) == d.canonical_bytes(value, V1)


# ---------------------------------------------------------------------------
# json-sorted-v1: exact canonical bytes
# ---------------------------------------------------------------------------

V1_VECTORS = [
    # literals
    (None, b"null"),
    (True, b"true"),
    (False, b"false"),
    ({}, b"{}"),
    ([], b"[]"),
    ("", b'""'),
    # integers at any size, in full
    (0, b"0"),
    (-17, b"-17"),
    (2**53, b"9007199254740992"),
    (2**64, b"18446744073709551616"),
    (-(2**64), b"-18446744073709551616"),
    (10**40, b"1" + b"0" * 40),
    # floats: Python's shortest round-trip repr
    (1.0, b"1.0"),
    (-0.0, b"-0.0"),
    (0.0, b"0.0"),
    (1e21, b"1e+21"),
    (1e-7, b"1e-07"),
    (0.1, b"0.1"),
    (1.5, b"1.5"),
    (5e-324, b"5e-324"),
    (1.7976931348623157e308, b"1.7976931348623157e+308"),
    (333333333.33333329, b"333333333.3333333"),
    # strings: UTF-8, not \u escapes; controls, quote and backslash escaped
    ("caf\u00e9", b'"caf\xc3\xa9"'),
    ("\u20ac", b'"\xe2\x82\xac"'),
    ("\U0001f600", b'"\xf0\x9f\x98\x80"'),
    ("\u2028", b'"\xe2\x80\xa8"'),
    ("\x7f", b'"\x7f"'),
    ("\u0080", b'"\xc2\x80"'),
    ('a"b\\c', b'"a\\"b\\\\c"'),
    ("\n\r\t\b\f", b'"\\n\\r\\t\\b\\f"'),
    ("\x00\x01\x1f", b'"\\u0000\\u0001\\u001f"'),
    ("/", b'"/"'),
    # arrays keep their order; tuples are arrays
    ([3, 1, 2], b"[3,1,2]"),
    ((1, "a", None), b'[1,"a",null]'),
    ([[], [[]], {}], b"[[],[[]],{}]"),
    # objects: keys sorted, no whitespace anywhere
    ({"b": 1, "a": 2}, b'{"a":2,"b":1}'),
    ({"B": 1, "a": 2, "_": 3, "1": 4}, b'{"1":4,"B":1,"_":3,"a":2}'),
    ({"aa": 1, "a": 2, "": 3}, b'{"":3,"a":2,"aa":1}'),
    (
        {"z": {"y": [1, {"b": None, "a": True}], "x": False}, "a": [1.0, -0.0, "\u00e9"]},
        b'{"a":[1.0,-0.0,"\xc3\xa9"],"z":{"x":false,"y":[1,{"a":true,"b":null}]}}',
    ),
    (
        {"\u00e9t\u00e9": "\n", "k\u00f6": [2**64, 1e21]},
        b'{"k\xc3\xb6":[18446744073709551616,1e+21],"\xc3\xa9t\xc3\xa9":"\\n"}',
    ),
]


@pytest.mark.parametrize("value, expected", V1_VECTORS, ids=_ids(v for v, _ in V1_VECTORS))
def test_json_sorted_v1_writes_these_exact_bytes(value, expected):
    assert d.canonical_bytes(value, V1) == expected


def test_json_sorted_v1_never_writes_unicode_escapes_for_non_ascii():
    raw = d.canonical_bytes({"\u00e9": "\u4e2d\u6587\U0001f600"}, V1)
    assert b"\\u" not in raw
    assert raw.decode("utf-8") == '{"\u00e9":"\u4e2d\u6587\U0001f600"}'


def test_json_sorted_v1_sorts_keys_by_unicode_code_point():
    # U+E000 < U+1F600 as code points, so the private-use key comes first.
    value = {"\U0001f600": 2, "\ue000": 1}
    assert d.canonical_bytes(value, V1) == b'{"\xee\x80\x80":1,"\xf0\x9f\x98\x80":2}'


def test_jcs_sorts_keys_by_utf16_code_units_so_the_emoji_comes_before_u_e000():
    # In UTF-16 the emoji is the surrogate pair D83D DE00, and D83D < E000.
    value = {"\ue000": 1, "\U0001f600": 2}
    assert d.canonical_bytes(value, JCS) == b'{"\xf0\x9f\x98\x80":2,"\xee\x80\x80":1}'


def test_the_two_schemes_order_u_e000_and_an_emoji_differently_and_so_digest_differently():
    value = {"\ue000": 1, "\U0001f600": 2}
    v1 = d.canonical_bytes(value, V1)
    jcs = d.canonical_bytes(value, JCS)
    assert json.loads(v1) == json.loads(jcs) == value
    assert list(json.loads(v1)) == ["\ue000", "\U0001f600"]
    assert list(json.loads(jcs)) == ["\U0001f600", "\ue000"]
    assert d.digest(value, V1) != d.digest(value, JCS)


# ---------------------------------------------------------------------------
# json-sorted-v1: exact digests
# ---------------------------------------------------------------------------

V1_DIGESTS = [
    ({}, b"{}"),
    (None, b"null"),
    ({"b": [True, False, None], "a": 1}, b'{"a":1,"b":[true,false,null]}'),
    ({"c": 1.0, "b": [True, False, None], "a": 1}, b'{"a":1,"b":[true,false,null],"c":1.0}'),
    ({"c": 1, "b": [True, False, None], "a": 1}, b'{"a":1,"b":[true,false,null],"c":1}'),
    ({"n": 2**64, "s": "\u00e9\n"}, b'{"n":18446744073709551616,"s":"\xc3\xa9\\n"}'),
]


@pytest.mark.parametrize("value, raw", V1_DIGESTS, ids=_ids(v for v, _ in V1_DIGESTS))
def test_json_sorted_v1_digest_is_sha256_of_these_literal_bytes(value, raw):
    assert d.digest(value, V1) == sha(raw)


def test_json_sorted_v1_digests_of_well_known_inputs_are_pinned_in_hex():
    # Literal hex, so even the hashing step is pinned.
    assert d.digest({}, V1) == "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    assert d.digest(None, V1) == "sha256:74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"
    assert (
        d.digest({"a": 1, "b": [True, False, None]}, V1)
        == "sha256:39c40f48225c0bda582175eb3e5f00cc9e58928b59b1cd3d6385276cca4da0d5"
    )


# ---------------------------------------------------------------------------
# jcs-v2: RFC 8785 vectors
# ---------------------------------------------------------------------------

# RFC 8785 section 3.2.2, input as JSON text (the RFC's example is JSON text,
# so it is parsed exactly as a JCS implementation would receive it).
RFC8785_3_2_2_INPUT = r"""{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"""

RFC8785_3_2_2_OUTPUT = (
    b'{"literals":[null,true,false],'
    b'"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
    b'"string":"\xe2\x82\xac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
)


def test_jcs_reproduces_the_rfc8785_section_3_2_2_example_exactly():
    value = json.loads(RFC8785_3_2_2_INPUT)
    assert d.canonical_bytes(value, JCS) == RFC8785_3_2_2_OUTPUT
    # The same output written as the RFC prints it (UTF-8 text).
    assert RFC8785_3_2_2_OUTPUT.decode("utf-8") == (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert d.digest(value, JCS) == sha(RFC8785_3_2_2_OUTPUT)


RFC8785_3_2_3_INPUT = r"""{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"""


def test_jcs_sorts_keys_by_utf16_code_units_as_in_rfc8785_section_3_2_3():
    value = json.loads(RFC8785_3_2_3_INPUT)
    raw = d.canonical_bytes(value, JCS)
    out = json.loads(raw)
    assert list(out) == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert list(out.values()) == [
        "Carriage Return",
        "One",
        "Control",
        "Latin Small Letter O With Diaeresis",
        "Euro Sign",
        "Emoji: Grinning Face",
        "Hebrew Letter Dalet With Dagesh",
    ]
    assert raw == (
        b'{"\\r":"Carriage Return",'
        b'"1":"One",'
        b'"\xc2\x80":"Control",'
        b'"\xc3\xb6":"Latin Small Letter O With Diaeresis",'
        b'"\xe2\x82\xac":"Euro Sign",'
        b'"\xf0\x9f\x98\x80":"Emoji: Grinning Face",'
        b'"\xef\xac\xb3":"Hebrew Letter Dalet With Dagesh"}'
    )


def test_json_sorted_v1_sorts_the_rfc8785_section_3_2_3_keys_by_code_point_instead():
    value = json.loads(RFC8785_3_2_3_INPUT)
    out = json.loads(d.canonical_bytes(value, V1))
    # Same as JCS except U+FB33 now sorts before the astral emoji.
    assert list(out) == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\ufb33", "\U0001f600"]


# RFC 8785 appendix B: IEEE-754 bit pattern -> expected JCS number text.
RFC8785_APPENDIX_B = [
    ("0000000000000000", b"0"),
    ("8000000000000000", b"0"),  # -0 is written 0
    ("0000000000000001", b"5e-324"),
    ("8000000000000001", b"-5e-324"),
    ("7fefffffffffffff", b"1.7976931348623157e+308"),
    ("ffefffffffffffff", b"-1.7976931348623157e+308"),
    ("4340000000000000", b"9007199254740992"),
    ("c340000000000000", b"-9007199254740992"),
    ("4430000000000000", b"295147905179352830000"),
    ("44b52d02c7e14af5", b"9.999999999999997e+22"),
    ("44b52d02c7e14af6", b"1e+23"),
    ("44b52d02c7e14af7", b"1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", b"999999999999999700000"),
    ("444b1ae4d6e2ef4f", b"999999999999999900000"),
    ("444b1ae4d6e2ef50", b"1e+21"),
    ("3eb0c6f7a0b5ed8c", b"9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", b"0.000001"),
    ("41b3de4355555553", b"333333333.3333332"),
    ("41b3de4355555554", b"333333333.33333325"),
    ("41b3de4355555555", b"333333333.3333333"),
    ("41b3de4355555556", b"333333333.3333334"),
    ("41b3de4355555557", b"333333333.33333343"),
    ("becbf647612f3696", b"-0.0000033333333333333333"),
    ("43143ff3c1cb0959", b"1424953923781206.2"),
]


@pytest.mark.parametrize("bits, expected", RFC8785_APPENDIX_B, ids=[b for b, _ in RFC8785_APPENDIX_B])
def test_jcs_writes_the_rfc8785_appendix_b_numbers_exactly(bits, expected):
    (value,) = struct.unpack(">d", bytes.fromhex(bits))
    assert d.canonical_bytes(value, JCS) == expected


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"])
def test_jcs_refuses_the_rfc8785_appendix_b_nan_and_infinity_patterns(bits):
    (value,) = struct.unpack(">d", bytes.fromhex(bits))
    assert not math.isfinite(value)
    with pytest.raises(DigestError) as e:
        d.canonical_bytes(value, JCS)
    assert code_of(e) == "E_NAN"


JCS_NUMBER_VECTORS = [
    (-0.0, b"0"),
    (0.0, b"0"),
    (1e21, b"1e+21"),
    (1e20, b"100000000000000000000"),
    (1.0, b"1"),
    (4.5, b"4.5"),
    (0.1, b"0.1"),
    (1e-6, b"0.000001"),
    (1e-7, b"1e-7"),
    (333333333.33333329, b"333333333.3333333"),
    (5e-324, b"5e-324"),
    (2.0**53, b"9007199254740992"),  # a float this big is fine, unlike the int
    (0, b"0"),
    (-5, b"-5"),
    (2**53 - 1, b"9007199254740991"),
    (-(2**53) + 1, b"-9007199254740991"),
]


@pytest.mark.parametrize("value, expected", JCS_NUMBER_VECTORS, ids=_ids(v for v, _ in JCS_NUMBER_VECTORS))
def test_jcs_writes_numbers_in_ecmascript_form(value, expected):
    assert d.canonical_bytes(value, JCS) == expected


JCS_OTHER_VECTORS = [
    (None, b"null"),
    (True, b"true"),
    (False, b"false"),
    ({}, b"{}"),
    ([], b"[]"),
    ((1, 2.0), b"[1,2]"),
    ({"b": [1.0, -0.0], "a": {"d": None, "c": "\u00e9"}}, b'{"a":{"c":"\xc3\xa9","d":null},"b":[1,0]}'),
    ("\n\x00\x1f\x7f\u2028", b'"\\n\\u0000\\u001f\x7f\xe2\x80\xa8"'),
    ('a"b\\c/', b'"a\\"b\\\\c/"'),
]


@pytest.mark.parametrize("value, expected", JCS_OTHER_VECTORS, ids=_ids(v for v, _ in JCS_OTHER_VECTORS))
def test_jcs_writes_these_exact_bytes(value, expected):
    assert d.canonical_bytes(value, JCS) == expected


def test_jcs_digest_is_sha256_of_the_canonical_bytes():
    assert d.digest({"b": 1.0, "a": [True, None]}, JCS) == sha(b'{"a":[true,null],"b":1}')
    assert d.digest(-0.0, JCS) == sha(b"0")


@pytest.mark.parametrize(
    "value",
    [2**53, -(2**53), 2**53 + 1, -(2**53) - 1, 2**64, -(2**64), 10**30],
    ids=["2**53", "-2**53", "2**53+1", "-2**53-1", "2**64", "-2**64", "10**30"],
)
def test_jcs_refuses_integers_outside_the_safe_range_with_e_digest_domain(value):
    with pytest.raises(DigestError) as e:
        d.canonical_bytes(value, JCS)
    assert code_of(e) == "E_DIGEST_DOMAIN"
    with pytest.raises(DigestError) as e:
        d.digest({"nested": [0, value]}, JCS)
    assert code_of(e) == "E_DIGEST_DOMAIN"


def test_jcs_accepts_the_largest_safe_integers():
    assert d.canonical_bytes([2**53 - 1, -(2**53 - 1)], JCS) == b"[9007199254740991,-9007199254740991]"


def test_json_sorted_v1_accepts_integers_jcs_refuses():
    assert d.canonical_bytes({"n": 2**53}, V1) == b'{"n":9007199254740992}'


# ---------------------------------------------------------------------------
# Both schemes: refusals
# ---------------------------------------------------------------------------

NON_FINITE = [
    math.nan,
    math.inf,
    -math.inf,
    {"a": math.nan},
    {"a": {"b": [1, math.inf]}},
    [0, -math.inf],
    [[{"x": math.nan}]],
    (1.0, math.inf),
]


@BOTH
@pytest.mark.parametrize("value", NON_FINITE, ids=_ids(NON_FINITE))
def test_nan_and_infinity_anywhere_raise_e_nan(scheme, value):
    with pytest.raises(DigestError) as e:
        d.digest(value, scheme)
    assert code_of(e) == "E_NAN"
    with pytest.raises(DigestError) as e:
        d.canonical_bytes(value, scheme)
    assert code_of(e) == "E_NAN"


@pytest.mark.parametrize("scheme", ["json-sorted-v2", "jcs", "sha256", "", "JCS-V2"])
def test_an_unknown_scheme_raises_e_unknown_scheme(scheme):
    with pytest.raises(DigestError) as e:
        d.digest({"a": 1}, scheme)
    assert code_of(e) == "E_UNKNOWN_SCHEME"
    with pytest.raises(DigestError) as e:
        d.canonical_bytes({"a": 1}, scheme)
    assert code_of(e) == "E_UNKNOWN_SCHEME"


NOT_JSON = [
    {1, 2},
    b"bytes",
    {"a": {1}},
    [b"x"],
    {1: "non-string key"},
    object(),
    1 + 2j,
    frozenset(),
]


@BOTH
@pytest.mark.parametrize("value", NOT_JSON, ids=[type(v).__name__ + str(i) for i, v in enumerate(NOT_JSON)])
def test_a_non_json_type_raises_e_digest_domain(scheme, value):
    with pytest.raises(DigestError) as e:
        d.digest(value, scheme)
    assert code_of(e) == "E_DIGEST_DOMAIN"


def test_jcs_refuses_a_lone_surrogate_with_e_digest_domain():
    with pytest.raises(DigestError) as e:
        d.digest({"k": "\ud800"}, JCS)
    assert code_of(e) == "E_DIGEST_DOMAIN"


def test_jcs_refuses_a_lone_surrogate_in_a_key_with_e_digest_domain():
    """(rfc8785 itself raises UnicodeEncodeError there, which once left as a traceback.)"""
    with pytest.raises(DigestError) as e:
        d.canonical_bytes({"\ud800": 1, "a": 2}, "jcs-v2")
    assert e.value.code == "E_DIGEST_DOMAIN"


def test_json_sorted_v1_refuses_a_lone_surrogate_with_e_digest_domain():
    with pytest.raises(DigestError) as e:
        d.digest({"k": "\ud800"}, V1)
    assert code_of(e) == "E_DIGEST_DOMAIN"


def test_json_sorted_v1_refuses_an_integer_beyond_pythons_digit_limit_cleanly():
    with pytest.raises(DigestError) as e:
        d.canonical_bytes(10**5000, V1)
    assert code_of(e) == "E_DIGEST_DOMAIN"


def test_digest_errors_are_input_errors_with_a_one_line_message():
    from sim.errors import InputError

    with pytest.raises(InputError) as e:
        d.digest({"a": [math.nan]}, V1)
    assert e.value.one_line().startswith("E_NAN: ")
    assert "\n" not in e.value.one_line()


# ---------------------------------------------------------------------------
# verify and is_digest
# ---------------------------------------------------------------------------


@BOTH
def test_verify_returns_none_for_the_right_digest(scheme):
    value = {"b": [1, 2.5], "a": "\u00e9"}
    assert d.verify(value, d.digest(value, scheme), scheme) is None


@BOTH
@pytest.mark.parametrize(
    "claimed",
    [
        "sha256:" + "0" * 64,
        "sha256:",
        "",
        "not a digest",
    ],
)
def test_verify_raises_e_digest_mismatch_for_a_wrong_digest(scheme, claimed):
    with pytest.raises(DigestError) as e:
        d.verify({"a": 1}, claimed, scheme)
    assert code_of(e) == "E_DIGEST_MISMATCH"


@BOTH
def test_verify_raises_e_digest_mismatch_for_an_uppercased_right_digest(scheme):
    value = {"a": 1}
    right = d.digest(value, scheme)
    upper = "sha256:" + right[len("sha256:"):].upper()
    assert upper != right
    with pytest.raises(DigestError) as e:
        d.verify(value, upper, scheme)
    assert code_of(e) == "E_DIGEST_MISMATCH"


def test_verify_raises_e_digest_mismatch_when_checked_under_the_other_scheme():
    value = {"a": 1.0}
    with pytest.raises(DigestError) as e:
        d.verify(value, d.digest(value, V1), JCS)
    assert code_of(e) == "E_DIGEST_MISMATCH"


def test_verify_under_an_unknown_scheme_raises_e_unknown_scheme():
    value = {"a": 1}
    with pytest.raises(DigestError) as e:
        d.verify(value, d.digest(value, V1), "nope")
    assert code_of(e) == "E_UNKNOWN_SCHEME"


def test_verify_of_a_nan_payload_raises_e_nan_not_a_mismatch():
    with pytest.raises(DigestError) as e:
        d.verify({"a": math.nan}, "sha256:" + "0" * 64, V1)
    assert code_of(e) == "E_NAN"


@pytest.mark.parametrize(
    "text",
    [
        "sha256:" + "0" * 64,
        "sha256:" + "f" * 64,
        "sha256:" + "0123456789abcdef" * 4,
        "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
    ],
)
def test_is_digest_accepts_sha256_and_64_lowercase_hex(text):
    assert d.is_digest(text) is True


@pytest.mark.parametrize(
    "text",
    [
        "sha256:" + "A" * 64,  # uppercase
        "sha256:" + "0123456789ABCDEF" * 4,  # uppercase
        "sha256:" + "0" * 63,  # short
        "sha256:" + "0" * 65,  # long
        "sha256:",  # empty hex
        "sha256:" + "g" * 64,  # not hex
        "sha512:" + "0" * 64,  # other prefix
        "SHA256:" + "0" * 64,  # uppercase prefix
        "md5:" + "0" * 32,
        "0" * 64,  # no prefix
        " sha256:" + "0" * 64,  # leading space
        "sha256: " + "0" * 64,
        "",
        None,
        123,
        b"sha256:" + b"0" * 64,
    ],
)
def test_is_digest_rejects_uppercase_short_or_other_prefixes(text):
    assert d.is_digest(text) is False


def test_is_digest_rejects_a_digest_with_a_trailing_newline():
    assert d.is_digest("sha256:" + "0" * 64 + "\n") is False


@BOTH
def test_every_digest_produced_passes_is_digest(scheme):
    for value in [None, 0, "", {}, [], {"a": [1, 2.5, "\u00e9"]}]:
        assert d.is_digest(d.digest(value, scheme))


# ---------------------------------------------------------------------------
# Stability and scheme differences
# ---------------------------------------------------------------------------


@BOTH
def test_a_digest_is_stable_same_value_same_digest(scheme):
    def build():
        return {"z": [1, 2.5, None, True], "a": {"y": "\u00e9", "x": -3}}

    first = d.digest(build(), scheme)
    assert all(d.digest(build(), scheme) == first for _ in range(5))
    assert d.digest(build(), scheme) == d.digest(json.loads(json.dumps(build())), scheme)


def test_one_and_one_point_zero_differ_under_json_sorted_v1_but_are_equal_under_jcs_v2():
    assert d.digest(1, V1) != d.digest(1.0, V1)
    assert d.digest({"n": 1}, V1) != d.digest({"n": 1.0}, V1)
    assert d.digest(1, JCS) == d.digest(1.0, JCS)
    assert d.digest({"n": 1}, JCS) == d.digest({"n": 1.0}, JCS)


def test_zero_and_negative_zero_differ_under_json_sorted_v1_but_are_equal_under_jcs_v2():
    assert d.digest(0.0, V1) != d.digest(-0.0, V1)
    assert d.digest(0.0, JCS) == d.digest(-0.0, JCS) == d.digest(0, JCS)


@BOTH
def test_booleans_are_not_confused_with_one_and_zero(scheme):
    assert d.digest(True, scheme) != d.digest(1, scheme)
    assert d.digest(False, scheme) != d.digest(0, scheme)


@BOTH
def test_a_tuple_digests_like_the_equal_list(scheme):
    assert d.digest((1, "a", (None,)), scheme) == d.digest([1, "a", [None]], scheme)


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------

SAFE_INT = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | SAFE_INT
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=25,
)


def reversed_deep(value):
    """The same JSON value with every dict built in the reverse insertion order."""
    if isinstance(value, dict):
        return {k: reversed_deep(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_deep(v) for v in value]
    return value


@pytest.mark.slow_cases("stdlib")  # measured at 2 s or more on 2 cores
@settings(max_examples=200)
@given(json_values)
def test_property_digest_is_deterministic_under_both_schemes(value):
    for scheme in (V1, JCS):
        assert d.digest(value, scheme) == d.digest(value, scheme)
        assert d.canonical_bytes(value, scheme) == d.canonical_bytes(value, scheme)
        assert d.is_digest(d.digest(value, scheme))


@pytest.mark.slow  # measured at 2 s or more in the quick loop on 2 cores
@settings(max_examples=200)
@given(st.dictionaries(st.text(), json_values, min_size=2, max_size=8))
def test_property_digest_does_not_depend_on_dict_insertion_order(value):
    flipped = reversed_deep(value)
    assert flipped == value
    assert list(flipped) == list(reversed(list(value)))
    for scheme in (V1, JCS):
        assert d.canonical_bytes(flipped, scheme) == d.canonical_bytes(value, scheme)
        assert d.digest(flipped, scheme) == d.digest(value, scheme)


@pytest.mark.slow_cases("stdlib")  # measured at 2 s or more on 2 cores
@settings(max_examples=200)
@given(json_values)
def test_property_nested_dict_insertion_order_does_not_matter_either(value):
    for scheme in (V1, JCS):
        assert d.digest(reversed_deep(value), scheme) == d.digest(value, scheme)


@pytest.mark.slow_cases("stdlib")  # measured at 2 s or more on 2 cores
@settings(max_examples=200)
@given(json_values)
def test_property_json_sorted_v1_bytes_round_trip_through_json_loads(value):
    # -0.0 == 0.0 in Python, so equality is the right check even for signed zeros.
    raw = d.canonical_bytes(value, V1)
    assert json.loads(raw) == value
    # and canonicalizing the parsed value again gives the same bytes
    assert d.canonical_bytes(json.loads(raw), V1) == raw


@pytest.mark.slow_cases("stdlib")  # measured at 2 s or more on 2 cores
@settings(max_examples=200)
@given(json_values)
def test_property_jcs_digest_survives_a_trip_through_json_sorted_v1_bytes(value):
    reparsed = json.loads(d.canonical_bytes(value, V1))
    assert d.digest(reparsed, JCS) == d.digest(value, JCS)
    assert d.canonical_bytes(reparsed, JCS) == d.canonical_bytes(value, JCS)


@pytest.mark.slow_cases("stdlib")  # measured at 2 s or more on 2 cores
@settings(max_examples=100)
@given(json_values)
def test_property_jcs_bytes_are_valid_json_for_an_equal_value(value):
    # JCS turns -0.0 into 0 and 1.0 into 1, which still compare equal in Python.
    # Numbers must be read back as doubles (as JCS intends): a big float such as
    # 2.0**68 is written "295147905179352830000", which Python's json.loads would
    # otherwise read as a different *int*.
    assert json.loads(d.canonical_bytes(value, JCS), parse_int=float) == value


def test_jcs_number_text_is_meant_to_be_read_back_as_a_double():
    raw = d.canonical_bytes(2.0**68, JCS)
    assert raw == b"295147905179352830000"
    assert json.loads(raw) != 2.0**68  # read as an int, it is a different number
    assert json.loads(raw, parse_int=float) == 2.0**68
