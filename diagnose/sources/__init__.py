"""Sources: turn inputs into Evidence. A new log format gets recognised in a module here.

load() streams each input through the scanner (which lines matter), peels the prefixes, and
offers each line to the shared-line parser and then to the engine parsers (vllm.py, sglang.py,
trtllm.py). Whole-file formats (JSON, YAML) go through structured.py, load-test results
(benchmark sweeps) through bench.py. Several inputs from
different engines are different deployments: group_inputs() splits them.
"""
from __future__ import annotations

import itertools
import os
import stat

from ..evidence.finish import finish
from ..evidence.model import Evidence, InputInfo
from .bench import load_bench, sniff_bench
from .common_lines import feed_common, finish_lifecycle
from .gpu import load_gpu, sniff_gpu
from .prometheus import load_exposition, load_query_range, sniff_prometheus
from .lineprefix import Clock, peel
from .reader import Input, InputError, resolve
from .unwrap import unwrap
from .scanner import ScanCounts, scan
from .sglang import SglangParser
from .structured import load_structured, sniff
from .trtllm import TrtllmParser
from .vllm import VllmParser

__all__ = ["load", "load_groups", "InputError", "resolve"]

# Which parser to offer a line first, by the header shape it carries.
FIRST_BY_FMT = {"vllm": 0, "sglang": 1, "trtllm": 2, "triton": 2}
SNIFF_BYTES = 512 * 1024
# What converting a damaged value raises: float("1..2"), int(float("inf")), int("9" * 5000).
LINE_ERRORS = (ValueError, ArithmeticError)


def load(inputs: list[Input], year: int | None = None, gpu_start=None, gpu_interval: float = 1.0) -> Evidence:
    ev = Evidence()
    for inp in inputs:
        ev.inputs.append(_load_one(inp, ev, year))
    finish(ev, gpu_start, gpu_interval)
    return ev


def load_groups(inputs: list[Input], year: int | None = None, **kw) -> list[Evidence]:
    """One Evidence per deployment: inputs are grouped by the engine that wrote them.

    Inputs of no engine (NCCL-only excerpts, configs without engine keys) join the only engine
    group when there is one."""
    if len(inputs) <= 1:
        return [load(inputs, year, **kw)]
    by_engine: dict[str | None, list[Input]] = {}
    for inp in inputs:
        by_engine.setdefault(_sniff_engine(inp, year), []).append(inp)
    engines = [e for e in by_engine if e is not None]
    if len(engines) <= 1:
        return [load(inputs, year, **kw)]
    groups = [by_engine[e] for e in engines]
    if None in by_engine:
        groups.append(by_engine[None])
    return [load(g, year, **kw) for g in groups]


def _sniff_engine(inp: Input, year) -> str | None:
    if inp.path == "-":
        return None
    try:
        probe = Evidence()
        head = next(iter(inp.blocks()), b"")[:SNIFF_BYTES]
        clean = _blank_unreadable(head)[0]
        if sniff_gpu(clean):
            return None
        pk = sniff_prometheus(clean)
        if pk:
            for prefix, eng in (("vllm:", "vllm"), ("sglang", "sglang"), ("trtllm", "trtllm"), ("nv_trt_llm", "trtllm")):
                if prefix.encode() in head:
                    return eng
            return None
        kind = sniff(clean)
        if kind:
            return "trtllm" if b"TensorRT" in head or b"kv_cache_config" in head or b"iterLatencyMS" in head or b"Active Request Count" in head else None
        cut = Input.__new__(Input)
        cut.path, cut.display = inp.path, inp.display
        cut.blocks = lambda: iter([head[: head.rfind(b"\n") + 1] or head])
        return _load_one(cut, probe, year, sniffing=True).engine
    except InputError:
        return None


def _sniff_head(first: bytes) -> bytes:
    # Sniffed without its unreadable lines, which every reader skips: one damaged line (a
    # `vllm:…` metric cut by a NUL at the top of an SGLang log) turned a whole log into a "scrape".
    return _blank_unreadable(first[:SNIFF_BYTES])[0] if first else b""


def _is_log(first: bytes) -> bool:
    """Whether _load_one reads an input that starts with `first` as a log (not a scrape, GPU
    samples or structured records)."""
    head = _sniff_head(first)
    return not (first and (sniff_prometheus(head) or sniff_gpu(head) or sniff(head)))


def _big_logs(inputs: list[Input]):
    """The inputs the C scanner would read as plain files, with the path it reads each from, in
    order: big regular-file logs, stdin redirected from one (not read yet) included."""
    from . import bulk
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
            continue        # _load_one says what is wrong with it
        if bulk.usable(path, first) and _is_log(first):
            yield inp, path


