"""What a log reader hands on, and the one place it becomes evidence.

There are two readers: the Python one (scanner.segments) and the C one (native/), built at
install. Both cut a log into segments of whole lines and classify each line once: unreadable,
uvicorn access line, engine request line, a line holding one of the scanner's keywords, or none.
A big log's access and request lines (~98 % of a busy server's) are only counted (`Segment`:
status codes, probes, refusals, the first few of each kind as evidence rows, prompt-head keys);
the keyword lines go to the parsers. `read()` is the one consumer of both readers' segments: the
tally, the examples kept as evidence, and the wrapped-dump follower.
"""
from __future__ import annotations

import itertools
import os
from array import array

from ...evidence.model import EVENT_KEEP, Event, Evidence
from ...redact import redact
from ..engines.common import MAX_PREFIXES, count_head
from .lineprefix import visible

ROW_WIDTH = 5           # kind, line index in the segment, start and end offsets of its text, status
# The values the C reader reads of a vLLM stats line (scan.c: dg_stats_line), per such keyword row:
# where the message, level, process name and time are in the line, the numbers, the time's hour,
# minute and second, and where the line's copy is in the segment's `blob` (-1: none; STATS_TEXT).
# How much of the file a segment's text() reads at once, where the lines asked for lie within
# TEXT_NEAR bytes of one another.
TEXT_CHUNK = 64 * 1024
TEXT_NEAR = 4096
STATS_WIDTH = 19
STATS_TEXT = 18
# The longest line read: a longer one is cut to its first MAX_LINE bytes (counted, and said in a
# note); the rest of it is skipped unread. Every reader cuts at the same place: a line with no
# newline in its first MAX_LINE bytes. (As large as the C reader's buffer: it holds one line whole.)
MAX_LINE = 4 << 20
# An input whose first line has no end in this many bytes is no log (`tr -d '\n'` output, an
# endless stream without newlines): refused rather than read for ever.
NO_LINE_END = 64 << 20
ROW_KEYWORD, ROW_PROBE, ROW_HTTP, ROW_RECEIVED = range(4)
# The fewest stats lines C read, one after the other, handed on as one StatsRun (a single line goes
# as any other keyword line, with its values).
RUN_MIN = 2


class FlatRows:
    """A segment's rows as C wrote them: ROW_WIDTH int64 each, in one flat array (8 bytes a
    field, where a tuple of five ints takes ~180). Segments wait for the parsers by the dozen: a
    keyword-dense log (every line a start-up line, thousands of launches) has a row per line.
    Iterating gives the rows as tuples, one at a time. `stats`: the values of the stats lines C
    read, STATS_WIDTH each, in row order; a keyword row's last field is 1 + its index there, or 0."""
    __slots__ = ("a", "stats")

    def __init__(self) -> None:
        self.a = array("q")
        self.stats = array("d")

    def add(self, raw: bytes) -> None:
        self.a.frombytes(raw)

    def __len__(self) -> int:
        return len(self.a) // ROW_WIDTH

    def __iter__(self):
        return zip(*[iter(self.a)] * ROW_WIDTH)


class StatsRun:
    """Keyword rows that follow one another in a segment, each a stats line C read (values in
    `stats`, STATS_WIDTH each): loading reads them in one call, not one dispatch a line (~10 µs
    each). The reader sets `done` (how many rows it took: the rest come one by one again, a row it
    could not read fast may have changed what follows) and `last_n` (the last line number read)."""
    __slots__ = ("seg", "base", "rows", "stats", "done", "last_n")

    def __init__(self, seg, base: int, rows: list, stats) -> None:
        self.seg, self.base, self.rows, self.stats = seg, base, rows, stats
        self.done = 0
        self.last_n = 0


