"""The bulk scanner's C core (scan.c), built into libscan.so when the package is built (build.py,
run by hatch_build.py at `pip install`) and loaded with ctypes.

Why C: the Python reader classifies a gigabyte log in ~8 s, twenty times `grep -cE`; one
pass in C that splits, validates and classifies lines takes ~0.2 s per GB on one core (AVX2 and
carry-less multiplication where the CPU has them, chosen at run time; `DIAGNOSE_NO_AVX2=1` keeps
the portable code), and ctypes releases the GIL so every core scans. A plain file is read by C
itself (`scan_range`: pread into a per-thread buffer), so a whole range passes without Python, and
the scan runs while Python imports and parses. Why ctypes rather than the CPython API: the
interface is five functions over flat buffers, called from worker threads without the GIL; the
two structures it shares are checked against the library's own layout when it loads (dg_layout),
so a mismatch is refused, never a corrupted scan.

Nothing is compiled or written at run time. The library is used when it sits beside this file
and, where scan.c is beside it too (a checkout), was built from that very scan.c (dg_source_key):
an edited scan.c asks for `python -m diagnose.sources.readers.native --build`, never runs old code.

When the library cannot be had (installed where no C compiler was, `DIAGNOSE_NATIVE=0`), big
inputs are read by the Python reader (scanner.segments): same results, about six times slower. An operator wants to know
that once, not per file, and not in a report's output or a CI log that compares stderr:
`note_fallback()` writes one line on stderr, at most once per run, naming why and how to fix or
silence it, when a big input (at least the default DIAGNOSE_BULK_MIN_BYTES, where the speed
matters) takes the slower path or when stderr is a terminal. `DIAGNOSE_NATIVE=0` chooses the
Python reader on purpose: no note. The fast path says nothing.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading

from .build import LIBRARY, SOURCE, source_key
from ..segments import MAX_LINE, NO_LINE_END, ROW_WIDTH, STATS_WIDTH, FlatRows, Segment
NSTATUS = 1000
ROWS_CAP = 4096         # rows per call; a full buffer makes the call return early, never grow
HEADS_CAP = 1 << 15


class Totals(ctypes.Structure):
    _fields_ = [*((n, ctypes.c_int64) for n in ("lines", "bad", "acc", "req", "rcv", "probe")),
                ("status", ctypes.c_int64 * NSTATUS), ("kept", ctypes.c_int64 * NSTATUS),
                ("kept_probe", ctypes.c_int64), ("kept_rcv", ctypes.c_int64), ("refused", ctypes.c_int64),
                ("stats", ctypes.c_int64)]


class HeadsTable(ctypes.Structure):
    _fields_ = [("cap", ctypes.c_int64), ("n", ctypes.c_int64), ("overflow", ctypes.c_int64),
                ("mask", ctypes.c_int64), ("slots", ctypes.c_void_p), ("order", ctypes.c_void_p)]


class Heads:
    """The bounded table of prompt heads, in C: segments are added in line order; `into()` leaves
    in `seen` (ev.prompt_prefixes) what engines.common.note_prompt would have, and returns the
    overflow count. Starts from what `seen` already holds (an earlier input)."""

    def __init__(self, lib, cap: int, seen: dict):
        cap = max(cap, 1)
        size = 1 << max(4, (2 * cap - 1).bit_length())
        self.lib = lib
        self._slots = (ctypes.c_int64 * (2 * size))()
        self._order = (ctypes.c_int64 * cap)()
        self.t = HeadsTable(cap, 0, 0, size - 1, ctypes.addressof(self._slots), ctypes.addressof(self._order))
        if seen:
            n = len(seen)
            self.add(bytes((ctypes.c_uint64 * n)(*seen.keys())), bytes((ctypes.c_int64 * n)(*seen.values())), n)

    def add(self, keys: bytes, counts: bytes, n: int) -> None:
        self.lib.dg_heads_add(ctypes.byref(self.t), keys, counts, n)

    def into(self, seen: dict) -> int:
        n = self.t.n
        keys, counts = (ctypes.c_uint64 * n)(), (ctypes.c_int64 * n)()
        self.lib.dg_heads_get(ctypes.byref(self.t), keys, counts)
        seen.clear()
        seen.update(zip(keys, counts))
        return self.t.overflow


_lock = threading.Lock()
_state: dict = {}
why_not: str | None = None      # why load() returned None, for `python -m diagnose.sources.readers.native`
_noted = False                  # note_fallback() has spoken in this run


def _disabled() -> bool:
    return os.environ.get("DIAGNOSE_NATIVE", "1").strip().lower() in ("0", "no", "off", "false")


class Unusable(Exception):
    """The library is there but must not be used: one line that says why and what to do."""


def load():
    """The loaded library, set up with the scanner's keyword list; None when it cannot be had."""
    global why_not
    with _lock:
        if "lib" in _state:
            return _state["lib"]
        lib = None
        if _disabled():
            why_not = "disabled by DIAGNOSE_NATIVE=0"
        elif not LIBRARY.exists():
            why_not = ("not built when diagnose was installed (no C compiler then): install gcc or clang, "
                       "then reinstall diagnose")
        else:
            try:
                lib = _open()
            except Unusable as e:
                why_not = str(e)
            except (OSError, ValueError) as e:
                why_not = f"cannot load {LIBRARY} ({e}): reinstall diagnose"
        _state["lib"] = lib
        return lib