def start_scans(inputs: list[Input]) -> int:
    """Start the C scanner on the first big plain-file log among `inputs` now: it reads it on the
    other cores while the caller sets up the rest (the rules); _load_one takes over what it started.
    One only: it covers the set-up, and each scan holds a thread and a read buffer per core (a
    directory of a hundred big logs started at once would hold them all). Returns how many started."""
    from . import bulk
    for inp, path in _big_logs(inputs):
        lib = bulk.native_lib()
        if lib is None:
            return 0
        from .native import stream
        try:
            inp.started = stream.Producer(lib, path=path, display=inp.display)
        except InputError:
            continue
        return 1
    return 0


def _load_one(inp: Input, ev: Evidence, year: int | None, sniffing: bool = False) -> InputInfo:
    started, inp.started = getattr(inp, "started", None), None
    try:
        return _read_one(inp, ev, year, sniffing, started)
    finally:
        if started is not None:
            started.close()     # done with; or started ahead for a file now read another way


def _endless_binary(inp: Input, first: bytes) -> bool:
    """A device, FIFO or stdin whose first block is binary (`/dev/zero`, `/dev/urandom`, a pipe of
    a core dump): it may never end, and it is no log. A regular file is read to its end and
    judged by the line scanner, which counts what it cannot read."""
    if b"\x00" not in first[:8192]:
        return False
    try:
        mode = os.fstat(0).st_mode if inp.path == "-" else os.stat(inp.path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode)