class Segment:
    """What one scan of a run of whole lines found: counts, evidence and keyword rows (kind, line
    index in the segment, start and end offsets of its text, status), prompt heads (`heads`: the C
    table's runs; `head_counts`: {key: times} in order of first appearance, from Python). The
    lines are buf[start:end], or, with `fd`, the bytes of that file between those offsets."""
    __slots__ = ("buf", "fd", "start", "end", "lines", "bad", "cut", "bad_lines", "acc", "req", "rcv", "probe", "refused", "status",
                 "rows", "heads", "head_counts", "blob", "_chunk")

    def __init__(self, buf, fd, start: int, end: int) -> None:
        self.buf, self.fd, self.start, self.end = buf, fd, start, end
        self.lines = self.bad = self.acc = self.req = self.rcv = self.probe = self.refused = 0
        self.cut = 0                    # lines cut to MAX_LINE bytes
        self.bad_lines = None           # indices (from 1) of unreadable lines, where the reader knows them
        self.status: list = []          # (code, lines) pairs
        self.rows: list = []
        self.heads: list = []
        self.head_counts: dict | None = None
        self.blob: bytes | None = None  # C's copies of its stats lines, read from a file (native.scan_range)
        self._chunk = None              # (offset, bytes, end of the line asked for) of text()'s last read

    def text(self, a: int, z: int, copy: int = -1) -> bytes:
        """The bytes between offsets a and z: from the buffer, C's copy of the line (`copy`: where it
        is in `blob`, a stats line's STATS_TEXT value), or else the file."""
        if self.fd is None:
            return self.buf[a:z]
        if copy >= 0:
            return self.blob[copy:copy + z - a]
        # The keyword lines are asked for in order. Where they lie close together (a start-up's, a
        # few hundred bytes apart) the file is read TEXT_CHUNK bytes at a time within the segment,
        # not a read a line; far apart (a busy server's stats lines), only the line.
        c = self._chunk
        if c is not None:
            if c[0] <= a and z <= c[0] + len(c[1]):
                return c[1][a - c[0]:z - c[0]]
            if 0 <= a - c[2] <= TEXT_NEAR:
                data = os.pread(self.fd, max(z - a, min(TEXT_CHUNK, self.end - a)), a)
                self._chunk = (a, data, z)
                return data[:z - a]
        data = os.pread(self.fd, z - a, a)
        self._chunk = (a, data, z)
        return data

    def line_at(self, at: int) -> bytes:
        """The line that starts at `at`, without its newline."""
        if self.fd is None:
            end = self.buf.find(b"\n", at, self.end)
            return self.buf[at: end if end >= 0 else self.end]
        parts = []
        stop = min(self.end, at + MAX_LINE)
        while at < stop:
            chunk = os.pread(self.fd, min(65536, stop - at), at)
            if not chunk:
                break
            i = chunk.find(b"\n")
            if i >= 0:
                parts.append(chunk[:i])
                break
            parts.append(chunk)
            at += len(chunk)
        return b"".join(parts)

    def weight(self) -> int:
        """Bytes it holds while it waits for the parsers."""
        rows = self.rows
        flat = isinstance(rows, FlatRows)
        held = len(self.buf) if self.fd is None else len(self.blob or b"")
        return held + (48 if flat else 180) * len(rows) + (8 * len(rows.stats) if flat else 0)


def read(segments, display: str, ev, counts, progress=None, follow=None, every_line: bool = False,
         on_segment=None, base: int = 0):
    """Evidence from a reader's segments; yields (line number, text, keyword) for the lines the
    parsers must see. `follow()`, when true, asks for the next line whatever it holds: a parser in
    the middle of a dump a paste wrapped over several lines, or a region of a line format. With
    `every_line` (a small log, read whole) every line is yielded, `keyword` telling the lines
    that hold one; otherwise only those, and the lines `follow` asks for. `ev` may be a callable
    (the Evidence of the launch at hand: tallies go there). `on_segment(seg, keyword_rows, base)` is
    told of each segment before its lines, with its keyword rows and the lines before it.
    Closes `segments` when done or abandoned. `base`: the lines before the first segment (a followed
    file's lines read in an earlier pass), so that line numbers go on from there."""
    out = _Tally(display, ev, counts, follow, every_line)
    out.base = out.last = base
    try:
        for seg in segments:
            if progress is not None:
                progress(seg.end - seg.start)
            yield from out.segment(seg, on_segment)
    finally:
        close = getattr(segments, "close", None)
        if close is not None:
            close()
    out.finish()


