"""Reading one input: what it is, and every region of it, into the Evidence of each launch.

Whole-file formats (a JSON or YAML document, a `query_range` answer, a benchmark result file, a
`diagnose gpu --live` file) are recognised from the head and read whole (formats/). Every other
input is text, read line by line, whatever its first lines are: a line goes to the region of a
line format that is open (a `dmon` capture, a scrape, a benchmark's result block), else to the
format whose region it opens, else through the prefix peeler (readers/lineprefix.py) to the lines
every engine writes (engines/common.py) and each engine's parser (engines/<name>/lines.py). A
launch line may begin a new piece (launches.py); what each line was is counted (coverage.py).

The lines come from a reader (readers/): a small input whole, every line; a big one in segments,
by the C reader or the Python one, which hand on only the lines holding a keyword (each engine's,
each format's) and count the rest.
"""
from __future__ import annotations

import gc
import itertools
import os
import re
import stat

from ..evidence.finish import finish
from ..evidence.model import Evidence, InputInfo
from . import formats
from .coverage import Coverage, classify, expected_by
from .engines import ENGINES
from .engines.common import ACCESS_BYTES, REQUEST_BYTES, access, feed_common, plain_access
from .engines.sglang.lines import access_line as sglang_access_line, batch_line as sglang_batch_line
from .engines.vllm.lines import request_line as vllm_request_line, stats_line as vllm_stats_line, values_row
from .formats import json_lines
from .launches import Piece, fold_target, marker
from .readers.files import Input, InputError, read_ahead
from .readers.lineprefix import Clock, Line, peel
from .readers.progress import advancer, counted, progress_bar
from .readers.scanner import ScanCounts, segments
from .readers.segments import MAX_LINE, STATS_TEXT, STATS_WIDTH, StatsRun, read
from .readers.unwrap import unwrap
from .sniff import SNIFF_BYTES, binary_head, endless_binary, sniff_head, whole_kind

# What converting a damaged value raises: float("1..2"), int(float("inf")), int("9" * 5000).
LINE_ERRORS = (ValueError, ArithmeticError)
# The header format a parser's lines carry → the engine (Triton's glog lines are TensorRT-LLM's).
ENGINE_OF_FMT = {fmt: name for name, e in ENGINES.items() for fmt in e.formats}
# Lines of a big log judged by their shape, per segment: every line of a segment up to EXACT_BYTES,
# else windows spread over it, enough to estimate the segment's make-up.
EXACT_BYTES = 1024 * 1024
SAMPLE_WINDOWS = 8
SAMPLE_BYTES = 8 * 1024


# Launches of one input kept as pieces of their own. Past this many, each launch that ends joins
# the earlier one of the same server (same engine, compatible settings) it would be grouped with:
# memory and time stay per line, not per launch, in a restart loop of thousands.
FOLD_AFTER = 32
COLLECT_EVERY = 32     # folds between two runs of the cycle collector (see _State.new_launch)


class Read:
    """What one input gave: its description (InputInfo, with its coverage) and its pieces."""
    __slots__ = ("info", "pieces")

    def __init__(self, info: InputInfo, pieces: list[Piece]) -> None:
        self.info, self.pieces = info, pieces


def load(inputs: list[Input], year: int | None = None, gpu_start=None, gpu_interval: float = 1.0) -> Evidence:
    """Every input into one Evidence, launches not told apart (the readers' tests, the benches,
    library use). The pipeline reads through grouping.load_groups, one Evidence per deployment."""
    ev = Evidence()
    for inp in inputs:
        ev.inputs.append(read_input(inp, year, into=ev).info)
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
            continue        # read_input says what is wrong with it
        if bulk.usable(path, first) and whole_kind(sniff_head(first)) is None:
            yield inp, path


def start_scans(inputs: list[Input]) -> int:
    """Start the C scanner on the first big plain-file log among `inputs` now: it reads it on the
    other cores while the caller sets up the rest (the rules); read_input takes over what it started.
    One only: it covers the set-up, and each scan holds a thread and a read buffer per core (a
    directory of a hundred big logs started at once would hold them all). Returns how many started."""
    from .readers import bulk, early
    try:
        if FOLLOWING is not None:
            return 0            # a followed file is read once, then what was appended (following.py)
        for inp, path in big_logs(inputs):
            lib = bulk.native_lib()
            if lib is None:
                return 0
            # started by the program before its imports (readers/early.py), when it guessed this file
            inp.started = early.take(path) if inp.display == path else None
            if inp.started is not None:
                return 1
            from .readers.native import stream
            try:
                inp.started = stream.Producer(lib, path=path, display=inp.display)
            except InputError:
                continue
            return 1
        return 0
    finally:
        early.drop()            # a guess not taken