def note_fallback(big: bool) -> None:
    """One line on stderr, once per run, when big inputs are read in Python because the library
    cannot be had (see the module's doc): `big` when the input is big enough for the speed to
    matter; otherwise only a terminal is told."""
    global _noted
    if _noted or why_not is None or _disabled():
        return
    if not big:
        try:
            if not sys.stderr.isatty():
                return
        except (AttributeError, ValueError):
            return
    _noted = True
    sys.stderr.write(f"diagnose: note: big inputs are read by the Python reader, about 6x slower than C: {why_not} "
                     f"(DIAGNOSE_NATIVE=0 chooses it and silences this)\n")


def _open():
    from ...engines.common import PROBE_PATHS
    from ..scanner import GREP_KEYWORDS
    lib = ctypes.CDLL(str(LIBRARY))
    i64, p = ctypes.c_int64, ctypes.c_char_p
    _check(lib)
    lib.dg_setup.argtypes = [p, i64, p, i64]
    lib.dg_setup.restype = ctypes.c_int
    lib.dg_scan.argtypes = [p, i64, i64, ctypes.POINTER(Totals), i64,
                            ctypes.POINTER(i64), i64, ctypes.POINTER(i64),
                            ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(i64), i64, ctypes.POINTER(i64),
                            ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_double), ctypes.POINTER(i64),
                            p, i64, ctypes.POINTER(i64)]
    lib.dg_scan.restype = i64
    lib.dg_line_start.argtypes = [ctypes.c_int, i64, p, i64, i64, ctypes.POINTER(ctypes.c_int)]
    lib.dg_line_start.restype = i64
    lib.dg_scan_fd.argtypes = [ctypes.c_int, i64, i64, i64, p, i64, ctypes.POINTER(ctypes.c_int),
                               *lib.dg_scan.argtypes[3:]]
    lib.dg_scan_fd.restype = i64
    lib.dg_stats_line.argtypes = [p, p, ctypes.POINTER(ctypes.c_double)]
    lib.dg_stats_line.restype = ctypes.c_int
    lib.dg_keyword_flags.argtypes = [p, i64, ctypes.c_char_p, i64]
    lib.dg_keyword_flags.restype = i64
    lib.dg_heads_add.argtypes = [ctypes.POINTER(HeadsTable), p, p, i64]
    lib.dg_heads_add.restype = None
    lib.dg_heads_get.argtypes = [ctypes.POINTER(HeadsTable), ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(i64)]
    lib.dg_heads_get.restype = None
    kws = b"\0".join(k.encode() for k in GREP_KEYWORDS) + b"\0"
    probes = b"\0".join(p.encode() for p in PROBE_PATHS) + b"\0"
    if lib.dg_setup(kws, len(kws), probes, len(probes)) != 0:
        raise ValueError("keyword list does not fit the C scanner")
    return lib


# What dg_layout reports, in its order: the structures as Python mirrors them.
LAYOUT = (NSTATUS, ROW_WIDTH, STATS_WIDTH, ctypes.sizeof(Totals), Totals.status.offset, Totals.kept_probe.offset,
          Totals.refused.offset, ctypes.sizeof(HeadsTable), HeadsTable.slots.offset, HeadsTable.order.offset, 16)


