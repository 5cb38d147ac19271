"""The Python log reader: it decides which lines matter; the per-format parsers decide what they
mean. The C reader (native/) does the same work faster where it was built at install; both hand
their segments to one consumer (segments.read), and tests hold them to the same evidence.

Each line of a block of whole lines is classified as scan.c classifies it: not readable text
(invalid UTF-8, NUL bytes: counted, never parsed), and, on a big log (`tally`), an engine request
line or a uvicorn access line (counted: engines.common.REQUEST_SHAPE/ACCESS_SHAPE), else a line
holding one of the keywords (for the parsers). A small log is read whole and every keyword line
goes to the parsers, access and request lines included: the reference the tallies are checked
against. A big log's block is tallied a kind of line at a time over the whole block
(_tally_block: each pattern in one pass, Python only where a line needs it), twice as fast as a
line at a time (_segment_lines), which still reads a block with unreadable lines and the small
log's.
"""
from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate, compress, islice, repeat
from operator import add, methodcaller, sub
from zlib import adler32, crc32

from ...evidence.model import EVENT_KEEP
from ...lazyre import lazy
from ..engines.common import ACCESS_BYTES, PROBE_PATHS, REQUEST_BYTES, head_key, prompt_head
from ..engines import ENGINES
from ..formats import KEYWORDS as FORMAT_KEYWORDS
from .segments import MAX_LINE, NO_LINE_END, ROW_HTTP, ROW_KEYWORD, ROW_PROBE, ROW_RECEIVED, Segment

# Every line a parser understands contains at least one of these: the words of lines every engine
# writes (NCCL, CUDA, uvicorn, Ray, crashes, shutdowns), then each engine's own (engines/<name>/).
# Keep them plain strings: bench/ greps with the same list to compare speed, and the C scanner
# gets it as it is.
SHARED_KEYWORDS = [
    "throughput", "version", "KV cache", "KV Cache", "blocks:", "took", "takes",
    "total_gpu_memory", "CUDA graph", "cudagraph", "eager",
    "allreduce", "NCCL", "Ray", "preempted", "Error", "error", "out of memory", "Out of memory", "Cuda graph is disabled", "OutOfMemory", "could not be allocated", "ALLOC_FAILED",
    "died", "timed out", "Traceback", "Exception", "Interrupt", "SystemExit", "failed to start",
    "SIGTERM", "SIGINT", "placement group", "█  model", "(UUID: ", "CUDA capability", "  NVIDIA ", "signal", "Shutting down", "Terminated", "Aborted", "Stopping", "HTTP/", "request",
    "startup complete",
    "max model len", "max_num_batched_tokens", "context length", "max_seq_len", "maximum model length", "detected platform",
    "capacity of", "Speculative metrics", "Uvicorn running", "--", "reserved number of GPUs",
    # DCGM exporter's own log
    "DCP metrics", "metric not enabled",
    # a scheduler's or a wrapper's end of the job
    "CANCELLED", "xit code", "xit status", "xited with", "eturn code", "exit_code", "exit_status", "returncode",
    # a KV transfer between disaggregated prefill and decode nodes that failed or timed out
    "transfer timeout", "KV pull failed", "KV load failure", "KVTransferError", "Failed to get kvcache", "transfer failed",
    "Transfer Return Error", "Failed to complete transfer", "expired KV blocks", "kv cache transfer", "kv_connector",
    "kv_role", "isaggregation",
]
# ... and each line format's (formats/): the lines that open a `dmon` capture, a scrape, a result block.
GREP_KEYWORDS = list(dict.fromkeys(SHARED_KEYWORDS + [k for e in ENGINES.values() for k in (*e.keywords, *e.stop_hints)]
                                   + list(FORMAT_KEYWORDS)))


