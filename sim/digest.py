"""Versioned payload digests.

A digest is written ``sha256:<64 lowercase hex>`` and is always stored next to the
name of the scheme that produced it; two digests are only comparable under one
scheme. Two schemes are pinned by test vectors (tests/test_digest.py):

``json-sorted-v1`` -- the course's teaching digest. The bytes hashed are exactly
    ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
    allow_nan=False).encode("utf-8")``:
    * object keys sorted by Unicode code point (Python's ``sorted`` on ``str``);
    * no whitespace at all: ``,`` between items and ``:`` after keys;
    * non-ASCII characters written as themselves in UTF-8, never ``\\u`` escapes
      (only ``"``, ``\\`` and control characters are escaped, as ``json`` does);
    * integers written in full (up to Python's 4300-digit int-to-str limit; beyond it the
      value is refused with E_DIGEST_DOMAIN); floats written with Python's
      shortest round-trip ``repr`` (``1.0``, ``-0.0``, ``1e+21``), so ``1`` and
      ``1.0`` differ;
    * ``true``/``false``/``null``; NaN and +/-Infinity are refused, and so are strings
      holding lone surrogates (they have no UTF-8 form).
    It is a local teaching digest, not a cross-language standard.

``jcs-v2`` -- RFC 8785 JSON Canonicalization Scheme through the ``rfc8785``
    package: keys sorted by UTF-16 code units, numbers in ECMAScript form
    (``-0`` becomes ``0``, ``1e21`` becomes ``1e+21``, ``1.0`` becomes ``1``),
    integers outside the IEEE-754 safe range (|n| >= 2**53) refused, since a
    double cannot carry them exactly. Use it across languages.
"""

from __future__ import annotations

import hashlib
import json
import math
import re

from .errors import DigestError

__all__ = [
    "SCHEMES",
    "DEFAULT_SCHEME",
    "canonical_bytes",
    "digest",
    "verify",
    "is_digest",
    "DIGEST_RE",
]

DEFAULT_SCHEME = "json-sorted-v1"
SCHEMES = ("json-sorted-v1", "jcs-v2")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


def _sorted_writer(allow_nan: bool):
    """``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=...)``,
    the same bytes, without building a JSONEncoder and its C encoder on every call: one C encoder,
    made once and reused (no circular-reference bookkeeping: the values written here come from
    parsed JSON or the kit's own dicts, and a circular one would end in a RecursionError, not a
    ValueError). Falls back to ``json.dumps`` where the C accelerator is absent."""
    enc = json.encoder
    if enc.c_make_encoder is None:  # type: ignore[attr-defined]  # pragma: no cover - CPython always has it (private: no stub)
        def dumps(value) -> str:
            return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=allow_nan)
        return dumps
    one = enc.c_make_encoder(None, json.JSONEncoder().default, enc.encode_basestring, None, ":", ",", True, False,  # type: ignore[attr-defined]  # CPython's json accelerator, private (None checked above)
                             allow_nan)
    join = "".join

    def dumps(value) -> str:  # type: ignore[no-redef]  # the two dumps are alternatives
        return join(one(value, 0))
    return dumps


_json_sorted = _sorted_writer(True)
_sorted_strict = _sorted_writer(False)

#: msgspec's sorted writer (bytes), once this process has written enough values to be worth its import
_quick = None
_QUICK_EXCEPTIONS: tuple = ()
_slow_writes = 0
#: values written the standard library's way before msgspec is loaded (a command that writes a few
#: values never pays for the import, ~30 ms; a run writes millions)
QUICK_AFTER = 256
_INT_MIN, _INT_MAX = -(2 ** 63), 2 ** 64


def use_quick_writer() -> bool:
    """Load msgspec's writer now (a test, a long run); False where msgspec is not installed."""
    global _quick, _QUICK_EXCEPTIONS
    if _quick is None:
        try:
            import msgspec
        except ImportError:  # pragma: no cover - a hard dependency
            return False
        _quick = msgspec.json.Encoder(order="sorted").encode
        _QUICK_EXCEPTIONS = (TypeError, ValueError, RecursionError, msgspec.EncodeError)
    return True


def _walker(lo: int, hi: int, keys_ok=None):
    """A check that a value holds nothing but strings, booleans, null, integers in ``lo..hi`` and arrays
    and objects of them (64 levels at most), each object's keys passing ``keys_ok`` when given."""

    def plain(value, depth: int = 0) -> bool:
        t = type(value)
        if t is dict:
            if keys_ok is not None and not keys_ok(value):
                return False
            items = value.values()
        elif t is list or t is tuple:
            items = value
        else:
            return t is str or t is bool or value is None or (t is int and lo <= value <= hi)
        if depth > 64:
            return False
        for x in items:
            tx = type(x)
            if tx is str or tx is bool or x is None:
                continue
            if tx is int:
                if lo <= x <= hi:
                    continue
                return False
            if (tx is dict or tx is list or tx is tuple) and plain(x, depth + 1):
                continue
            return False
        return True

    return plain


#: Whether msgspec's sorted writer spells a value exactly as the standard library's does: nothing in it but
#: strings, booleans, null, integers of at most 64 bits, and arrays and objects of them (no float: msgspec
#: writes ``1e16`` where Python writes ``1e+16``, and NaN as null). Keys that are not strings and strings
#: that are not UTF-8 make msgspec raise, and the caller falls back.
_plain = _walker(_INT_MIN, _INT_MAX - 1)

_JCS_MIN, _JCS_MAX = -(2 ** 53) + 1, 2 ** 53 - 1
_BMP_END = "\U00010000"


def _bmp_keys(obj: dict) -> bool:
    return all(type(k) is str and (not k or k.isascii() or max(k) < _BMP_END) for k in obj)