def _check(lib) -> None:
    lib.dg_source_key.argtypes = []
    lib.dg_source_key.restype = ctypes.c_char_p
    built_from = lib.dg_source_key().decode()
    if SOURCE.exists() and built_from != source_key(SOURCE.read_bytes()):
        raise Unusable(f"{LIBRARY.name} was built from another scan.c: build it again with "
                       f"`python -m diagnose.sources.readers.native --build` (or reinstall diagnose)")
    lib.dg_layout.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]
    lib.dg_layout.restype = ctypes.c_int64
    out = (ctypes.c_int64 * len(LAYOUT))()
    n = lib.dg_layout(out, len(LAYOUT))
    if n != len(LAYOUT) or tuple(out) != LAYOUT:
        raise Unusable(f"{LIBRARY.name} does not match this diagnose (its structures differ): reinstall diagnose")


_buffers = threading.local()
HEAD_SLOTS = 1 << 16
# The stats lines C read in a file range copied out as it is scanned (scan.c: keep_text), up to this
# many bytes per segment (the parsers' thread then slices them, where a pread each took a fifth of a
# stats line's time); the lines past it, and other rows' lines, are read again from the file. A 32 MB
# range of a stats-heavy log holds ~0.6 MB of them. Copies of every row's line (a log of start-up
# lines only fills any size) raised the peak of 9,800 launches in one file by ~30 MB.
TEXT_BYTES = 1 << 20
# A file range is read through one buffer of this size per thread, small enough that what pread
# copied in is still in the core's cache when the scan reads it (1 GB: ~8 % less scan CPU than a
# 4 MB buffer). A longer line gets a bigger buffer for the rest of its range, up to MAX_LINE,
# where every reader cuts a line (segments.MAX_LINE).
READ_BYTES = 1 << 20


def _scratch():
    b = getattr(_buffers, "b", None)
    if b is None:
        b = _buffers.b = ((ctypes.c_int64 * (ROW_WIDTH * ROWS_CAP))(), (ctypes.c_uint64 * HEADS_CAP)(),
                          (ctypes.c_int64 * HEADS_CAP)(), (ctypes.c_int32 * HEAD_SLOTS)(),
                          (ctypes.c_double * (STATS_WIDTH * ROWS_CAP))(), ctypes.create_string_buffer(TEXT_BYTES))
    return b


def _collect(t, rows_buf, nr, keys, counts, nh, rows, heads, stats_buf=None, ns=None) -> None:
    if nr.value:
        rows.add(ctypes.string_at(rows_buf, 8 * ROW_WIDTH * nr.value))
    if ns is not None and ns.value:
        rows.stats.frombytes(ctypes.string_at(stats_buf, 8 * STATS_WIDTH * ns.value))
    if nh.value:
        heads.append((ctypes.string_at(keys, 8 * nh.value), ctypes.string_at(counts, 8 * nh.value), nh.value))


def _segment(buf, fd, start, end, t, rows, heads, blob=None) -> Segment:
    seg = Segment(buf, fd, start, end)
    seg.blob = blob
    seg.lines, seg.bad, seg.acc, seg.req, seg.rcv, seg.probe = t.lines, t.bad, t.acc, t.req, t.rcv, t.probe
    seg.refused = t.refused
    seg.status = [(code, n) for code, n in enumerate(t.status) if n] if t.acc else []
    seg.rows = rows
    seg.heads = heads
    return seg


def keyword_flags(lib, block: bytes, lines: int) -> bytes | None:
    """One byte per line of `block` (whole lines), 1 where it holds a keyword; None if C saw
    another number of lines than the caller (then the caller asks Python)."""
    out = ctypes.create_string_buffer(max(1, lines))
    n = lib.dg_keyword_flags(block, len(block), out, lines)
    return out.raw[:lines] if n == lines else None