# Several small files (a folder of logs) are read by worker processes, one file each at a time:
# a file's lines go through Python parsers that use one core. Big logs are read by the C reader,
# which already uses every core, so a run with one stays in this process.
SPREAD_MIN_BYTES = 1 << 20      # below this in all, starting workers costs more than it saves
SPREAD_MAX_WORKERS = 2          # each holds one small file whole: memory stays bounded


def read_inputs(inputs: list[Input], year: int | None = None) -> list:
    """Each input → its Read, or the InputError it raised, in the order given."""
    n = _workers(inputs)
    if n < 2:
        return [_read_or_error(inp, year) for inp in inputs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    out: list = [None] * len(inputs)
    # the biggest first, so that no big file is left alone at the end on one core
    order = sorted(range(len(inputs)), key=lambda i: -_size(inputs[i]))
    from .readers.spread import quiet_worker
    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork"), initializer=quiet_worker) as pool:
        futures = {pool.submit(_read_or_error, inputs[i], year): i for i in order}
        try:
            for f, i in futures.items():
                out[i] = f.result()
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM): the workers are ended, not waited for. A worker that
            # is sending a big result waits for a reader the shutdown no longer runs, and joining
            # it hung the run (and the workers were left behind).
            for p in multiprocessing.active_children():
                p.terminate()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return out


def _read_or_error(inp: Input, year):
    try:
        return read_input(inp, year)
    except InputError as e:
        return e


def _size(inp: Input) -> int:
    try:
        st = os.stat(inp.path)
    except OSError:
        return -1
    return st.st_size if stat.S_ISREG(st.st_mode) else -1


def _workers(inputs: list[Input]) -> int:
    """How many processes read `inputs`: one unless there are several small plain files, a core
    each, and fork is at hand with no thread running (a fork copies no other thread)."""
    env = os.environ.get("DIAGNOSE_JOBS")
    limit = SPREAD_MAX_WORKERS if not (env or "").isdigit() else int(env)
    if limit < 2 or len(inputs) < 2 or FOLLOWING is not None:     # followed: the state stays here
        return 1
    import sys
    import threading
    if not sys.platform.startswith("linux") or threading.active_count() > 1:
        return 1
    from .readers import bulk
    sizes = [_size(inp) for inp in inputs]
    if min(sizes) < 0 or max(sizes) >= bulk.FAST_MIN_BYTES or sum(sizes) < SPREAD_MIN_BYTES:
        return 1        # stdin, a FIFO, a missing file, a big log; or too little to share
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(limit, cores, len(inputs))


def read_input(inp: Input, year: int | None = None, into: Evidence | None = None, sniffing: bool = False) -> Read:
    """One input → Read. `into`: one Evidence for the whole input (launches not told apart)."""
    if FOLLOWING is not None and into is None and not sniffing and inp.path != "-":
        return FOLLOWING.read(inp, year)
    started, inp.started = getattr(inp, "started", None), None
    try:
        return _read(inp, year, into, sniffing, started)
    finally:
        if started is not None:
            started.close()     # done with; or started ahead for a file now read another way


# `--follow`: the files followed (following.Following), each read once and then only what was
# appended; None otherwise.
FOLLOWING = None


def _read(inp: Input, year, into, sniffing: bool, started, keep=None) -> Read:
    blocks = inp.blocks()
    first = next(blocks, b"")
    if endless_binary(inp, first):
        blocks.close()
        raise InputError(f"{inp.display}: binary data from a device or stream, not a text log (not read further)")
    if binary_head(first):
        blocks.close()
        raise InputError(f"{inp.display}: binary data, not a text log (not read further)")
    kind = whole_kind(sniff_head(first)) if first else None
    if kind is not None:
        held, rest = formats.hold(first, blocks)
        if held is None:
            if kind not in formats.MAYBE_TEXT:
                raise formats.too_big(kind, inp.display)
            blocks = rest           # too big for a config: text
        else:
            ev = into if into is not None else Evidence()
            info = formats.load_whole(kind, inp, held, ev)
            if info is not None:
                p = Piece(inp.display, 0, ev=ev)
                p.first, p.last = 1, max(1, info.lines)
                return Read(info, [p])
            blocks = iter(held)     # not a YAML/TOML document after all: text
        first = next(blocks, b"")
    return _lines(inp, first, blocks, year, into, sniffing, started, keep)