#: Whether a value's sorted JSON (msgspec's or the standard library's) is its RFC 8785 form byte for byte:
#: :data:`_plain`'s values with integers inside JCS's safe range, and object keys without characters beyond
#: the Basic Multilingual Plane (for those, sorting by code point and by UTF-16 code unit agree; strings are
#: escaped alike: quote, backslash, the short forms and ``\\u00xx``). Anything else goes through
#: ``rfc8785`` itself, which also raises the domain errors.
_jcs_plain = _walker(_JCS_MIN, _JCS_MAX, _bmp_keys)


def _counted() -> None:
    global _slow_writes
    _slow_writes += 1
    if _slow_writes >= QUICK_AFTER:
        use_quick_writer()


def sorted_dumps(value) -> str:
    """Sorted keys, no whitespace, UTF-8 as itself: how the store keeps JSON, and json-sorted-v1's text.
    Exactly ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``; written
    by msgspec (five times faster) when the value is :func:`_plain`, once the process writes many."""
    quick = _quick
    if quick is None:
        _counted()
    elif _plain(value):
        try:
            return quick(value).decode()
        except _QUICK_EXCEPTIONS:
            pass
    return _json_sorted(value)


def writes_as(value, text: str) -> bool:
    """True when ``value``'s json-sorted-v1 text is certainly ``text``, a text written from it earlier (as an
    envelope keeps its payload's, checked against or made into its digest): msgspec writes the value again and
    the bytes are compared, without the walk that proves a value plain, nor a hash. False: not known this way
    (msgspec not loaded yet, other bytes, or a text holding ``null``, which msgspec also writes for NaN and
    Infinity); write and digest the value."""
    quick = _quick
    if quick is None or "null" in text:
        return False
    try:
        return quick(value) == text.encode("utf-8")
    except _QUICK_EXCEPTIONS:
        return False


def _refuse_non_finite(value, path: str = "$") -> None:
    """Walk ``value`` and refuse NaN/Infinity and non-JSON types with a JSON path."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DigestError(
                f"{path} is {value!r}; NaN and Infinity have no JSON form and cannot be digested",
                code="E_NAN",
            )
    elif isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise DigestError(f"{path} has a non-string key {k!r}", code="E_DIGEST_DOMAIN")
            _refuse_non_finite(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _refuse_non_finite(v, f"{path}[{i}]")
    elif value is None or isinstance(value, (str, bool, int)):
        return
    else:
        raise DigestError(
            f"{path} is a {type(value).__name__}, which is not a JSON value", code="E_DIGEST_DOMAIN"
        )


#: the values msgspec's sorted writer spells exactly as each scheme does
_QUICK_SPELLS = {"json-sorted-v1": _plain, "jcs-v2": _jcs_plain}


def canonical_bytes(value, scheme: str = DEFAULT_SCHEME) -> bytes:
    """The exact bytes that ``scheme`` hashes for ``value``."""
    plain = _QUICK_SPELLS.get(scheme)
    if plain is not None:
        quick = _quick
        if quick is None:
            _counted()
        elif plain(value):  # (nothing in it to refuse, and msgspec spells it as the scheme does)
            try:
                return quick(value)
            except _QUICK_EXCEPTIONS:
                pass
    _refuse_non_finite(value)
    if scheme == "json-sorted-v1":
        try:
            return _sorted_strict(value).encode("utf-8")
        except UnicodeEncodeError as e:
            raise DigestError(
                f"the value holds a lone surrogate ({e.object[e.start:e.end]!r}), which has no UTF-8 form",
                code="E_DIGEST_DOMAIN",
            ) from e
        except ValueError as e:  # ints beyond Python's int-to-str digit limit
            raise DigestError(f"json-sorted-v1 cannot write the value: {e}", code="E_DIGEST_DOMAIN") from e
    if scheme == "jcs-v2":
        import rfc8785

        try:
            return rfc8785.dumps(value)
        except rfc8785.IntegerDomainError as e:
            raise DigestError(
                f"jcs-v2 cannot represent an integer beyond 2**53 exactly ({e}); send it as a string",
                code="E_DIGEST_DOMAIN",
            ) from e
        except rfc8785.CanonicalizationError as e:  # e.g. a lone surrogate in a value
            raise DigestError(f"jcs-v2 cannot canonicalize the payload: {e}", code="E_DIGEST_DOMAIN") from e
        except UnicodeEncodeError as e:  # a lone surrogate in a key: rfc8785 sorts keys by encoding them
            raise DigestError(
                f"the value holds a lone surrogate ({e.object[e.start:e.end]!r}) in a key, which has no UTF-16 form",
                code="E_DIGEST_DOMAIN",
            ) from e
    from .errors import friendly_list

    raise DigestError(
        f"unknown digest scheme {scheme!r}; expected one of: {friendly_list(SCHEMES)}",
        code="E_UNKNOWN_SCHEME",
    )


def digest(value, scheme: str = DEFAULT_SCHEME) -> str:
    """``sha256:<hex>`` of ``value`` under ``scheme``."""
    return "sha256:" + hashlib.sha256(canonical_bytes(value, scheme)).hexdigest()


def is_digest(text) -> bool:
    """True when ``text`` has the form ``sha256:<64 lowercase hex>``."""
    return isinstance(text, str) and DIGEST_RE.fullmatch(text) is not None


def verify(value, claimed: str, scheme: str) -> None:
    """Raise ``E_DIGEST_MISMATCH`` unless ``claimed`` is the digest of ``value`` under ``scheme``."""
    actual = digest(value, scheme)
    if actual != claimed:
        raise DigestError(
            f"payload_digest {claimed} does not match the payload under {scheme} (computed {actual})",
            code="E_DIGEST_MISMATCH",
        )
