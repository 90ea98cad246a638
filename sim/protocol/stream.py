"""A ``conversation-trace-v2`` JSON document read a message at a time, in flat memory.

``trace validate`` and ``trace diagram`` on a trace too big to parse whole (a million messages is
about 300 MB of text and 1.4 GB parsed) read it with :class:`TraceFile`: the top-level object is
walked by hand, character by character as the stdlib's C scanner walks it, and each element of its
``messages`` array (and every other top-level value) is decoded by that same scanner
(``json.JSONDecoder.scan_once``) with the same hooks as :func:`sim.protocol.loads_trace`. So a message
comes out as the very value the whole parse gives, and a document the whole parse refuses is refused
here with the same line: the same code, the same words, the same line and column (a UTF-8 fault
anywhere in the file first, as the whole read decodes before it parses). Only what a conversation must
remember is kept: the header (everything but the messages), the :class:`~sim.protocol.trace.Scan`, and
what the validator remembers of each message (ids seen and accepted: :class:`IdSet`'s compact digests
past ``SPILL_AT`` messages).

The file is read three times at most (pure reading, no state kept between): once to learn the header
and the :class:`Scan` and to prove the whole document parses, once more to place the ids the header
names (only when the header comes after the messages and names some), and once to judge each message.

This module reads files (the protocol's one reader of bytes); the judging is :mod:`sim.protocol.trace`'s.
"""

from __future__ import annotations

import codecs
import json
from typing import BinaryIO, Callable, Iterator

from ..errors import InputError
from .trace import Report, Scan, _Judge, wanted_ids

__all__ = ["CHUNK", "SPILL_AT", "IdSet", "TraceFile", "validate_file"]

#: bytes read at a time
CHUNK = 1 << 20
#: past this many messages the ids seen and accepted are kept as :class:`IdSet` digests, not strings
SPILL_AT = 20_000
#: a scan that ends (or fails) this close to the end of what has been read is tried again with more:
#: a number, a literal or an escape cut by the chunk's end must not be taken for the whole
_MARGIN = 64
_WS = " \t\n\r"
_NOT_AN_OBJECT = object()


class _Refused(Exception):
    """The whole parse would refuse the document: ``error`` is the InputError it gives."""

    def __init__(self, error: InputError):
        self.error = error