def _any_of(words: list[bytes]) -> bytes:
    """A pattern that matches where one of `words` starts, as a trie: the regex engine tries an
    alternation's branches one after the other at each byte, and one branch per keyword made
    the keyword search the slowest part of reading a log (3x slower than this)."""
    trie: dict = {}
    for w in words:
        node = trie
        for c in w:
            node = node.setdefault(c, {})
        node[None] = {}         # a word ends here: a longer one adds nothing to "holds one"

    esc = {c: re.escape(bytes([c])) for c in {c for w in words for c in w}}    # once a byte, not once a node

    def branch(node: dict) -> bytes:
        if None in node:
            return b""
        alts = [esc[c] + branch(sub) for c, sub in sorted(node.items())]
        return alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"
    return branch(trie)


# Built and compiled at its first use (~2 + 3 ms): where the C reader is built, it flags a small
# log's keyword lines, and this is only needed by a big log's tally or without the library.
_KW = lazy(lambda: _any_of([k.encode() for k in GREP_KEYWORDS]))
PROBE_BYTES = tuple(p.encode() for p in PROBE_PATHS)
# The tally's patterns, lazy too: a small log is read without them.
_ODD = lazy(rb"[\x00-\x08\x0e-\x1f\x80-\xff]")
_RECEIVED = b"] Received request"
# A line's first request or access match, taken on to the line's end: one match per line, ending
# at its newline.
_REQUEST_LINE = lazy(REQUEST_BYTES.pattern + rb"[^\n]*")
# (`tail`: path to status, one bytes object to count by)
assert ACCESS_BYTES.pattern.endswith(rb"(?P<status>\d{3})")
_ACCESS_LINE = lazy(ACCESS_BYTES.pattern.replace(b"(?P<path>", b"(?P<tail>(?P<path>", 1) + rb")[^\n]*")
_END = re.Match.end
# Where a prompt head ends (engines.common.prompt_head): the first of its two ends after it, by
# quote; looked for in the 256 bytes a head may take and as far past them as the longer end reaches.
_HEAD_END_1, _HEAD_END_2 = (re.compile(q + rb", (?:params|sampling_params)").search for q in (b"'", b'"'))
_HEAD_OVER = len(b"', sampling_params") - 1
_TAIL = methodcaller("group", "tail")


@dataclass
class ScanCounts:
    lines: int = 0
    unreadable: int = 0
    cut: int = 0                # lines cut to MAX_LINE bytes
    binary_head: bool = False   # NUL bytes in the first block: likely not a text log


def segments(blocks: Iterable[bytes], keep: int = EVENT_KEEP, tally: bool = True,
             keywords: re.Pattern[bytes] = _KW, display: str = "input") -> Iterator[Segment]:
    """The Python reader: a Segment per run of whole lines of `blocks`. `keep`: evidence rows kept
    per kind and segment; `tally`: count access and request lines instead of handing them on."""
    for buf, start, end, cut in line_runs(blocks, display):
        block = buf[start:end] if start or end != len(buf) else buf
        seg = _segment(block, keep, tally, keywords)
        seg.cut = cut
        yield seg