class _Tally:
    def __init__(self, display: str, ev, counts, follow, every_line: bool = False):
        self.display, self._ev, self.counts, self.follow = display, ev, counts, follow
        self.every_line = every_line
        self.heads = None       # prompt heads in the C table, once C gives some
        self.base = 0           # lines before the segment at hand
        self.last = 0           # the last line number given to the parsers
        self.recognised = 0

    @property
    def ev(self):
        return self._ev() if callable(self._ev) else self._ev

    def segment(self, seg: Segment, on_segment=None):
        ev, base = self.ev, self.base
        self.counts.lines += seg.lines
        self.counts.unreadable += seg.bad
        if seg.cut:
            self.counts.cut += seg.cut
        self.recognised += seg.acc + seg.req

        kw = [r for r in seg.rows if r[0] == ROW_KEYWORD]
        if on_segment is not None:
            on_segment(seg, kw, base)
        if self.every_line:
            yield from self._every_line(seg, {r[1] for r in kw})
        else:
            yield from self._lines_for_parsers(seg, kw)
        # The access and request lines it counted, once its lines were read: they belong to the
        # launch those lines run in, not to one whose first line is still to come (a job's preamble
        # before the server starts would read as a server that had already served).
        ev = self.ev
        def rows(which):
            if which[0] == "status":
                code = int(which[1])
                return [r for r in seg.rows if r[0] == ROW_HTTP and r[4] == code]
            if which[0] == "probe":
                return [r for r in seg.rows if r[0] == ROW_PROBE]
            probes = {r[1] for r in seg.rows if r[0] == ROW_PROBE}
            return [r for r in seg.rows if r[0] == ROW_HTTP and r[4] in (503, 429) and r[1] not in probes]
        tally_access(ev, seg.acc, seg.req, [(f"{code:03d}", n) for code, n in seg.status], seg.refused,
                     seg.probe, lambda kind, which, n: self._examples(seg, kind, rows(which), n))
        if seg.rcv:
            self._examples(seg, "request", [r for r in seg.rows if r[0] == ROW_RECEIVED], seg.rcv)
            if seg.head_counts:
                for key, n in seg.head_counts.items():
                    count_head(ev, key, n)
            if seg.heads:
                if self.heads is None:
                    from .native import Heads, load
                    self.heads = Heads(load(), MAX_PREFIXES, ev.prompt_prefixes)
                for run in seg.heads:
                    self.heads.add(*run)
        self.base = base + seg.lines

    def _examples(self, seg: Segment, kind: str, rows, total: int) -> None:
        base = self.base
        note_examples(self.ev, kind, self.display,
                      ((base + r[1] + 1, seg.text(r[2], r[3]).decode("utf-8", "replace")) for r in rows), total)

    def _lines_for_parsers(self, seg: Segment, kw):
        """The keyword lines; and while a parser is in the middle of a wrapped dump (`follow()`),
        the next lines whatever they hold (unreadable ones skipped)."""
        follow, base, last = self.follow, self.base, self.last
        stats = getattr(seg.rows, "stats", None)
        # Where the line after `last` starts in the segment's buffer, when known.
        at = seg.start if last == base else None
        i, nkw = 0, len(kw)
        while True:
            if follow is not None and at is not None and follow():
                if at >= seg.end:
                    break               # the dump goes on in the next segment
                raw = seg.line_at(at)
                at += len(raw) + 1
                last += 1
                self.last = last
                if b"\x00" not in raw:
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError:
                        continue
                    yield last, text, False
                continue
            if i >= nkw:
                break
            row = kw[i]
            i += 1
            n = base + row[1] + 1
            if n <= last:
                continue
            if row[4] and stats:
                j = i
                while j < nkw and kw[j][4]:
                    j += 1
                if j - i + 1 >= RUN_MIN:
                    # stats lines C read, one after the other: read as a run
                    run = StatsRun(seg, base, kw[i - 1:j], stats)
                    yield n, None, run
                    i += run.done - 1
                    row = kw[i - 1]
                    last, at = base + row[1] + 1, row[3] + 1
                    self.last = last
                    continue
            last, at = n, row[3] + 1
            self.last = last
            if row[4] and stats:        # a stats line C read: its values, for loading's fast path
                k = (row[4] - 1) * STATS_WIDTH
                v = stats[k:k + STATS_WIDTH]
                yield n, seg.text(row[2], row[3], int(v[STATS_TEXT])).decode("utf-8", "replace"), v
            else:
                yield n, seg.text(row[2], row[3]).decode("utf-8", "replace"), True
        self.last = last

    def _every_line(self, seg: Segment, keyword: set):
        """Every readable line of a segment held in memory, in order (unreadable ones were counted)."""
        buf, at, end, i = seg.buf, seg.start, seg.end, 0
        base = self.base
        if not seg.bad and seg.bad_lines is None:
            # all of it readable text: decoded once, not line by line
            for i, text in enumerate(buf[at:end].decode("utf-8").split("\n")[:-1]):
                self.last = base + i + 1
                yield base + i + 1, text, i in keyword
            return
        while at < end:
            nl = buf.find(b"\n", at, end)
            z = nl if nl >= 0 else end
            raw = buf[at:z]
            if b"\x00" not in raw:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    text = None
                if text is not None:
                    self.last = base + i + 1
                    yield base + i + 1, text, i in keyword
            i += 1
            at = z + 1

    def finish(self) -> None:
        self.counts.bulk_recognised = getattr(self.counts, "bulk_recognised", 0) + self.recognised
        if self.heads is not None:
            overflow = self.heads.into(self.ev.prompt_prefixes)
            if overflow:
                self.ev.count("prompt_prefixes_overflow", overflow)