class TraceFile:
    """One trace document on disk, read as the whole parse would read it, a piece at a time.

    ``opener()`` returns a fresh binary file positioned at the start (each pass opens it anew);
    ``what`` names it in refusals, as :func:`sim.protocol.loads_trace`'s ``what``; ``label`` is the name
    the E_NOT_UTF8 line gives (``trace file X``'s X)."""

    def __init__(self, opener: Callable[[], BinaryIO], what: str, label: str, *, chunk: int = CHUNK):
        self.opener, self.what, self.label, self.chunk = opener, what, label, chunk
        self.header: object = None  # what validate_file's survey found: the header (or the whole
        self.scan: Scan | None = None  # document, with scan None) and the Scan
        from . import strict_hooks

        refuse, one_value_per_key = strict_hooks(what)
        self._hook = one_value_per_key
        self._scan = json.JSONDecoder(parse_constant=refuse, object_pairs_hook=one_value_per_key).scan_once
        # after the survey proved the document whole (no repeated key, no NaN), the plain C scanner
        # gives the very same values, several times faster
        self._plain = json.JSONDecoder().scan_once

    # ---- the passes

    def survey(self) -> tuple[object, Scan | None]:
        """Pass one: the header (the top-level object, its ``messages`` array read as an empty list)
        and the :class:`Scan` (count and fences; the named ids placed too, in a second pass when the
        header comes after the messages). Raises the whole parse's InputError for a document it
        refuses. ``(document, None)`` when no messages array was streamed (a top level that is not an
        object, or messages that are not an array): the value is then the whole parsed document."""
        scan = Scan(0)
        want: set | None = None
        fences, first_at, kind_at = scan.fences, scan.first_at, scan.kind_at
        walk = self._document()
        for i, m in walk:
            if i < 0:  # the messages begin, every key naming ids already read
                want = wanted_ids(m)
                continue
            scan.count = i + 1
            if type(m) is dict:
                mid = m.get("id")
                if m.get("kind") == "FENCE":
                    fences.append((i, mid))
                if want and type(mid) is str and mid in want and mid not in first_at:
                    first_at[mid] = i
                    kind_at[mid] = m.get("kind")
        header = self._result
        if header is _NOT_AN_OBJECT:
            return self._whole(), None
        if not self._streamed:
            return header, None
        if want is None:  # the messages came before the header named its ids: place them now
            want = wanted_ids(header)
            if want:
                for i, m in enumerate(self.messages()):
                    if type(m) is dict:
                        mid = m.get("id")
                        if type(mid) is str and mid in want and mid not in first_at:
                            first_at[mid] = i
                            kind_at[mid] = m.get("kind")
        return header, scan

    def messages(self) -> Iterator:
        """Each element of the document's ``messages`` array, in order (after :meth:`survey` proved
        the document whole)."""
        for i, m in self._document(plain=True):
            if i >= 0:
                yield m

    def _whole(self):
        """The whole document parsed at once (a top level that is not an object: not a trace)."""
        from . import loads_trace

        with self.opener() as fh:
            raw = fh.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"trace file {self.label} is not UTF-8 ({e.reason} at byte {e.start})",
                             code="E_NOT_UTF8") from None
        del raw
        return loads_trace(text, self.what)

    # ---- the walk

    def _document(self, plain: bool = False) -> Iterator[tuple[int, object]]:
        """Parse the document as ``json.loads`` would; yield ``(i, message)`` per element of the first
        top-level ``messages`` array (and ``(-1, header so far)`` as it begins, when every key naming
        ids came before it). Sets ``_result`` (the header, or a marker for a non-object) and
        ``_streamed``."""
        r = _Reader(self, plain)
        self._result, self._streamed = None, False
        try:
            r.skip_ws()
            if r.peek() != "{":
                self._result = _NOT_AN_OBJECT  # the whole parse decides (a small or broken file)
                return
            r.p += 1
            pairs: list = []
            r.skip_ws()
            if r.peek() == "}":
                r.p += 1
            else:
                while True:
                    if r.peek() != '"':
                        r.fail("Expecting property name enclosed in double quotes", r.p)
                    key = r.string()
                    r.skip_ws()
                    if r.peek() != ":":
                        r.fail("Expecting ':' delimiter", r.p)
                    r.p += 1
                    r.skip_ws()
                    if key == "messages" and r.peek() == "[" and not any(k == "messages" for k, _ in pairs):
                        if {k for k, _ in pairs} >= {"participants", "gathers", "terminal"}:
                            yield -1, dict(pairs)
                        for n, m in enumerate(r.array()):
                            yield n, m
                        value: object = []
                        self._streamed = True
                    elif key == "messages" and r.peek() == "[":
                        for _ in r.array():  # a second messages array: E_DUPLICATE_KEY once it is read
                            pass
                        value = []
                    else:
                        value = r.value()
                    pairs.append((key, value))
                    r.skip_ws()
                    c = r.peek()
                    if c == "}":
                        r.p += 1
                        break
                    if c != ",":
                        r.fail("Expecting ',' delimiter", r.p)
                    r.p += 1
                    r.skip_ws()
            try:
                header = self._hook(pairs)
            except InputError as e:
                raise _Refused(e) from None
            r.skip_ws()
            if not r.at_end():
                r.fail("Extra data", r.p)
            self._result = header
        except _Refused as e:
            r.drain_utf8()
            raise e.error from None
        finally:
            r.close()


