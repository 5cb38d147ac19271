"""Hard-wrapped pastes: a terminal, `fold` or a paste box that broke every long line at one width.

They are re-joined before the scanner sees them, so a `non-default args: {…}` dict or an engine
config dump is read whole (a wrapped TP-2 run read as TP 1 with the default memory fraction).
Line numbers hold: the joined line keeps its first physical line's number, and each line taken
into it leaves an empty line behind.

A wrap shows as a spike: many lines exactly W characters long (ANSI colour codes not counted, or
counted, whichever the wrapper did), none longer, and few of W-1 or W+1. A line of width W is
joined with the next unless that one starts a new record (a timestamp, a level, a process prefix).
"""
from __future__ import annotations

import re
from collections import Counter
from ...lazyre import lazy

MIN_WIDTH = 60          # narrower "wraps" are tables and banners
MIN_WRAPPED = 3
ANSI = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]")
# How a log record begins, in every engine's formats (after any colour code).
RECORD_START = lazy(
    rb"^(?:\x1b\[[0-9;]*m)*\s*(?:"
    rb"\(\w+(?: \w+)* pid=\d+"                       # vLLM V1 process prefix: (APIServer pid=1)
    rb"|\[?\d{4}-\d\d-\d\d[ T]\d"                     # ISO dates: SGLang, TRT-LLM, collectors
    rb"|(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\b"
    rb"|\d\d-\d\d \d\d:\d\d"                          # vLLM's MM-DD HH:MM
    rb"|\[(?:TRT|RANK|TensorRT|\d+,\d+\]|I\]|W\]|E\])"
    rb"|[A-Z][a-z]{2} +\d\d? \d\d:\d\d"                # syslog / journald
    rb"|Traceback |\w+(?:\.\w+)*(?:Error|Exception):"
    # a capture's rows and headers (`nvidia-smi dmon`: fixed-width, as wide as each other)
    rb"|#\s*(?:Date|Time|gpu|Idx|YYYYMMDD|HH:MM:SS)\b|(?:[\d.:-]+[ \t]+){3,}[\d.:-]+[ \t]*\r?$"
    rb")")


def _lengths(lines: list[bytes], visible: bool, data: bytes | None = None) -> list[int]:
    # What a terminal shows: after the last carriage return (tqdm redraws a line with them).
    # Characters, not bytes: but an ASCII line's bytes are its characters (most lines: no decode).
    # `data`: the lines' text joined, when at hand: what none of them holds is not looked for line by
    # line (most logs: no CR, no colour, all ASCII; then the lengths come at C speed).
    if data is None or b"\r" in data:
        lines = [x[x.rfind(b"\r", 0, len(x) - 1) + 1:].rstrip(b"\r") if b"\r" in x else x for x in lines]
    if visible and (data is None or b"\x1b" in data):
        lines = [ANSI.sub(b"", x) if b"\x1b" in x else x for x in lines]
    if data is not None and data.isascii():
        return list(map(len, lines))
    return [len(x) if x.isascii() else len(x.decode("utf-8", "replace")) for x in lines]


def wrap_width(lines: list[bytes], data: bytes | None = None) -> tuple[int, bool] | None:
    """(W, whether colour codes were left out of the count) when the lines look hard-wrapped: the
    commonest long length stands far above its neighbours, and (but for a stray line a wrapper
    passed over) nothing is longer. Of the two ways to count, the one more lines fill exactly.
    `data`: the lines joined by newlines, when the caller has it (a shortcut, same answer)."""
    best = None
    filled = len(lines) - sum(map(bytes.isspace, lines)) - lines.count(b"")     # lines with a non-blank
    # without colour codes both ways of counting are one
    colour = b"\x1b" in data if data is not None else any(b"\x1b" in x for x in lines)
    for visible in ((True, False) if colour else (True,)):
        count = Counter(filter(MIN_WIDTH.__le__, _lengths(lines, visible, data)))
        if not count:
            continue
        width, at = max(count.items(), key=lambda kv: (kv[1], kv[0]))
        if at >= 0.9 * filled:
            continue        # (nearly) every line as wide: a fixed-width table (`nvidia-smi dmon`), not a wrap
        longer = sum(c for n, c in count.items() if n > width)
        if at >= MIN_WRAPPED and at >= 5 * (count[width - 1] + count[width + 1] + 1) and longer <= max(2, at // 20):
            if best is None or at > best[2]:
                best = (width, visible, at)
    return best[:2] if best else None


_SHAPE = bytes.maketrans(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                         b"9" * 10 + b"a" * 26 + b"A" * 26)


def _shape(line: bytes) -> bytes:
    """How a line begins, digits and letters generalised: records of one format share it."""
    return ANSI.sub(b"", line)[:12].translate(_SHAPE)


def unwrap(data: bytes) -> tuple[bytes, int]:
    """(the data with wrapped lines re-joined, how many joins). Unchanged when not hard-wrapped."""
    lines = data.split(b"\n")
    tail = lines.pop() if lines and lines[-1] == b"" else None
    found = wrap_width(lines, data)
    if not found:
        return data, 0
    width, visible = found
    lens = _lengths(lines, visible, data)
    out: list[bytes] = []
    joins = i = 0
    while i < len(lines):
        cur, n, j = lines[i], lens[i], i + 1
        taken = 0
        # A full-width line goes on in the next one, unless that one starts a record: a known
        # record start, or one shaped like this record's own (fixed-format lines that happen to
        # be the longest: glog, NCCL, SGLang's short prefix).
        head = _shape(cur)
        while (n == width and j < len(lines) and lines[j] and not RECORD_START.match(lines[j])
               and _shape(lines[j]) != head):
            cur = (cur[:-1] if cur.endswith(b"\r") else cur) + lines[j]
            n = lens[j]
            j += 1
            taken += 1
        out.append(cur)
        out.extend([b""] * taken)         # line numbers hold
        joins += taken
        i = j
    text = b"\n".join(out)
    return (text + b"\n" if tail is not None else text), joins
