"""The scanner decides which lines matter; the per-format parsers decide what they mean.

It works on large binary blocks: one multi-keyword regex pass over each block finds the
candidate lines, so the vast majority of lines (access and request noise excepted) are
never touched from Python. The performance work can replace `scan()`'s inner loop without
touching any parser, as long as it yields the same (line number, text) pairs.
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .engines import ENGINES

# Every line a parser understands contains at least one of these: the words of lines every engine
# writes (NCCL, CUDA, uvicorn, Ray, crashes, shutdowns), then each engine's own (engines/<name>/).
# Keep them plain strings: bench/ greps with the same list to compare speed, and the C scanner
# gets it as it is.
SHARED_KEYWORDS = [
    "throughput", "version", "KV cache", "KV Cache", "blocks:", "took", "takes",
    "total_gpu_memory", "CUDA graph", "cudagraph", "eager",
    "allreduce", "NCCL", "Ray", "preempted", "Error", "error", "out of memory", "Out of memory", "Cuda graph is disabled", "OutOfMemory", "could not be allocated", "ALLOC_FAILED",
    "died", "timed out", "Traceback", "Exception", "Interrupt", "SystemExit", "failed to start",
    "SIGTERM", "SIGINT", "placement group", "█  model", "(UUID: GPU-", "CUDA capability", "  NVIDIA ", "signal", "Shutting down", "Terminated", "Aborted", "Stopping", "HTTP/", "request",
    "startup complete",
    "max model len", "max_num_batched_tokens", "context length", "max_seq_len", "maximum model length", "detected platform",
    "capacity of", "Speculative metrics", "Uvicorn running", "--", "reserved number of GPUs",
    # DCGM exporter's own log
    "DCP metrics", "metric not enabled",
]
GREP_KEYWORDS = SHARED_KEYWORDS + [k for e in ENGINES.values() for k in e.keywords if k not in SHARED_KEYWORDS]

_KW = re.compile(b"|".join(re.escape(k.encode()) for k in GREP_KEYWORDS))


@dataclass
class ScanCounts:
    lines: int = 0
    unreadable: int = 0
    binary_head: bool = False   # NUL bytes in the first block: likely not a text log


def scan(blocks: Iterable[bytes], counts: ScanCounts, keywords: re.Pattern[bytes] = _KW,
         follow=None) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, decoded text) for candidate lines; count every line.

    `follow()`, when given and true, asks for the next line whatever it holds: a parser in the
    middle of a dump that a paste wrapped over several lines."""
    base = 0  # lines before the current run
    blocks = iter(blocks)
    for chunk in blocks:
        counts.binary_head = b"\x00" in chunk[:8192]
        blocks = itertools.chain([chunk], blocks)
        break
    for buf, start, end in line_runs(blocks):
        block = buf[start:end] if start or end != len(buf) else buf
        yield from _scan_block(block, base, counts, keywords, follow)
        n = block.count(b"\n")
        base += n
        counts.lines += n


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


def _scan_block(block: bytes, base: int, counts: ScanCounts, keywords, follow=None) -> Iterator[tuple[int, str]]:
    # Unreadable lines (invalid UTF-8, NUL bytes) are counted, never silently dropped.
    bad = _bad_lines(block, base)
    if bad:
        counts.unreadable += len(bad)
    pos = 0
    done = base  # absolute number of lines that end before `pos`
    search = keywords.search
    size = len(block)
    while pos < size:
        if follow is not None and follow():
            end = block.find(b"\n", pos)
            ln = done + 1
            line = block[pos:end]
            pos, done = end + 1, ln
            if not (bad and ln in bad):
                yield ln, line.decode("utf-8", "replace")
            continue
        m = search(block, pos)
        if m is None:
            return
        start = block.rfind(b"\n", 0, m.start()) + 1
        end = block.find(b"\n", m.end())   # the block always ends with a newline
        ln = done + block.count(b"\n", pos, start) + 1
        pos, done = end + 1, ln
        if bad and ln in bad:
            continue
        yield ln, block[start:end].decode("utf-8", "replace")


def _bad_lines(block: bytes, base: int) -> set[int] | None:
    """Absolute line numbers that are not readable text; None when all are fine."""
    nul = b"\x00" in block
    if not nul:
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