class _Reader:
    """A window of the document's text: ``s[p:]`` is what is read and not yet taken; ``base`` is the
    character offset of ``s[0]`` in the whole text (after a byte-order mark, as ``loads_trace`` drops
    it), with the lines before it counted for an error's line and column."""

    def __init__(self, tf: TraceFile, plain: bool = False):
        self.tf = tf
        self.fh = tf.opener()
        self.dec = codecs.getincrementaldecoder("utf-8")("strict")
        self.s, self.p, self.base = "", 0, 0
        self.lines, self.last_nl = 0, -1  # newlines before s[0]; absolute index of the last one
        self.bytes_read = 0
        self.eof = False
        self.first = True
        self.scan = tf._plain if plain else tf._scan

    def close(self) -> None:
        self.fh.close()

    # ---- reading

    def _decode(self, raw: bytes, final: bool) -> str:
        pending = len(self.dec.getstate()[0])
        try:
            text = self.dec.decode(raw, final)
        except UnicodeDecodeError as e:
            at = self.bytes_read - pending + e.start
            raise InputError(f"trace file {self.tf.label} is not UTF-8 ({e.reason} at byte {at})",
                             code="E_NOT_UTF8") from None
        self.bytes_read += len(raw)
        return text

    def more(self) -> bool:
        """Read another chunk onto the window (dropping what is taken). False at the end."""
        if self.eof:
            return False
        raw = self.fh.read(self.tf.chunk)
        text = self._decode(raw, not raw)
        if not raw:
            self.eof = True
        if self.first and (text or self.eof):
            self.first = False
            text = text.removeprefix("\ufeff")
        p, s = self.p, self.s
        if p:
            nl = s.count("\n", 0, p)
            if nl:
                self.lines += nl
                self.last_nl = self.base + s.rfind("\n", 0, p)
            self.base += p
            s = s[p:]
            self.p = 0
        self.s = s + text
        return bool(text) or not self.eof

    def drain_utf8(self) -> None:
        """Decode the rest of the file: the whole read refuses bad UTF-8 anywhere before any JSON fault."""
        while not self.eof:
            raw = self.fh.read(self.tf.chunk)
            self._decode(raw, not raw)
            if not raw:
                self.eof = True

    def ensure(self, k: int) -> None:
        while len(self.s) - self.p < k and not self.eof:
            self.more()

    def peek(self) -> str:
        self.ensure(1)
        return self.s[self.p:self.p + 1]

    def at_end(self) -> bool:
        self.ensure(1)
        return self.p >= len(self.s)

    def skip_ws(self) -> None:
        while True:
            self.ensure(1)
            s, p = self.s, self.p
            n = len(s)
            while p < n and s[p] in _WS:
                p += 1
            self.p = p
            if p < n or self.eof:
                return

    # ---- failing as the whole parse fails

    def fail(self, msg: str, pos: int):
        """Raise the whole parse's E_JSON for ``msg`` at ``pos`` of the window."""
        s = self.s
        at = self.base + pos
        nl = s.count("\n", 0, pos)
        line = self.lines + nl + 1
        last = self.base + s.rfind("\n", 0, pos) if nl else self.last_nl
        col = at - last
        raise _Refused(InputError(f"{self.tf.what} is not valid JSON: {msg} at line {line} column {col}", code="E_JSON"))

    # ---- values

    def _attempt(self, fn):
        """``fn(s, p) -> (value, end)`` with the window grown until the answer cannot depend on what
        is not read yet."""
        grown = 0
        while True:
            s, p = self.s, self.p
            n = len(s)
            try:
                v, end = fn(s, p)
            except StopIteration as e:
                if self.eof or e.value < n - _MARGIN:
                    self.fail("Expecting value", e.value)
            except json.JSONDecodeError as e:
                if self.eof or (e.pos < n - _MARGIN and not e.msg.startswith("Unterminated string")):
                    self.fail(e.msg, e.pos)
            except InputError as e:
                raise _Refused(e) from None
            except RecursionError:
                raise _Refused(InputError(f"{self.tf.what} cannot be read as JSON: RecursionError: nested too deeply",
                                          code="E_JSON")) from None
            except MemoryError:
                raise _Refused(InputError(f"{self.tf.what} cannot be read as JSON: MemoryError: nested too deeply",
                                          code="E_JSON")) from None
            except ValueError as e:  # an integer past the digits limit: its count of digits is in the words
                if self.eof or grown > 4:
                    raise _Refused(InputError(f"{self.tf.what} cannot be read as JSON: {e}", code="E_JSON")) from None
            else:
                if self.eof or end <= n - _MARGIN:
                    self.p = end
                    return v
            self.more()
            grown += 1

    def value(self):
        return self._attempt(self.scan)

    def string(self) -> str:
        return self._attempt(lambda s, p: json.decoder.scanstring(s, p + 1, True))

    def array(self) -> Iterator:
        """The elements of the array at ``p`` (its ``[``), as the C scanner reads them."""
        self.p += 1
        self.skip_ws()
        if self.peek() == "]":
            self.p += 1
            return
        while True:
            yield self.value()
            self.skip_ws()
            c = self.peek()
            if c == "]":
                self.p += 1
                return
            if c != ",":
                self.fail("Expecting ',' delimiter", self.p)
            self.p += 1
            self.skip_ws()