def scan(lib, buf: bytes, start: int, end: int, keep: int) -> Segment:
    """Scan whole lines buf[start:end] (called from worker threads: the C call runs without the GIL)."""
    rows_buf, keys, counts, slots, stats_buf, _ = _scratch()
    t = Totals()
    nr, nh, ns, nt = ctypes.c_int64(0), ctypes.c_int64(0), ctypes.c_int64(0), ctypes.c_int64(0)
    rows = FlatRows()
    heads: list = []
    pos = start
    while pos < end:
        nr.value = nh.value = ns.value = 0
        # the block stays in memory with the segment: no copy of the rows' lines
        pos = lib.dg_scan(buf, end, pos, ctypes.byref(t), keep, rows_buf, ROWS_CAP, ctypes.byref(nr),
                          keys, counts, HEADS_CAP, ctypes.byref(nh), slots, stats_buf, ctypes.byref(ns), None, 0,
                          ctypes.byref(nt))
        _collect(t, rows_buf, nr, keys, counts, nh, rows, heads, stats_buf, ns)
    return _segment(buf, None, start, end, t, rows, heads)


def scan_range(lib, fd: int, a: int, b: int, size: int, keep: int, text_fd: int, display: str = "input") -> list[Segment]:
    """Scan the lines of a file that start in bytes [a, b) (`size`: the file's size when the run
    began). C reads the file itself: the whole range runs without the GIL. Segments in line order:
    one, or more where a line too long for the buffer was cut (a segment of its own, held in
    memory; the rest of the line is skipped). Raises OSError; InputError when the file's first
    line has no end in NO_LINE_END bytes."""
    rows_buf, keys, counts, slots, stats_buf, text = _scratch()
    read = getattr(_buffers, "read", None)
    if read is None:
        read = _buffers.read = ctypes.create_string_buffer(READ_BYTES)
    err = ctypes.c_int(0)
    start = lib.dg_line_start(fd, a, read, len(read), size, ctypes.byref(err))
    if start < 0:
        raise OSError(err.value, os.strerror(err.value))
    out: list[Segment] = []
    t = Totals()
    nr, nh, ns, nt = ctypes.c_int64(0), ctypes.c_int64(0), ctypes.c_int64(0), ctypes.c_int64(0)
    rows = FlatRows()
    heads: list = []
    pos = start
    while pos < b and pos < size:
        nr.value = nh.value = ns.value = 0
        nxt = lib.dg_scan_fd(fd, pos, b, size, read, len(read), ctypes.byref(err), ctypes.byref(t), keep,
                             rows_buf, ROWS_CAP, ctypes.byref(nr), keys, counts, HEADS_CAP, ctypes.byref(nh), slots,
                             stats_buf, ctypes.byref(ns), text, min(TEXT_BYTES, len(text)), ctypes.byref(nt))
        if nxt == -1:
            raise OSError(err.value, os.strerror(err.value))
        if nxt == -2 and len(read) < MAX_LINE:     # a buffer made smaller (tests): a bigger one
            read = _buffers.read = ctypes.create_string_buffer(min(2 * len(read), MAX_LINE))
            continue
        if nxt == -2:       # no newline in the line's first MAX_LINE bytes: cut there
            if pos > start:
                out.append(_segment(None, text_fd, start, pos, t, rows, heads, _blob(text, nt)))
                t, rows, heads = Totals(), FlatRows(), []
            after = lib.dg_line_start(fd, pos + MAX_LINE, read, len(read), size, ctypes.byref(err))
            if after < 0:
                raise OSError(err.value, os.strerror(err.value))
            if pos == 0 and after - 1 >= NO_LINE_END:
                from ..files import InputError
                raise InputError(f"{display}: no line end in its first {NO_LINE_END >> 20} MiB: not a text log (not read further)")
            head = os.pread(fd, MAX_LINE, pos) + b"\n"
            seg = scan(lib, head, 0, len(head), keep)
            seg.cut = 1
            out.append(seg)
            start = pos = after
            continue
        _collect(t, rows_buf, nr, keys, counts, nh, rows, heads, stats_buf, ns)
        pos = nxt
    if len(read) != READ_BYTES:     # grown or shrunk from the usual: the next range gets its own
        del _buffers.read
    if pos > start or not out:
        out.append(_segment(None, text_fd, start, max(start, min(pos, size)), t, rows, heads, _blob(text, nt)))
    return out


def _blob(text, nt) -> bytes:
    """The rows' lines copied so far (for one segment); the buffer starts empty for the next."""
    blob = ctypes.string_at(text, nt.value)
    nt.value = 0
    return blob