def tally_access(ev: Evidence, acc: int, req: int, status, refused: int, probe: int, examples) -> None:
    """What counted access and request lines become in the evidence, as engines.common makes of them
    line by line: `access_lines`, `status_NNN`, examples of 5xx/429 answers, refusals (503/429 to a
    request, not to a health probe), probes; `request_lines`. status: (three-digit code, lines)
    pairs; examples(kind, which, total) keeps the first lines of a kind, `which` being
    ("status", code), ("refused",) or ("probe",)."""
    if acc:
        ev.count("access_lines", acc)
        for code, n in status:
            ev.count(f"status_{code}", n)
            if code[0] == "5" or code == "429":
                examples(f"http_{code}", ("status", code), n)
        if refused:
            ev.count("requests_refused", refused)
            examples("request_refused", ("refused",), refused)
        if probe:
            ev.count("access_probe_lines", probe)
            examples("access_probe", ("probe",), probe)
    if req:
        ev.count("request_lines", req)


def note_examples(ev: Evidence, kind: str, display: str, rows, total: int) -> None:
    """Count every line of a kind; keep the first EVENT_KEEP as evidence (redacted).
    rows: (line number, text) in line order; only as many are read as there is room for."""
    ev.event_counts[kind] = ev.event_counts.get(kind, 0) + total
    bucket = ev.events.setdefault(kind, [])
    for n, text in itertools.islice(rows, max(0, EVENT_KEEP - len(bucket))):
        bucket.append(Event(kind, display, n, redact(visible(text)), None, {}))