class IdSet:
    """``in`` and ``add`` over millions of ids in flat memory: a Bloom filter of two bits per id (16
    bits of it per id expected, so about one new id in seventy is asked of the table), the last few
    thousand ids added as strings, and every id exactly in ``table`` (anything with ``add_many(ids)``
    and ``has(id)``: a temp table on disk, ``sim.store.scratch_ids``). Exact: a Bloom hit is settled by
    the strings or the table, never by the digest alone."""

    __slots__ = ("bloom", "mask", "pending", "table", "flush_at")

    def __init__(self, expected: int, table, *, flush_at: int = 8192):
        bits = 1 << 20
        while bits < expected * 16:
            bits <<= 1
        self.bloom = bytearray(bits >> 3)
        self.mask = bits - 1
        self.pending: set = set()
        self.table = table
        self.flush_at = flush_at

    def add(self, key: str) -> None:
        h = hash(key)
        mask, bloom = self.mask, self.bloom
        a, b = h & mask, (h >> 32) & mask
        bloom[a >> 3] |= 1 << (a & 7)
        bloom[b >> 3] |= 1 << (b & 7)
        pending = self.pending
        pending.add(key)
        if len(pending) >= self.flush_at:
            self.table.add_many(pending)
            pending.clear()

    def __contains__(self, key) -> bool:
        if type(key) is not str:
            return False
        h = hash(key)
        mask, bloom = self.mask, self.bloom
        a, b = h & mask, (h >> 32) & mask
        if not (bloom[a >> 3] >> (a & 7)) & 1 or not (bloom[b >> 3] >> (b & 7)) & 1:
            return False
        return key in self.pending or self.table.has(key)


def validate_file(tf: TraceFile, *, tables: Callable[[str], object] | None = None,
                  on_accepted: Callable[[int, str], None] | None = None,
                  check_payload_digests: bool = True) -> Report:
    """:func:`sim.protocol.validate` of the trace in ``tf``, a message at a time: the same findings in
    the same order. ``tables(name)`` gives an exact on-disk set for the ids seen and accepted of a trace
    past :data:`SPILL_AT` messages (without it they are kept as strings); ``on_accepted(i, id)`` is told
    each accepted message, and the Report then lists none (``accepted`` and ``accepted_positions``
    empty: a million ids are the caller's to write as they come)."""
    from .trace import validate

    header, scan = tf.survey()
    tf.header, tf.scan = header, scan  # for a caller that reads the messages again (a diagram's window)
    if scan is None:  # nothing streamed: the document is small, or not a trace
        report = validate(header, check_payload_digests=check_payload_digests)
        if on_accepted is not None:
            for i, mid in zip(report.accepted_positions, report.accepted):
                on_accepted(i, mid)
        return report
    if tables is not None and scan.count > SPILL_AT:
        seen, acc = IdSet(scan.count, tables("seen_ids")), IdSet(scan.count, tables("accepted_ids"))
    else:
        seen, acc = set(), set()
    current: list = [None]

    def stream():
        for m in tf.messages():
            current[0] = m
            yield m

    judge = _Judge(header, scan, stream(), seen, acc, check_payload_digests, None, remember=on_accepted is None)
    for i, ok in enumerate(judge.run()):
        if ok and on_accepted is not None:
            on_accepted(i, current[0]["id"])
    return judge.report