def _read_one(inp: Input, ev: Evidence, year: int | None, sniffing: bool, started) -> InputInfo:
    blocks = inp.blocks()
    first = next(blocks, b"")
    if _endless_binary(inp, first):
        blocks.close()
        raise InputError(f"{inp.display}: binary data from a device or stream, not a text log (not read further)")
    head = _sniff_head(first)
    prom_kind = sniff_prometheus(head) if first else None
    if prom_kind:
        data, bad = _blank_unreadable(first + b"".join(blocks))
        text = data.decode("utf-8", "replace")
        info = (load_query_range if prom_kind == "query_range" else load_exposition)(text, inp.display, ev)
        if "DCGM_FI_" in text:     # node and engine metrics scraped together
            from .gpu import _dcgm
            _dcgm(text.splitlines(), inp.display, ev, info)
        return _note_unreadable(info, bad)
    gpu_kind = sniff_gpu(head) if first else None
    if gpu_kind:
        data, bad = _blank_unreadable(first + b"".join(blocks))
        replay = Input.__new__(Input)
        replay.path, replay.display = inp.path, inp.display
        replay.blocks = lambda: iter([data])
        return _note_unreadable(load_gpu(gpu_kind, replay, ev), bad)
    bench_kind = sniff_bench(head) if first else None
    if bench_kind:
        replay = Input.__new__(Input)
        replay.path, replay.display = inp.path, inp.display
        replay.blocks = lambda: _chain(first, blocks)
        return load_bench(bench_kind, replay, ev)
    kind = sniff(head) if first else None
    if kind:
        replay = Input.__new__(Input)
        replay.path, replay.display = inp.path, inp.display
        replay.blocks = lambda: _chain(first, blocks)
        info = load_structured(kind, replay, ev)
        if info.engine:
            ev.set_fact("engine", info.engine, override=False)
        return info
    info = InputInfo(path=inp.display)
    counts = ScanCounts()
    clock = Clock(year)
    parsers = [VllmParser(), SglangParser(), TrtllmParser()]
    engine_lines: dict[str, int] = {}
    recognised = 0

    # The parser of the line's header format first, then the others.
    orders = {fmt: [parsers[i]] + [p for j, p in enumerate(parsers) if j != i] for fmt, i in FIRST_BY_FMT.items()}
    wants = [p.wants_more for p in parsers[1:]]

    def pending():      # asked once or twice per line: no generator
        return wants[0]() or wants[1]()

    from . import bulk
    bar = _progress_bar(inp) if not sniffing else None
    advance = _advancer(bar, inp)
    behind = bulk.file_behind(inp)
    if behind and bulk.usable(behind, first) and not sniffing:
        lib = bulk.native_lib()
        blocks.close()          # C (or polars, in Rust) reads the file itself, from its start
        if lib is not None:
            from .native import stream
            prod = started or stream.Producer(lib, path=behind, display=inp.display)
            lines_iter = stream.scan(prod, inp.display, ev, counts, progress=advance, follow=pending)
        else:
            lines_iter = bulk.scan_file(behind, inp.display, ev, counts, progress=advance, follow=pending)
    else:
        # gzip and stdin: big ones go through the bulk path block by block; that is only known
        # once enough of them has been read.
        src, big = _peek_size(_chain(first, blocks), bulk.FAST_MIN_BYTES // 4)
        if big and not sniffing and bulk.text_like(first):
            lib = bulk.native_lib()
            if lib is not None:
                from .native import stream
                lines_iter = stream.scan(stream.Producer(lib, src), inp.display, ev, counts,
                                         progress=advance, follow=pending)
            else:
                lines_iter = bulk.scan_blocks(src, inp.display, ev, counts, progress=advance, follow=pending)
        else:
            if bar:
                src = _counted(src, advance)
            data, joined = unwrap(b"".join(src))          # small: held whole already
            if joined:
                info.errors.append(f"hard-wrapped lines re-joined ({joined} continuation line(s) read with the line before)")
            lines_iter = scan([data], counts, follow=pending)
    malformed = 0
    for lineno, text in lines_iter:
        # The parsers convert what their regexes matched (`[\d.]+`, dict values) with float()/int();
        # a damaged line (`1..2`, `inf` or 5000 digits where a count belongs, a cut `4.2e+`) makes
        # that raise. Such a line is skipped and counted: one bad line never costs the whole file.
        try:
            if pending():
                for p in parsers[1:]:
                    if p.wants_more():
                        p.more(text, ev)
                recognised += 1
                continue
            line = peel(inp.display, lineno, text)
            when = clock.at(line)
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
    finish_lifecycle(ev, inp.display)
    for p in parsers[1:]:
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


PROGRESS_MIN_BYTES = int(os.environ.get("DIAGNOSE_PROGRESS_MIN_BYTES", 100 * 1024 * 1024))


class _Bar:
    """A progress bar on stderr for big inputs, only when stderr is a terminal."""

    def __init__(self, name: str, total: int) -> None:
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
        from rich.console import Console
        self.p = Progress("[dim]{task.description}", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                          console=Console(stderr=True), transient=True)
        self.p.start()
        self.task = self.p.add_task(name, total=total)

    def advance(self, n: int) -> None:
        self.p.advance(self.task, n)

    def set(self, done: int) -> None:
        self.p.update(self.task, completed=done)

    def close(self) -> None:
        self.p.stop()


def _progress_bar(inp: Input):
    import sys
    if inp.path == "-" or not sys.stderr.isatty():
        return None
    try:
        size = os.path.getsize(inp.path)
    except OSError:
        return None
    return _Bar(inp.display, size) if size >= PROGRESS_MIN_BYTES else None


def _advancer(bar, inp: Input):
    """How the bar moves: by the bytes read, or for a gzip file by the compressed bytes read (its
    size on disk is the bar's total)."""
    if bar is None:
        return None
    return lambda n: bar.set(inp.raw_pos) if inp.compressed else bar.advance(n)


def _peek_size(blocks, limit: int):
    """(the same blocks, whether they hold at least `limit` bytes), reading no more than that."""
    held, size = [], 0
    for b in blocks:
        held.append(b)
        size += len(b)
        if size >= limit:
            return itertools.chain(held, blocks), True
    return iter(held), False


def _counted(blocks, advance):
    for b in blocks:
        advance(len(b))
        yield b


def _blank_unreadable(data: bytes) -> tuple[bytes, int]:
    """Scrapes and GPU samples are read whole: a line with NUL bytes or invalid UTF-8 is emptied
    (line numbers hold) and counted, as the log scanner skips and counts it: parsed, they would
    carry U+FFFD into values and go uncounted."""
    if b"\x00" not in data:
        try:
            data.decode("utf-8")
            return data, 0
        except UnicodeDecodeError:
            pass
    lines = data.split(b"\n")
    bad = 0
    for i, raw in enumerate(lines):
        if not raw:
            continue
        try:
            raw.decode("utf-8")
            ok = b"\x00" not in raw
        except UnicodeDecodeError:
            ok = False
        if not ok:
            lines[i] = b""
            bad += 1
    return b"\n".join(lines), bad


def _note_unreadable(info: InputInfo, bad: int) -> InputInfo:
    if bad:
        info.unreadable_lines = bad
        info.unrecognised_lines = max(0, info.unrecognised_lines - bad)
        info.errors.append(f"{bad} unreadable line(s) (invalid UTF-8 or NUL bytes) skipped")
    return info


def _chain(first: bytes, rest):
    if first:
        yield first
    yield from rest