class _State:
    """The line loop's state for one input: the piece each stream is in, the open region."""

    def __init__(self, inp: Input, info: InputInfo, into: Evidence | None) -> None:
        self.src = inp.display
        self.info = info
        self.split = into is None
        self.pieces = [Piece(self.src, 0, ev=into)]
        self.current: dict = {None: self.pieces[0]}
        self.piece = self.pieces[0]         # the piece of the last line read
        self.readers = [f.reader(self.src, info) for f in formats.LINE_FORMATS]
        self.region = None
        self.made = 1                       # pieces made (their index), folded ones included
        self.folds = 0                      # launches folded into an earlier one

    def ev(self) -> Evidence:
        return self.piece.ev

    def pending(self) -> bool:
        return self.region is not None or self.piece.wants_more()

    def stream(self, key) -> Piece:
        p = self.current.get(key)
        if p is None:
            base = self.current[None]
            # The first line of a stream: the lines before it that no stream claimed (a job's
            # banner) are part of it only while no stream has any.
            if len(self.current) == 1 and not base.launched and not base.engine_lines and key is not None:
                p = base
                p.stream = key
            else:
                p = Piece(self.src, self.made, key, ev=None if self.split else self.pieces[0].ev)
                self.made += 1
                self._share(p)
                self.pieces.append(p)
            self.current[key] = p
        return p

    def _share(self, p: Piece) -> None:
        """An input's launches hold their samples within one launch's bound (Rows.share)."""
        first = self.pieces[0].ev
        if p.ev is not first:
            first.stats_rows.share(p.ev.stats_rows)
            first.gpu_rows.share(p.ev.gpu_rows)

    def new_launch(self, old: Piece, clock: Clock) -> Piece:
        p = Piece(self.src, self.made, old.stream)
        self.made += 1
        self._share(p)
        self.pieces.append(p)
        self.current[old.stream] = p
        if len(self.pieces) > FOLD_AFTER and old.engine_lines:
            old.finish(clock.guessed, clock.base_year)
            into = fold_target(self.pieces, old)
            if into is not None:
                into.fold(old)
                self.pieces.remove(old)
                self.folds += 1
                if self.folds % COLLECT_EVERY == 0:
                    # A folded launch's evidence is freed by reference counting (its samples'
                    # Rows and its parsers hold no cycle: tests/test_real_files.py); this is for
                    # any cycle a reader makes all the same, which an analysis would keep (the
                    # collector is off, cli.py). The young generations only: what was made since
                    # the last time, not the whole run.
                    gc.collect(1)
        return p


def _lines(inp: Input, first: bytes, blocks, year, into, sniffing: bool, started, keep=None) -> Read:
    r = LineRead(inp, year, into, sniffing)
    # A followed file is written by a server as it runs, not pasted: no wrap to undo (and whether a
    # part of it looks hard-wrapped says nothing of the whole).
    r.rejoin = keep is None
    r.feed(first, blocks, started)
    if keep is None:
        return r.finish()
    keep.state = r          # followed (following.py): fed what is appended, finished on a copy
    return r.snapshot(keep.tail)


