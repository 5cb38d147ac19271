"""The Python log reader: it decides which lines matter; the per-format parsers decide what they
mean. The C reader (native/) does the same work faster where it was built at install; both hand
their segments to one consumer (segments.read), and tests hold them to the same evidence.

A block of whole lines is split once, and each line classified as scan.c classifies it: not
readable text (invalid UTF-8, NUL bytes: counted, never parsed), and, on a big log (`tally`), an
engine request line or a uvicorn access line (counted: engines.common.REQUEST_SHAPE/ACCESS_SHAPE),
else a line holding one of the keywords (for the parsers). A small log is read whole and every
keyword line goes to the parsers, access and request lines included: the reference the tallies
are checked against.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ...evidence.model import EVENT_KEEP
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

_KW = re.compile(b"|".join(re.escape(k.encode()) for k in GREP_KEYWORDS))
PROBE_BYTES = tuple(p.encode() for p in PROBE_PATHS)
_ODD = re.compile(rb"[\x00-\x08\x0e-\x1f\x80-\xff]")


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
    """One block of whole lines (it ends with a newline), classified line by line."""
    seg = Segment(block, None, 0, len(block))
    lines = block.split(b"\n")
    lines.pop()
    seg.lines = len(lines)
    bad = _bad_lines(block, 0)
    if bad:
        seg.bad = len(bad)
        seg.bad_lines = bad
    rows = seg.rows
    kw = keywords.search
    a = 0           # where the line at hand starts in the block
    if not tally:
        flags = _flags(block, len(lines)) if keywords is _KW else None
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


def _bad_lines(block: bytes, base: int) -> set[int] | None:
    """Absolute line numbers that are not readable text; None when all are fine."""
    nul = b"\x00" in block
    if not nul:
        if block.isascii():         # most blocks: ten times faster than decoding
            return None
        try:
            block.decode("utf-8")
            return None
        except UnicodeDecodeError:
            pass
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
