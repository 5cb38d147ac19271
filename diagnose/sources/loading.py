"""Reading inputs into Evidence. A log goes through a reader (scanner.py in Python, or the C one,
native/, for big logs) in segments (segments.py), then line by line through the prefix peeler
(lineprefix.py), the shared-line parser (common_lines.py) and the engine parsers
(engines/<name>/lines.py); scrapes, GPU samples, structured records and benchmark results go to
their own loaders, chosen by sniff.py."""
from __future__ import annotations

import itertools
import os
import stat

from ..evidence.finish import finish
from ..evidence.model import Evidence, InputInfo
from .formats.bench_files import load_bench, sniff_bench
from .engines.common import feed_common, finish_lifecycle
from .engines import ENGINES
from .formats.gpu import load_gpu, sniff_gpu
from .readers.lineprefix import Clock, peel
from .readers.progress import advancer, counted, progress_bar
from .prometheus import load_exposition, load_query_range, sniff_prometheus
from .readers.files import Input, InputError, read_ahead
from .readers.scanner import ScanCounts, segments
from .readers.segments import read
from .sniff import SNIFF_BYTES, endless_binary, is_log, sniff_head
from .formats.structured import load_structured, sniff
from .readers.unreadable import blank_unreadable, note_unreadable
from .readers.unwrap import unwrap

# What converting a damaged value raises: float("1..2"), int(float("inf")), int("9" * 5000).
LINE_ERRORS = (ValueError, ArithmeticError)
# A silence this long, ended by a stop (SIGTERM, a scheduler's cancel): a start-up that stalled
# (an NCCL rendezvous, a placement group) when the server never said it was ready.
QUIET_S = 600


def load(inputs: list[Input], year: int | None = None, gpu_start=None, gpu_interval: float = 1.0) -> Evidence:
    ev = Evidence()
    for inp in inputs:
        ev.inputs.append(load_one(inp, ev, year))
    finish(ev, gpu_start, gpu_interval)
    return ev


def big_logs(inputs: list[Input]):
    """The inputs the C scanner would read as plain files, with the path it reads each from, in
    order: big regular-file logs, stdin redirected from one (not read yet) included."""
    from .readers import bulk
    for inp in inputs:
        path = inp.path
        if path == "-":
            try:
                if os.lseek(0, 0, os.SEEK_CUR) != 0:
                    continue
            except OSError:
                continue
            path = bulk.STDIN_PATH
        try:
            st = os.stat(path)
            # Only a big regular file is opened here: a FIFO would lose what this read takes.
            if not stat.S_ISREG(st.st_mode) or st.st_size < bulk.FAST_MIN_BYTES:
                continue
            first = bulk.read_head(path, SNIFF_BYTES)
        except OSError:
            continue        # load_one says what is wrong with it
        if bulk.usable(path, first) and is_log(first):
            yield inp, path


def start_scans(inputs: list[Input]) -> int:
    """Start the C scanner on the first big plain-file log among `inputs` now: it reads it on the
    other cores while the caller sets up the rest (the rules); load_one takes over what it started.
    One only: it covers the set-up, and each scan holds a thread and a read buffer per core (a
    directory of a hundred big logs started at once would hold them all). Returns how many started."""
    from .readers import bulk
    for inp, path in big_logs(inputs):
        lib = bulk.native_lib()
        if lib is None:
            return 0
        from .readers.native import stream
        try:
            inp.started = stream.Producer(lib, path=path, display=inp.display)
        except InputError:
            continue
        return 1
    return 0


def load_one(inp: Input, ev: Evidence, year: int | None, sniffing: bool = False) -> InputInfo:
    started, inp.started = getattr(inp, "started", None), None
    try:
        return _read_one(inp, ev, year, sniffing, started)
    finally:
        if started is not None:
            started.close()     # done with; or started ahead for a file now read another way