def line_runs(blocks, display: str = "input"):
    """The one block-to-lines cutter of every reader: (buffer, start, end, lines cut), runs of
    whole lines, without copying the blocks. The line a block's end cuts is joined into a small
    buffer of its own; a line with no newline in its first MAX_LINE bytes is cut there (its own
    run, `cut` 1) and the rest of it skipped; a last line without newline gets one; empty blocks
    are no lines. Raises InputError when the first line has no end in NO_LINE_END bytes."""
    tail: list[bytes] = []
    held = 0            # bytes in tail
    skipping = False    # inside the rest of a cut line
    seen = 0            # bytes before the line at hand, while no line has ended
    started = False     # a line ended
    for b in blocks:
        if not b:
            continue        # an empty block (a decoder's last) is no line
        i = b.find(b"\n")
        if i < 0:
            if skipping:
                seen += len(b)
            elif held + len(b) >= MAX_LINE:
                tail.append(b)
                yield b"".join(tail)[:MAX_LINE] + b"\n", 0, MAX_LINE + 1, 1
                seen, tail, held, skipping = held + len(b), [], 0, True
            else:
                tail.append(b)
                held += len(b)
            if not started and seen >= NO_LINE_END:
                from .files import InputError
                raise InputError(f"{display}: no line end in its first {NO_LINE_END >> 20} MiB: not a text log (not read further)")
            continue
        if not started and skipping and seen + i >= NO_LINE_END:
            from .files import InputError
            raise InputError(f"{display}: no line end in its first {NO_LINE_END >> 20} MiB: not a text log (not read further)")
        started = True
        begin = 0
        if skipping:
            skipping = False
            begin = i + 1
        elif tail:
            if held + i >= MAX_LINE:
                tail.append(b[:i])
                yield b"".join(tail)[:MAX_LINE] + b"\n", 0, MAX_LINE + 1, 1
            else:
                head = b"".join(tail) + b[: i + 1]
                yield head, 0, len(head), 0
            tail, held = [], 0
            begin = i + 1
        j = b.rfind(b"\n")
        if j + 1 > begin:
            if _has_long(b, begin, j + 1):
                yield from _cut_runs(b, begin, j + 1)
            else:
                yield b, begin, j + 1, 0
        if j + 1 < len(b):
            rest = b[j + 1:]
            if len(rest) >= MAX_LINE:
                yield rest[:MAX_LINE] + b"\n", 0, MAX_LINE + 1, 1
                skipping = True
            else:
                tail.append(rest)
                held = len(rest)
    if tail:
        last = b"".join(tail) + b"\n"
        yield last, 0, len(last), 0


def _has_long(b: bytes, a: int, z: int) -> bool:
    """Whether b[a:z] (whole lines) holds a line of MAX_LINE bytes or more: only a run that long can."""
    if z - a <= MAX_LINE:
        return False
    at = a
    while at < z:
        nl = b.find(b"\n", at, z)
        if nl - at >= MAX_LINE:
            return True
        at = nl + 1
    return False


def _cut_runs(b: bytes, a: int, z: int):
    """b[a:z] (whole lines) as runs, each line of MAX_LINE bytes or more cut into a run of its own."""
    at = run = a
    while at < z:
        nl = b.find(b"\n", at, z)
        if nl - at >= MAX_LINE:
            if at > run:
                yield b, run, at, 0
            yield b[at:at + MAX_LINE] + b"\n", 0, MAX_LINE + 1, 1
            run = nl + 1
        at = nl + 1
    if z > run:
        yield b, run, z, 0


def _segment(block: bytes, keep: int, tally: bool, keywords) -> Segment:
    """One block of whole lines (it ends with a newline), classified as scan.c classifies it."""
    if tally and keywords is _KW and block.endswith(b"\n"):
        bad = _bad_lines(block, 0)
        if bad is None and (seg := _tally_block(block, keep)) is not None:
            return seg
        return _segment_lines(block, keep, tally, keywords, bad)
    return _segment_lines(block, keep, tally, keywords, _bad_lines(block, 0))


