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
from .segments import ROW_HTTP, ROW_KEYWORD, ROW_PROBE, ROW_RECEIVED, Segment

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
    "CANCELLED", "exit code", "exit status", "xited with", "Return code",
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
    binary_head: bool = False   # NUL bytes in the first block: likely not a text log


def segments(blocks: Iterable[bytes], keep: int = EVENT_KEEP, tally: bool = True,
             keywords: re.Pattern[bytes] = _KW) -> Iterator[Segment]:
    """The Python reader: a Segment per run of whole lines of `blocks`. `keep`: evidence rows kept
    per kind and segment; `tally`: count access and request lines instead of handing them on."""
    for buf, start, end in line_runs(blocks):
        block = buf[start:end] if start or end != len(buf) else buf
        yield _segment(block, keep, tally, keywords)


def line_runs(blocks):
    """The one block-to-lines cutter of every reader: (buffer, start, end), runs of whole lines,
    without copying the blocks. The line a block's end cuts is joined into a small buffer of its
    own; a last line without newline gets one; empty blocks are no lines."""
    tail: list[bytes] = []
    for b in blocks:
        if not b:
            continue        # an empty block (a decoder's last) is no line
        i = b.find(b"\n")
        if i < 0:
            tail.append(b)
            continue
        begin = 0
        if tail:
            head = b"".join(tail) + b[: i + 1]
            tail = []
            yield head, 0, len(head)
            begin = i + 1
        j = b.rfind(b"\n")
        if j + 1 > begin:
            yield b, begin, j + 1
        if j + 1 < len(b):
            tail.append(b[j + 1:])
    if tail:
        last = b"".join(tail) + b"\n"
        yield last, 0, len(last)


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
        for i, raw in enumerate(lines):
            z = a + len(raw)
            if kw(raw) and not (bad and i + 1 in bad):
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