def _read_one(inp: Input, ev: Evidence, year: int | None, sniffing: bool, started) -> InputInfo:
    blocks = inp.blocks()
    first = next(blocks, b"")
    if endless_binary(inp, first):
        blocks.close()
        raise InputError(f"{inp.display}: binary data from a device or stream, not a text log (not read further)")
    head = sniff_head(first)
    prom_kind = sniff_prometheus(head) if first else None
    if prom_kind:
        data, bad = blank_unreadable(first + b"".join(blocks))
        text = data.decode("utf-8", "replace")
        info = (load_query_range if prom_kind == "query_range" else load_exposition)(text, inp.display, ev)
        if "DCGM_FI_" in text:     # node and engine metrics scraped together
            from .formats.gpu import _dcgm
            _dcgm(text.splitlines(), inp.display, ev, info)
        return note_unreadable(info, bad)
    gpu_kind = sniff_gpu(head) if first else None
    if gpu_kind:
        data, bad = blank_unreadable(first + b"".join(blocks))
        replay = Input.__new__(Input)
        replay.path, replay.display = inp.path, inp.display
        replay.blocks = lambda: iter([data])
        return note_unreadable(load_gpu(gpu_kind, replay, ev), bad)
    bench_kind = sniff_bench(head) if first else None
    if bench_kind:
        replay = Input.__new__(Input)
        replay.path, replay.display = inp.path, inp.display
        replay.blocks = lambda: chain(first, blocks)
        return load_bench(bench_kind, replay, ev)
    kind = sniff(head) if first else None
    if kind:
        replay = Input.__new__(Input)
        replay.path, replay.display = inp.path, inp.display
        replay.blocks = lambda: chain(first, blocks)
        info = load_structured(kind, replay, ev)
        if info.engine:
            ev.set_fact("engine", info.engine, override=False)
        return info
    info = InputInfo(path=inp.display)
    counts = ScanCounts()
    clock = Clock(year)
    parsers = [e.parser() for e in ENGINES.values()]
    engine_lines: dict[str, int] = {}
    recognised = 0

    # The parser of the line's header format first, then the others.
    orders = {fmt: [p] + [q for q in parsers if q is not p]
              for p, e in zip(parsers, ENGINES.values()) for fmt in e.formats}
    # Parsers that can be in the middle of a dump a paste wrapped over several lines.
    followers = [p for p in parsers if hasattr(p, "wants_more")]
    wants = [p.wants_more for p in followers]

    def pending():      # asked once or twice per line: no generator
        for w in wants:
            if w():
                return True
        return False

    from .readers import bulk
    bar = progress_bar(inp) if not sniffing else None
    advance = advancer(bar, inp)
    counts.binary_head = b"\x00" in first[:8192]     # likely not a text log
    src = chain(first, blocks)
    behind = bulk.file_behind(inp)
    if behind and bulk.usable(behind, first) and not sniffing:
        big, lib = True, bulk.native_lib()
    else:
        # gzip and stdin: whether they are big is only known once enough of them has been read.
        src, big = peek_size(src, bulk.FAST_MIN_BYTES // 4)
        big = big and not sniffing and bulk.text_like(first)
        lib = bulk.native_lib() if big else None
        behind = None
    if lib is not None:
        from .readers.native import stream
        if behind:
            blocks.close()          # C reads the file itself, from its start
            segs = started or stream.Producer(lib, path=behind, display=inp.display)
        else:
            segs = stream.Producer(lib, src)
    elif big:
        # Without the C reader: Python, a block at a time (read and decompressed a block ahead).
        segs = segments(read_ahead(src))
    else:
        if bar:
            src = counted(src, advance)
            advance = None
        data, joined = unwrap(b"".join(src))          # small: held whole, every line parsed
        counts.binary_head = b"\x00" in data[:8192]
        if joined:
            info.errors.append(f"hard-wrapped lines re-joined ({joined} continuation line(s) read with the line before)")
        segs = segments([data], tally=False)
    lines_iter = read(segs, inp.display, ev, counts, progress=advance, follow=pending)
    malformed = 0
    last_t = None       # (time, line number, text) of the last line that carried a time
    quiet = None        # the latest silence of QUIET_S or more: (last_t before it, the time it ended)
    for lineno, text in lines_iter:
        # The parsers convert what their regexes matched (`[\d.]+`, dict values) with float()/int();
        # a damaged line (`1..2`, `inf` or 5000 digits where a count belongs, a cut `4.2e+`) makes
        # that raise. Such a line is skipped and counted: one bad line never costs the whole file.
        try:
            if pending():
                for p in followers:
                    if p.wants_more():
                        p.more(text, ev)
                recognised += 1
                continue
            line = peel(inp.display, lineno, text)
            when = clock.at(line)
            if when is not None:
                if last_t is not None and (when - last_t[0]).total_seconds() >= QUIET_S:
                    quiet = (last_t, when)
                last_t = (when, lineno, line.raw)
            if feed_common(line, ev, when):
                recognised += 1
                continue
            for p in orders.get(line.fmt, parsers):
                if p.feed(line, ev, when):
                    recognised += 1
                    engine_lines[p.engine] = engine_lines.get(p.engine, 0) + 1
                    break
        except LINE_ERRORS:
            malformed += 1
    if bar:
        bar.close()
    if quiet is not None:
        _quiet_before_stop(ev, inp.display, quiet, last_t)
    finish_lifecycle(ev, inp.display)
    for p in parsers:
        if hasattr(p, "finish"):
            p.finish(ev)
    if clock.guessed and ev.stats_rows:
        ev.year_guessed[inp.display] = clock.base_year
    recognised += getattr(counts, "bulk_recognised", 0)
    info.lines = counts.lines
    info.unreadable_lines = counts.unreadable
    info.recognised_lines = recognised
    info.unrecognised_lines = counts.lines - recognised - counts.unreadable
    if not sniffing:
        if counts.lines == 0:
            raise InputError(f"{inp.display}: empty file (nothing to diagnose)")
        if recognised == 0 and counts.binary_head:
            raise InputError(f"{inp.display}: binary file, not a text log")
        if recognised == 0 and counts.unreadable * 2 >= counts.lines:
            raise InputError(f"{inp.display}: not UTF-8 text ({counts.unreadable} of {counts.lines} lines unreadable)")
    if counts.unreadable:
        info.errors.append(f"{counts.unreadable} unreadable line(s) (invalid UTF-8 or NUL bytes) skipped")
    if malformed:
        info.errors.append(f"{malformed} line(s) with malformed values skipped")
    if engine_lines:
        info.engine = max(engine_lines, key=engine_lines.get)
        ev.set_fact("engine", info.engine, override=False)
        for p in parsers:
            if p.engine == info.engine:
                info.engine_version = p.version
    return info


def _quiet_before_stop(ev: Evidence, src: str, quiet, last) -> None:
    """A stop that ended a long silence (the log had little more after it): kept as an event with
    the last line before the silence; the signals say whether the server had said it was ready."""
    (t0, n0, raw0), end = quiet
    if (last[0] - end).total_seconds() > 300:
        return              # the log went on after the silence: not what the stop ended
    if ev.counters.get("access_lines") or ev.counters.get("request_lines"):
        return              # it answered requests: it was up (and the big-log readers count request lines unread)
    if any(e.source == src and e.line > n0 for e in ev.events.get("stop_requested", ())):
        ev.add_event("quiet_before_stop", src, n0, raw0, t0, minutes=round((end - t0).total_seconds() / 60))


def peek_size(blocks, limit: int):
    """(the same blocks, whether they hold at least `limit` bytes), reading no more than that."""
    held, size = [], 0
    for b in blocks:
        held.append(b)
        size += len(b)
        if size >= limit:
            return itertools.chain(held, blocks), True
    return iter(held), False


def chain(first: bytes, rest):
    if first:
        yield first
    yield from rest