def _tally_block(block: bytes, keep: int) -> Segment | None:
    """_segment_lines' tally found a kind at a time over the whole block, in C-speed passes
    (bytes.find, finditer, map, Counter); Python runs per line only for a `] Received request`
    line (its prompt head) and a line that holds a keyword. None where a block needs
    _segment_lines (an access line's path with a control or non-ASCII byte).

    The Received lines (most of a busy log's bytes: each carries its prompt) are taken first, and
    the other lines' patterns run over the rest joined (`rest`): its lines, in order, are the
    block's other lines. No pattern or keyword spans a newline, so a line's first match in a
    block is the one a search of that line alone finds."""
    find, rfind = block.find, block.rfind
    rcv_a: list[int] = []
    rcv_z: list[int] = []
    pos = 0
    while (p := find(_RECEIVED, pos)) >= 0:
        pos = find(b"\n", p)
        rcv_a.append(rfind(b"\n", 0, p) + 1)
        rcv_z.append(pos)
        pos += 1
    # Prompt heads as engines.common.prompt_head cuts them, without copying the lines (each
    # carries its whole prompt); keyed as head_key keys them, in order of first appearance.
    heads = []
    append = heads.append
    for i, z in zip(map(find, repeat(b"prompt: "), rcv_a, rcv_z), rcv_z):
        if i >= 0:
            start = i + 9
            if start <= z:
                q = block[i + 8]
                search = _HEAD_END_1 if q == 39 else _HEAD_END_2 if q == 34 else None   # ' or "
                if search is not None:
                    w = start + 256
                    m = search(block, start, w + _HEAD_OVER if w + _HEAD_OVER < z else z)
                    if m is not None and (e := m.start()) < w:
                        w = e
                    append(block[start:w if w < z else z])
    keys: dict[int, int] = {}
    for head, n in Counter(heads).items():    # a head repeats (a system prompt): keyed once
        k = crc32(head) << 32 | adler32(head)
        keys[k] = keys.get(k, 0) + n
    if rcv_a:
        # the runs of lines between Received lines: run r follows r Received lines
        g0 = [0, *map(add, rcv_z, repeat(1))]
        g1 = [*rcv_a, len(block)]
        rest = b"".join(map(block.__getitem__, map(slice, g0, g1)))
        at = [0, *accumulate(map(sub, g1, g0))]     # where each run starts in `rest`
    else:
        rest = block
    found = _tally_rest(rest, keep)
    if found is None:
        return None
    seg, rows = found
    seg.buf, seg.end = block, len(block)
    seg.head_counts = keys
    if not rcv_a:
        seg.rows = rows
        return seg
    seg.lines += len(rcv_a)
    seg.req += len(rcv_a)
    seg.rcv = len(rcv_a)
    # Rows of `rest` back to the block: a line of run r has r Received lines before it.
    out = []
    for kind, i, a, z, code in rows:
        r = bisect_right(at, a) - 1
        shift = g0[r] - at[r]
        out.append((kind, i + r, a + shift, z + shift, code))
    count = rest.count
    seen = n = 0
    for k in range(min(keep, len(rcv_a))):
        # lines before Received line k: k Received lines, and those of runs 0..k
        seen += count(b"\n", n, at[k + 1])
        n = at[k + 1]
        out.append((ROW_RECEIVED, k + seen, rcv_a[k], rcv_z[k], 0))
    out.sort(key=_line_of)
    seg.rows = out
    return seg