class LineRead:
    """A text input read line by line: its state between feeds. A read ends with `finish`; a
    followed file's (following.py) is fed what was appended since, and each pass finishes a copy."""

    def __init__(self, inp: Input, year, into, sniffing: bool) -> None:
        self.inp, self.sniffing = inp, sniffing
        self.info = info = InputInfo(path=inp.display)
        self.cov = info.coverage = Coverage()
        self.counts = ScanCounts()
        self.clock = Clock(year)
        self.st = _State(inp, info, into)
        self.sample = None
        self.malformed = 0
        self.last_n = 0
        self.shrank = None
        self.rejoin = True          # hard-wrapped lines re-joined (readers/unwrap.py), on the small-log path

    def feed(self, first: bytes, blocks, started=None) -> None:
        """Read the lines of `first` and `blocks` (the lines after those read so far)."""
        inp, sniffing, counts, cov = self.inp, self.sniffing, self.counts, self.cov
        st, clock, fmt_kw, info = self.st, self.clock, formats.KEYWORDS_RE, self.info
        base = counts.lines

        from .readers import bulk
        bar = progress_bar(inp) if not sniffing else None
        advance = advancer(bar, inp)
        if not base:
            counts.binary_head = b"\x00" in first[:8192]     # likely not a text log
        src = _chain(first, blocks)
        behind = bulk.file_behind(inp)
        if behind and bulk.usable(behind, first) and not sniffing:
            big, lib = True, bulk.native_lib()
        else:
            # gzip and stdin: whether they are big is only known once enough of them has been read
            # (a quarter of the threshold: they cost more to read). A plain file (or a followed
            # file's part) below the threshold is read as a small log.
            sized = getattr(inp, "window", False) or (
                behind is not None and not inp.compressed and os.path.isfile(behind))
            src, big = _peek_size(src, bulk.FAST_MIN_BYTES if sized else bulk.FAST_MIN_BYTES // 4)
            big = big and not sniffing and bulk.text_like(first)
            lib = bulk.native_lib() if big else None
            behind = None
        if lib is not None:
            from .readers.native import stream
            if behind:
                blocks.close()          # C reads the file itself, from its start
                segs = started or stream.Producer(lib, path=behind, display=inp.display)
            else:
                segs = stream.Producer(lib, src, display=inp.display)
        elif big:
            # Without the C reader: Python, a block at a time (read and decompressed a block ahead);
            # a big plain file's blocks classified by worker processes (readers/spread.py), forked
            # before the reading thread starts.
            from .readers import spread
            n = spread.workers_for(behind, os.path.getsize(behind)) if behind else 0
            if n:
                pool = spread.Workers(behind, n)     # forked before read_ahead's thread starts
                segs = spread.segments(read_ahead(src), pool, display=inp.display)
            else:
                segs = segments(read_ahead(src), display=inp.display)
        else:
            if bar:
                src = counted(src, advance)
                advance = None
            data, joined = unwrap(b"".join(src)) if self.rejoin else (b"".join(src), 0)     # small: held whole
            if not base:
                counts.binary_head = b"\x00" in data[:8192]
            if joined:
                info.errors.append(f"hard-wrapped lines re-joined ({joined} continuation line(s) read with the line before)")
            segs = segments([data], tally=False)
        if big and self.sample is None:
            self.sample = _Sampler(cov)
        sample = self.sample if big else None
        lines_iter = read(segs, inp.display, st.ev, counts, progress=advance, follow=st.pending,
                          every_line=not big, on_segment=sample, base=base)
        malformed = 0
        last_n = self.last_n
        for lineno, text, keyword in lines_iter:
            if keyword.__class__ is StatsRun:
                malformed += _c_stats_run(st, cov, clock, keyword, big, fmt_kw)
                last_n = keyword.last_n
                continue
            last_n = lineno
            if big and not keyword and sample is not None:
                sample.saw(lineno)          # handed on for a region or a dump: seen, not to estimate
            # The parsers convert what their regexes matched (`[\d.]+`, dict values) with float()/int();
            # a damaged line (`1..2`, `inf` or 5000 digits where a count belongs, a cut `4.2e+`) makes
            # that raise. Such a line is skipped and counted: one bad line never costs the whole file.
            try:
                _one(st, cov, clock, lineno, text, keyword, big, fmt_kw)
            except LINE_ERRORS:
                malformed += 1
                cov.line(lineno, None, text)
        self.malformed += malformed
        self.last_n = last_n
        if bar:
            bar.close()
        self.shrank = getattr(segs, "shrank", None) or inp.shrank

    def snapshot(self, tail=None) -> Read:
        """The Read of what was fed so far, and of the blocks `tail` (a last line still being
        written); this state stays as it is, to be fed more."""
        import pickle

        from ..evidence.model import rows_copied
        try:        # a copy through pickle: ~3 times faster than deepcopy on a big log's evidence
            with rows_copied():
                c = pickle.loads(pickle.dumps(self, pickle.HIGHEST_PROTOCOL))
        except (pickle.PicklingError, TypeError, AttributeError):
            import copy
            c = copy.deepcopy(self)
        if tail is not None:
            c.feed(b"", tail)
        return c.finish()

    def finish(self) -> Read:
        inp, sniffing, counts, cov, st, clock = self.inp, self.sniffing, self.counts, self.cov, self.st, self.clock
        info, sample, malformed, last_n = self.info, self.sample, self.malformed, self.last_n
        if st.region is not None:
            st.region.end()
        for r in st.readers:
            r.finish()
            if getattr(r, "gpu_only", False):
                cov.rename(r.kind, "gpu-dcgm")
        for p in st.pieces:
            p.finish(clock.guessed, clock.base_year)
        cov.close(last_n)
        if sample is not None:
            sample.settle()
        info.lines = counts.lines
        info.unreadable_lines = counts.unreadable
        info.recognised_lines = cov.understood
        info.unrecognised_lines = max(0, counts.lines - cov.understood - counts.unreadable)
        if not sniffing:
            if counts.lines == 0:
                raise InputError(f"{inp.display}: empty file (nothing to diagnose)")
            if cov.understood == 0 and counts.binary_head:
                raise InputError(f"{inp.display}: binary file, not a text log")
            if cov.understood == 0 and counts.unreadable * 2 >= counts.lines:
                raise InputError(f"{inp.display}: not UTF-8 text ({counts.unreadable} of {counts.lines} lines unreadable)")
        if counts.unreadable:
            info.errors.append(f"{counts.unreadable} unreadable line(s) (invalid UTF-8 or NUL bytes) skipped")
        if malformed:
            info.errors.append(f"{malformed} line(s) with malformed values skipped")
        shrank = self.shrank
        if shrank:
            info.errors.append(f"the file shrank while it was read ({shrank[0]:,} bytes when opened, {shrank[1]:,} "
                               f"at the end: truncated or rotated meanwhile); what was cut off is not in this report")
        if counts.cut:
            info.errors.append(f"{counts.cut} line(s) longer than {MAX_LINE >> 20} MiB cut: only their first "
                               f"{MAX_LINE >> 20} MiB read")
        pieces = [p for p in st.pieces if p.first is not None or p.ev.gpu_rows or p.ev.facts] or st.pieces[:1]
        engines: dict[str, int] = {}
        for p in pieces:
            for e, n in p.engine_lines.items():
                engines[e] = engines.get(e, 0) + n
        if engines:
            info.engine = max(engines, key=engines.get)
            for p in pieces:
                if p.ev.fact("engine") == info.engine and p.ev.fact("engine_version"):
                    info.engine_version = p.ev.fact("engine_version")
                    break
        else:
            info.engine = next((p.ev.fact("engine") for p in pieces if p.ev.fact("engine")), None)
        info.kind = _kind(cov)
        info.launches = sum(int(p.launched) + p.folded_launches for p in pieces)
        return Read(info, pieces)


def _one(st: _State, cov: Coverage, clock: Clock, n: int, text: str, keyword: bool, big: bool, fmt_kw) -> None:
    piece = st.piece
    enveloped = False
    # A parser in the middle of a dump a paste wrapped over several lines takes the line whole.
    if st.region is None and piece.followers and piece.wants_more():
        for p in piece.followers:
            if p.wants_more():
                p.more(text, piece.ev)
        cov.line(n, "log")
        return
    region = st.region
    if region is not None:
        if region.more(n, text):
            cov.line(n, region.kind)
            return
        region.end()
        st.region = None
        # Lines the bulk readers handed on only because a region was open: their access and
        # request lines were counted already.
        if big and not keyword and (REQUEST_BYTES.search(text.encode("utf-8", "replace")) or ACCESS_BYTES.search(text.encode("utf-8", "replace"))):
            return
    if text[:1] == "{" or text[:2] == " {" or (text[:1] == "[" and text[-1:] == "}" and '] {"' in text[:40]):
        obj = json_lines.decode(text)
        if obj is not None:
            env = json_lines.envelope(obj)
            if env is None:
                if json_lines.bench_record(obj):
                    from .formats.bench_files import points_of
                    piece.ev.bench_points.extend(points_of(obj, st.src, n))
                    cov.line(n, "bench-result")
                else:
                    cov.line(n, "json")
                return
            text, iso = env
            cov.envelope = "JSON records (their log or message field is the line)"
            if iso and not text.startswith(iso[:10]):
                text = f"{iso} {text}"
            keyword = True
            enveloped = True
    if keyword and not enveloped and _fast_stats(st, cov, clock, n, text, keyword):
        return
    if keyword and not enveloped and "INFO:" in text and _fast_access(st, cov, clock, n, text, fmt_kw):
        return
    if keyword and not enveloped and "request" in text and _fast_request(st, cov, clock, n, text):
        return
    before = st.piece.launch_line is None
    if not keyword:
        for r in st.readers:
            if r.armed and r.open(n, text, piece.ev, before):
                st.region = r
                cov.line(n, r.kind)
                return
        cov.line(n, classify(text), text)
        return
    line = peel(st.src, n, text)
    # A format's opening line (a capture's header, a scrape's `# HELP`, a result block's rule)
    # carries no engine's logger header, and says what it is early in the line.
    if line.fmt is None and fmt_kw.search(text, 0, 160):
        for r in st.readers:
            if r.open(n, text, piece.ev, before):
                st.region = r
                cov.line(n, r.kind)
                return
    piece = st.current.get(line.stream) or st.stream(line.stream)
    when = clock.at(line)
    if line.fmt is not None:
        m = marker(line.msg)
        if m is not None:
            engine, key, per_launch = m
            if st.split and piece.starts_new(key, per_launch, line.proc, when):
                piece = st.new_launch(piece, clock)
            piece.mark(key, per_launch, line.proc, n, line.raw)
    st.piece = piece
    piece.saw(n, when, line.raw)
    ev = piece.ev
    if feed_common(line, ev, when):
        cov.line(n, "shared", line.raw)
        return
    for p in piece.orders.get(line.fmt, piece.parsers):
        if p.feed(line, ev, when):
            piece.engine_lines[p.engine] = piece.engine_lines.get(p.engine, 0) + 1
            if piece.first_engine is None:
                piece.first_engine = n
            cov.line(n, p.engine, line.raw, read=True)
            return
    e = expected_by(line.msg)
    if e is not None:
        cov.unread_line(n, e, line.raw)
    # A header alone: the engine's line (Triton's glog header is any glog user's: shared unless read).
    kind = classify(line.raw) if line.fmt in (None, "triton") else ENGINE_OF_FMT.get(line.fmt)
    # a structured logger's record is a known format whatever its message says
    cov.line(n, kind or ("shared" if line.fmt else "json" if enveloped else None), line.raw)


# Engine stats lines in their plainest shape, the bulk of a long-running server's keyword lines:
# (a literal every one holds, the reader of the whole line: (Line, match, items) or None, the
# parser's feed_stats taking the last two).
FAST_STATS = (("throughput: ", vllm_stats_line), ("#running-req: ", sglang_batch_line))


def _fast_stats(st: _State, cov: Coverage, clock: Clock, n: int, text: str, read=True) -> bool:
    """A stats line read as the plain path of _one reads it, with what that path would find out
    line by line taken as known: no collector or stream prefix, an engine's header, nothing the
    shared lines' checks act on (the reader makes sure), no launch marker (checked here), and the
    parser of the header's format the first offered the line, which it takes. False, having done
    nothing, for any other line. `read`: the values the C reader read of a vLLM stats line
    (segments.STATS_WIDTH of them), where it did."""
    if read is not True:
        return _c_stats(st, cov, clock, n, text, read)
    for literal, reader in FAST_STATS:
        if literal not in text:
            continue
        got = reader(st.src, n, text)
        if got is None:
            continue
        line, m, items = got
        if marker(line.msg) is not None:
            return False
        piece = st.current[None]
        when = clock.at(line)
        st.piece = piece
        piece.saw(n, when, line.raw)
        ev = piece.ev
        if line.ip:
            ev.ray_ips.add(line.ip)
        p = piece.orders[line.fmt][0]
        p.feed_stats(m, items, line, ev, when)
        piece.engine_lines[p.engine] = piece.engine_lines.get(p.engine, 0) + 1
        if piece.first_engine is None:
            piece.first_engine = n
        cov.line(n, p.engine, line.raw, read=True)
        return True
    return False


def _fast_access(st: _State, cov: Coverage, clock: Clock, n: int, text: str, fmt_kw) -> bool:
    """An access line read as the plain path of _one reads it (engines.common.plain_access says
    which lines that path reads as nothing else): its stream's launch piece, no time (uvicorn
    writes none: Clock.at's None), feed_common's access branch, `shared` coverage (a traceback
    being read takes nothing from a message that opens with `INFO:`: EXC_LINE). SGLang's server
    writes its access lines under its logger header (sglang access_line): the header's time then,
    and no launch marker (checked here). False, having done nothing, for any other line."""
    got = plain_access(text, fmt_kw)
    if got is not None:
        raw, m = got[0], got[2]
        line = None
    else:
        got = sglang_access_line(st.src, n, text, fmt_kw) if "[" in text[:12] else None
        if got is None:
            return False
        line, m = got
        if marker(line.msg) is not None:
            return False
        raw = line.raw
    piece = st.current.get(None) or st.stream(None)
    when = clock.at(line) if line is not None else None
    ev = piece.ev
    st.piece = piece
    piece.saw(n, when, raw)
    access(m, st.src, n, raw, ev, when, ev.lifecycle.get(st.src))
    cov.line(n, "shared", raw)
    return True


def _fast_request(st: _State, cov: Coverage, clock: Clock, n: int, text: str) -> bool:
    """A vLLM request line (`Received request …`, `Added request …`: most of a small log that logs
    its requests) read as the plain path of _one reads it, what that path finds out line by line
    taken as known from its shape (vllm request_line: no collector or stream prefix, one process
    prefix at most, vLLM's header): no launch marker (checked here); feed_common leaves a request
    line at once; the vLLM parser, the first its format's lines are offered to, takes it, its
    process noted already (else the plain path notes it). False, having done nothing, for any
    other line."""
    line = vllm_request_line(st.src, n, text)
    if line is None or line.raw.endswith("cluster]") or marker(line.msg) is not None:
        return False
    piece = st.current.get(None)
    if piece is None:
        return False        # the stream's first line: the plain path makes its piece
    p = piece.orders["vllm"][0]
    proc = line.proc
    if proc is not None and (proc not in p.procs_seen or proc == "VllmWorkerProcess"):
        return False
    when = clock.at(line)
    st.piece = piece
    piece.saw(n, when, line.raw)
    p.request(line, piece.ev, when)
    piece.engine_lines[p.engine] = piece.engine_lines.get(p.engine, 0) + 1
    if piece.first_engine is None:
        piece.first_engine = n
    cov.line(n, p.engine, line.raw, read=True)
    return True


def c_stats_line(src: str, n: int, text: str, v) -> Line:
    """The Line vllm stats_line makes of a stats line scan.c read (dg_stats_line: STATS_HEAD's
    shape, no `ip=`, nothing visible() would change), from the places C found in it."""
    lv, hms = int(v[1]), int(v[7])
    proc = None if v[3] < 0 else text[int(v[3]):int(v[3] + v[4])]
    return Line(src, n, text, text[int(v[0]):], proc, None, text[lv:lv + int(v[2])],
                (int(v[5]), int(v[6]), text[hms:hms + 8]), fmt="vllm")


def _c_stats(st: _State, cov: Coverage, clock: Clock, n: int, text: str, v) -> bool:
    """_fast_stats of a vLLM stats line scan.c read: no regex, no float() (C's strtod rounds alike)."""
    line = c_stats_line(st.src, n, text, v)
    if marker(line.msg) is not None:
        return False
    piece = st.current[None]
    when = clock.at(line)
    st.piece = piece
    piece.saw(n, when, text)
    ev = piece.ev
    p = piece.orders["vllm"][0]
    p.feed_values(v, line, ev, when)
    piece.engine_lines[p.engine] = piece.engine_lines.get(p.engine, 0) + 1
    if piece.first_engine is None:
        piece.first_engine = n
    cov.line(n, p.engine, text, read=True)
    return True


def _c_stats_run(st: _State, cov: Coverage, clock: Clock, run: StatsRun, big: bool, fmt_kw) -> int:
    """The lines of `run` (stats lines C read, one after the other) read as _one reads each of them
    (through _c_stats), what cannot change from one to the next checked once: no region open, no
    parser in a dump (a stats line opens neither), the launch piece and its parser. What _one and
    _c_stats check of a line that such a line cannot be, given the shape C read (tests/
    test_fast_paths.py), is not checked: a JSON record (it opens with `(` or a level), a launch
    marker (no launches.HINTS phrase fits its wording). Sets run.done and run.last_n; returns the
    lines with malformed values."""
    seg, base, rows, stats = run.seg, run.base, run.rows, run.stats
    src, piece = st.src, st.current[None]
    first = rows[0]
    if st.region is not None or any(p.followers and p.wants_more() for p in (st.piece, piece)):
        # the first line as any other (the rest then come one by one)
        n = base + first[1] + 1
        k = (first[4] - 1) * STATS_WIDTH
        text = seg.text(first[2], first[3], int(stats[k + STATS_TEXT])).decode("utf-8", "replace")
        run.done, run.last_n = 1, n
        try:
            _one(st, cov, clock, n, text, stats[k:k + STATS_WIDTH], big, fmt_kw)
        except LINE_ERRORS:
            cov.line(n, None, text)
            return 1
        return 0
    fd, buf, blob, pread = seg.fd, seg.buf, seg.blob, os.pread
    ev, saw = piece.ev, piece.saw
    p = piece.orders["vllm"][0]
    engine, procs = p.engine, p.procs_seen
    kept = ev.stats_rows
    append, at_hms, drops, dropped_one, last = kept.append, clock.at_hms, kept.drops, kept.dropped_one, rows[-1]
    # the run's values as one list (its rows' values follow one another in `stats`)
    k0 = (first[4] - 1) * STATS_WIDTH
    vals = stats[k0:rows[-1][4] * STATS_WIDTH].tolist()
    st.piece = piece
    ns = []
    for row in rows:
        n = base + row[1] + 1
        a, z = row[2], row[3]
        k = (row[4] - 1) * STATS_WIDTH - k0
        v = vals[k:k + STATS_WIDTH]
        t = int(v[STATS_TEXT])
        # Segment.text inline: the buffer, C's copy of the line, or the file
        text = (buf[a:z] if fd is None else blob[t:t + z - a] if t >= 0 else pread(fd, z - a, a)).decode("utf-8", "replace")
        proc = None if v[3] < 0 else text[int(v[3]):int(v[3] + v[4])]
        if "v1_engine" in ev.facts and (proc is None or (proc in procs and proc != "VllmWorkerProcess")):
            # what feed_values does when the engine's kind is known and the process (if any)
            # was noted already: the row alone; the time from the numbers C read (Clock.at_hms)
            when = at_hms(int(v[5]), int(v[6]), int(v[15]), int(v[16]), int(v[17]))
            saw(n, when, text)
            # past the rows' bound, a row the next one would take out again is counted, not made
            # (its key: values_row's source, engine and no kind)
            if row is not last and drops(series := (src, int(v[8]) if v[8] > 0 else 0, None)):
                dropped_one(series)
            else:
                append(values_row(v, src, n, when))
        else:
            line = c_stats_line(src, n, text, v)
            when = clock.at(line)
            saw(n, when, text)
            p.feed_values(v, line, ev, when)
        ns.append(n)
    piece.engine_lines[engine] = piece.engine_lines.get(engine, 0) + len(ns)
    if piece.first_engine is None:
        piece.first_engine = ns[0]
    cov.read_lines(engine, ns)
    run.done, run.last_n = len(ns), ns[-1]
    return 0


class _Sampler:
    """Coverage of a big log's lines the readers never hand on (no keyword, not an access or
    request line), judged by their shape: every such line of a small segment, and of a big one
    the lines in SAMPLE_WINDOWS windows spread over it, their make-up spread over the rest."""

    def __init__(self, cov: Coverage) -> None:
        self.cov = cov
        self.kinds: dict = {}       # kind → sampled lines (windows of big segments)
        self.sampled = 0
        self.unseen = 0             # lines of big segments neither handed on nor judged one by one
        self.exact: dict = {}       # line number → kind, of small segments' lines not handed on
        self.followed = 0           # lines of big segments handed on for a region or a dump

    def __call__(self, seg, keyword_rows, base: int) -> None:
        cov = self.cov
        cov.add("shared", seg.acc)
        cov.add("vllm", seg.req)
        unseen = seg.lines - seg.bad - seg.acc - seg.req - len(keyword_rows)
        if unseen <= 0:
            return
        span = seg.end - seg.start
        if span <= EXACT_BYTES:
            skip = {r[1] for r in keyword_rows}
            prev = None
            for i, raw in enumerate(seg.text(seg.start, seg.end).split(b"\n")[:-1]):
                if i in skip:
                    # the loop reads it; as the previous line of a continuation, judged by shape
                    prev = classify(raw.decode("utf-8", "replace"))
                    continue
                k = self._kind(raw, False)
                if k is None and prev in ("traceback", "shared") and raw[:1] in b" \t":
                    k = prev            # a warning's or a traceback's continuation (as Coverage.line)
                prev = k
                if k != "handed":
                    self.exact[base + i + 1] = k
            return
        self.unseen += unseen
        step = max(SAMPLE_BYTES, span // SAMPLE_WINDOWS)
        for at in range(seg.start, seg.end, step):
            chunk = seg.text(at, min(seg.end, at + SAMPLE_BYTES))
            lines = chunk.split(b"\n")[:-1]
            for raw in (lines if at == seg.start else lines[1:]):     # a window's first line may be cut
                k = self._kind(raw)
                if k != "handed":
                    self.kinds[k] = self.kinds.get(k, 0) + 1
                    self.sampled += 1

    @staticmethod
    def _kind(raw: bytes, keywords: bool = True):
        """A line's kind by its shape; "handed" for what the readers count or hand on themselves.
        `keywords`: whether to look for the scanner's keywords (not where the reader's rows say
        which lines hold one: it looked for the same words, format openers included)."""
        if b"request" in raw and REQUEST_BYTES.search(raw) or b"INFO:" in raw and ACCESS_BYTES.search(raw):
            return "handed"
        if b"\x00" in raw:
            return "handed"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return "handed"
        if keywords and (formats.KEYWORDS_RE.search(text) or _scanner_keyword(raw)):
            return "handed"
        return shape_kind(text) if text.strip() else "blank"

    def saw(self, n: int) -> None:
        """A line without a keyword the loop was handed (a region's, a dump's): counted there."""
        if self.exact.pop(n, None) is None:
            self.followed += 1

    def settle(self) -> None:
        cov = self.cov
        counted = 0
        for k in self.exact.values():
            if k == "blank":
                cov.blank += 1
            else:
                cov.add(k, 1)
            counted += 1
        cov.sampled = counted
        unseen = max(0, self.unseen - self.followed)
        if not unseen:
            return
        cov.sampled += unseen
        if not self.sampled:
            cov.add(None, unseen)
            return
        for k, c in self.kinds.items():
            est = round(unseen * c / self.sampled)
            if k == "blank":
                cov.blank += est
            else:
                cov.add(k, est)


def shape_kind(text: str):
    """A line's kind by its shape, as the loop judges a line without a keyword: a JSON record
    (its inner line's kind), else coverage.classify."""
    if text[:1] == "{" or text[:2] == " {" or (text[:1] == "[" and text[-1:] == "}" and '] {"' in text[:40]):
        obj = json_lines.decode(text)
        if obj is not None:
            env = json_lines.envelope(obj)
            if env is None:
                return "bench-result" if json_lines.bench_record(obj) else "json"
            return classify(env[0]) or "json"
    return classify(text)


def _scanner_keyword(raw: bytes) -> bool:
    from .readers.scanner import _KW
    return _KW.search(raw) is not None


def _kind(cov: Coverage) -> str:
    """The input's kind in one word: `log` when an engine wrote any of it, else the line format
    most of its lines are (`gpu-dmon`, `prometheus-scrape`, …), else `log`."""
    if cov.engine_lines():
        return "log"
    formats_seen = {k: n for k, n in cov.by_kind.items()
                    if k not in ENGINES and k not in ("shared", "traceback", "progress", "log", "json")}
    return max(formats_seen, key=formats_seen.get) if formats_seen else "log"


def _peek_size(blocks, limit: int):
    """(the same blocks, whether they hold at least `limit` bytes), reading no more than that."""
    held, size = [], 0
    for b in blocks:
        held.append(b)
        size += len(b)
        if size >= limit:
            return itertools.chain(held, blocks), True
    return iter(held), False


def _chain(first: bytes, rest):
    if first:
        yield first
    yield from rest