def _tally_rest(block: bytes, keep: int):
    """(Segment, rows) for whole lines none of which holds `] Received request`; None where
    _segment_lines must decide. Rows are in line order."""
    seg = Segment(block, None, 0, len(block))
    # A line's first match, taken to its end (match end = its newline): one match per line.
    req = list(map(_END, _REQUEST_LINE.finditer(block)))
    access = list(_ACCESS_LINE.finditer(block))
    http_rows: list = []
    probe_rows: list = []
    if access:
        acc = list(map(_END, access))
        if req and not set(req).isdisjoint(acc):
            requests = set(req)
            access = [m for m, e in zip(access, acc) if e not in requests]
            acc = [e for e in acc if e not in requests]
        pairs = list(map(_TAIL, access))
        status: dict[int, int] = {}
        probe = refused = 0
        probes, http = [], {}
        for pair, n in Counter(pairs).items():
            path, code = pair.split(b" ", 1)[0], int(pair[-3:])     # the path holds no space
            # Where a path holds a control or non-ASCII byte (no other part of ACCESS_SHAPE
            # can), Python's classes over text may read the line otherwise: the parsers decide.
            if _ODD.search(path):
                return None
            status[code] = status.get(code, 0) + n
            if path.startswith(PROBE_BYTES):
                probe += n
                probes.append(pair)
            elif code in (503, 429):
                refused += n      # the admission limit; a probe answered 503 is not
            if 500 <= code < 600 or code == 429:
                http.setdefault(code, []).append(pair)
        seg.acc, seg.probe, seg.refused = len(access), probe, refused
        seg.status = sorted(status.items())
        counted = sorted(req + acc) if req else acc
    else:
        acc = []
        counted = req
    seg.req = len(req)

    # Lines neither request nor access (others), in runs between the counted ones: gap_n[j]
    # of them right before counted line gap_k[j].
    count = block.count
    total = count(b"\n")
    seg.lines = n = total
    k = len(counted)
    gap_k: list[int] = []
    gap_n: list[int] = []
    runs = []
    if n > k:
        starts = [0, *map(add, counted[:-1], repeat(1))]
        if (n - k) * 16 < k:
            # Few (a busy server's log): found by halving the counted lines wherever newlines
            # outnumber them, rather than by a count between every two of them.
            todo = [(0, k)] if k else []
            while todo:
                lo, hi = todo.pop()
                extra = count(b"\n", starts[lo], counted[hi - 1]) - (hi - 1 - lo)
                if extra:
                    if hi - lo == 1:
                        gap_k.append(lo)
                        gap_n.append(extra)
                    else:
                        mid = (lo + hi) // 2
                        todo += ((mid, hi), (lo, mid))
        else:
            others = list(map(count, repeat(b"\n"), starts, counted))
            gap_k = list(compress(range(k), others))
            gap_n = list(compress(others, others))
        runs = [(starts[g], rfind_line(block, starts[g], counted[g]), g + b - o)
                for g, o, b in zip(gap_k, gap_n, accumulate(gap_n))]
        tail = counted[-1] + 1 if counted else 0
        if tail < len(block):
            runs.append((tail, len(block), n - count(b"\n", tail)))
    gap_before = list(accumulate(gap_n))

    def line_of(end: int) -> int:
        k = bisect_left(counted, end)
        j = bisect_right(gap_k, k)
        return k + gap_before[j - 1] if j else k

    if access:
        # The first `keep` lines of each kept kind, in line order.
        for code, which in sorted(http.items()):
            for j in _first(pairs, which, keep):
                e = acc[j]
                http_rows.append((ROW_HTTP, line_of(e), rfind_line(block, 0, e), e, code))
        for j in _first(pairs, probes, keep):
            e = acc[j]
            probe_rows.append((ROW_PROBE, line_of(e), rfind_line(block, 0, e), e, int(pairs[j][-3:])))

    rows = http_rows + probe_rows
    kw = _KW.search
    find, rfind = block.find, block.rfind
    hot = None      # the keyword found last: a line holding it needs no search (a stats line)
    for g0, g1, i in runs:
        at = pos = g0
        while pos < g1:
            z = find(b"\n", pos, g1)
            if hot is not None and find(hot, pos, z) >= 0:
                a = pos
            else:
                m = kw(block, pos, g1)
                if m is None:
                    break
                p = m.start()
                hot = m.group()
                a = rfind(b"\n", pos, p) + 1 or pos
                z = find(b"\n", p, g1)
            i += count(b"\n", at, a)
            at = a
            rows.append((ROW_KEYWORD, i, a, z, 0))
            pos = z + 1
    rows.sort(key=_line_of)
    return seg, rows


def rfind_line(block: bytes, lo: int, end: int) -> int:
    """Where the line that ends at `end` starts (not before `lo`, where a line starts)."""
    return block.rfind(b"\n", lo, end) + 1 or lo


def _first(pairs: list, which: list, keep: int) -> list[int]:
    """The indices of the first `keep` items of `pairs` that are among `which`."""
    return list(islice(compress(range(len(pairs)), map(set(which).__contains__, pairs)), keep))


def _line_of(row) -> int:
    return row[1]


def _segment_lines(block: bytes, keep: int, tally: bool, keywords, bad) -> Segment:
    """One block of whole lines, classified line by line (`bad`: _bad_lines of it)."""
    seg = Segment(block, None, 0, len(block))
    lines = block.split(b"\n")
    lines.pop()
    seg.lines = len(lines)
    if bad:
        seg.bad = len(bad)
        seg.bad_lines = bad
    rows = seg.rows
    a = 0           # where the line at hand starts in the block
    if not tally:
        flags = _flags(block, len(lines)) if keywords is _KW else None
        kw = keywords.search if flags is None else None
        for i, raw in enumerate(lines):
            z = a + len(raw)
            if (flags[i] if flags is not None else kw(raw)) and not (bad and i + 1 in bad):
                rows.append((ROW_KEYWORD, i, a, z, 0))
            a = z + 1
        return seg
    status: dict[int, int] = {}
    kept: dict[int, int] = {}
    kept_probe = kept_rcv = 0
    heads: dict[int, int] = {}
    is_request, is_access = REQUEST_BYTES.search, ACCESS_BYTES.search
    # Where an access line holds a control or non-ASCII byte, Python's classes (\S, \w, \d over
    # text) may read it otherwise than this bytes pattern: the parsers decide, as in scan.c.
    kw = keywords.search
    unsure = None if block.isascii() and not _ODD.search(block) else _ODD.search
    for i, raw in enumerate(lines):
        z = a + len(raw)
        if bad and i + 1 in bad:
            pass
        # Each regex runs only where its literal text is: the first test rejects most lines.
        elif b"request" in raw and is_request(raw):
            seg.req += 1
            if b"] Received request" in raw:
                seg.rcv += 1
                head = prompt_head(raw)
                if head is not None:
                    k = head_key(head)
                    heads[k] = heads.get(k, 0) + 1
                if kept_rcv < keep:
                    kept_rcv += 1
                    rows.append((ROW_RECEIVED, i, a, z, 0))
        elif b"INFO:" in raw and (m := is_access(raw)) is not None and not (unsure and unsure(raw, m.start(), m.end())):
            seg.acc += 1
            code = int(m.group("status"))
            status[code] = status.get(code, 0) + 1
            if (500 <= code < 600 or code == 429) and kept.get(code, 0) < keep:
                kept[code] = kept.get(code, 0) + 1
                rows.append((ROW_HTTP, i, a, z, code))
            if m.group("path").startswith(PROBE_BYTES):
                seg.probe += 1
                if kept_probe < keep:
                    kept_probe += 1
                    rows.append((ROW_PROBE, i, a, z, code))
            elif code in (503, 429):
                seg.refused += 1        # the admission limit; a probe answered 503 is not
        elif kw(raw):
            rows.append((ROW_KEYWORD, i, a, z, 0))
        a = z + 1
    seg.status = sorted(status.items())
    seg.head_counts = heads
    return seg


def _flags(block: bytes, lines: int) -> bytes | None:
    """Which lines hold a keyword, from the C reader where it is built (the same keywords, byte
    for byte); None without it: the regex then, a line at a time."""
    from . import bulk
    if not bulk.USE_NATIVE or lines == 0:
        return None
    from . import native
    lib = native.load()
    return native.keyword_flags(lib, block, lines) if lib is not None else None


def _readable(block: bytes, piece: int = 1 << 14) -> bool:
    """Whether a block is UTF-8 text. A block is ASCII but for a few lines (a prompt in another
    script): only the pieces with a non-ASCII byte are decoded, each ending at a newline (UTF-8
    can be checked piece by piece where each piece ends with an ASCII byte), as decoding a whole
    non-ASCII block costs ten times more than checking it is ASCII."""
    if block.isascii():
        return True
    find, n, a = block.find, len(block), 0
    while a < n:
        z = find(b"\n", min(n - 1, a + piece)) + 1 or n
        part = block[a:z]
        if not part.isascii():
            try:
                part.decode("utf-8")
            except UnicodeDecodeError:
                return False
        a = z
    return True


def _bad_lines(block: bytes, base: int) -> set[int] | None:
    """Absolute line numbers that are not readable text; None when all are fine."""
    nul = b"\x00" in block
    if not nul and _readable(block):
        return None
    bad: set[int] = set()
    for i, raw in enumerate(block.split(b"\n")[:-1], base + 1):
        if b"\x00" in raw:
            bad.add(i)
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            bad.add(i)
    return bad or None
