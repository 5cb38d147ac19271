"""The bulk path for big logs: polars does, in Rust and on both cores, what the block scanner does
line by line in Python.

polars' CSV reader splits lines (each line is one field: the separator never occurs in logs), then
each line is classified once (`classify`): unreadable, uvicorn access line, engine request line, or
a line with one of the scanner's keywords. Access and request lines, ~98 % of a busy server's log,
are only counted and aggregated (`Tally`: status codes, probes, prompt heads); their text is dropped
inside the query, so memory stays flat whatever the size. The few remaining keyword lines go through
the same parsers, in order, with their line numbers. Evidence equals the block scanner's (tests hold
them to it).

A plain file is one streaming query (`scan_file`). gzip and stdin come as blocks of decompressed
bytes (`scan_blocks`): each block is one in-memory query, while a thread reads and decompresses the
next one. Small inputs keep the block scanner: importing polars costs more than it saves there.
"""
from __future__ import annotations

import itertools
import os
import re

from ..evidence.model import EVENT_KEEP, Event, Evidence
from ..redact import redact
from .common_lines import MAX_PREFIXES, PROBE_PATHS, count_head, head_key
from .lineprefix import visible
from .scanner import GREP_KEYWORDS, line_runs

DEFAULT_FAST_MIN_BYTES = 64 * 1024 * 1024
FAST_MIN_BYTES = int(os.environ.get("DIAGNOSE_BULK_MIN_BYTES", DEFAULT_FAST_MIN_BYTES))
SEP = "\x1f"      # a byte that never appears in logs: each line is one CSV field
ACCESS = r'INFO: +[\w.:\[\]-]+:\d+ - "[A-Z]+ \S+ HTTP/[\d.]+" \d{3}'
REQUEST = r"\] (?:Received|Added|Finished|Aborted) request"
# On an access line: its path starts with a probe's (common_lines: path.startswith(PROBE_PATHS)).
PROBE = '"[A-Z]+ (?:%s)' % "|".join(re.escape(p) for p in PROBE_PATHS)
# The scanner's keywords as one regex: polars' contains_any rebuilds its automaton for every chunk
# (0.5 CPU-s per GB), a regex is compiled once.
KEYWORDS = "|".join(re.escape(k) for k in GREP_KEYWORDS)
# Rows handed to Python at a time. Only short columns travel for access and request rows, but a
# keyword line keeps its text: this bounds memory on a log made of long keyword lines.
BATCH_ROWS = 20_000
# Flat memory (peak RSS <= 256 MB at any size). polars reads CSV in chunks and prefetches
# several, and its allocator (jemalloc) keeps freed pages for 10 s: with the defaults a 1 GB log
# peaks near 400 MB. Small chunks, one in flight, and freed pages returned within 50 ms by
# jemalloc's background thread keep the peak near 250 MB at no cost in speed (bench/run.py).
# Set before polars is first imported, and only where the user has not set them.
POLARS_ENV = {"POLARS_CSV_CHUNK_SIZE": str(1 << 20), "POLARS_CSV_CHUNK_PREFETCH_LIMIT": "1",
              "_RJEM_MALLOC_CONF": "background_thread:true,dirty_decay_ms:50,muzzy_decay_ms:0"}


# The C scanner (native/) when the install has it; polars otherwise (tests switch this off).
USE_NATIVE = True


def native_lib():
    if not USE_NATIVE:
        return None
    from . import native
    lib = native.load()
    if lib is None:     # one line on stderr per run; where the threshold was lowered, only on a terminal
        native.note_fallback(FAST_MIN_BYTES >= DEFAULT_FAST_MIN_BYTES)
    return lib


def file_behind(inp) -> str | None:
    """The path the bulk path may read `inp` from: the file itself, or for `diagnose - < big.log`
    the file stdin was opened on (read again from its start, which is where stdin stood: a pipe, or
    a file the shell left part-read, keeps the block path)."""
    if getattr(inp, "transcoded", False):
        return None         # the file's own bytes are UTF-16 (or carry a BOM): only the decoded blocks are text
    if inp.path != "-":
        return inp.path
    if getattr(inp, "stdin_at", None) == 0 and os.path.exists(STDIN_PATH):
        return STDIN_PATH
    return None


STDIN_PATH = "/proc/self/fd/0"


def read_head(path: str, n: int) -> bytes:
    """The first n bytes of a plain file; stdin's through its own descriptor (opening it again by
    name would check permissions the shell's redirect already passed). Raises OSError."""
    if path == STDIN_PATH:
        return os.pread(0, n, 0)
    with open(path, "rb") as fh:
        return fh.read(n)


def usable(path: str, head: bytes) -> bool:
    """A plain file big enough for the streaming query (`head`: its first decompressed bytes)."""
    import stat
    try:
        st = os.stat(path)
        # Only a regular file is opened a second time (a FIFO would lose what this read takes).
        if not stat.S_ISREG(st.st_mode) or st.st_size < FAST_MIN_BYTES:
            return False
        magic = read_head(path, 2)
    except OSError:
        return False
    return magic != b"\x1f\x8b" and text_like(head)


def text_like(head: bytes) -> bool:
    """Binary input goes to the block scanner, which says so in one line."""
    return b"\x00" not in head[:65536]


def _tune_polars() -> None:
    for k, v in POLARS_ENV.items():
        os.environ.setdefault(k, v)


# Each line one text field `l`: no header, no quoting, invalid UTF-8 replaced (and then counted).
# A line that does hold the separator byte is cut there (the rest is ignored, never an error).
CSV = dict(has_header=False, separator=SEP, quote_char=None, new_columns=["l"], infer_schema=False,
           truncate_ragged_lines=True, extra_columns="ignore", encoding="utf8-lossy", raise_if_empty=False)


def _lines(pl, path: str):
    return pl.scan_csv(path, **CSV)


OUT_COLUMNS = ("n", "bad", "acc", "req", "kw", "status", "probe", "rcv", "head", "text", "nb")


def classify(pl, lines, keep_request_text: bool = False, columns=None):
    """The per-line classification of a lazy frame of lines (`n`, `l`), as a lazy query.

    Each stage is its own column, computed once; derived columns start from a copy of the line
    that is null except on the rows concerned (`la`, `lr`), so polars does their work only there."""
    c = pl.col
    l = c("l").fill_null("")
    # Invalid UTF-8 arrives as U+FFFD (lossy decoding); NUL bytes pass through as they are.
    bad = l.str.contains("\ufffd", literal=True) | l.str.contains("\x00", literal=True)
    # Request lines first: their pattern sits near the start of a long line, so the search stops
    # early; the access pattern is then only searched in the other (short) lines. A request line
    # whose prompt quotes an access line stays a request line, as it does line by line.
    req = ~c("bad") & l.str.contains(REQUEST)
    acc = ~c("bad") & ~c("req") & pl.when(~c("req")).then(l).str.contains(ACCESS).fill_null(False)
    rcv = c("req") & pl.when(c("req")).then(l).str.contains("] Received request", literal=True).fill_null(False)
    other = ~c("bad") & ~c("acc") & ~c("req")
    # The prompt's head, cut exactly as common_lines.note_prompt cuts it: in bytes, after the first
    # `prompt: ` and its quote, up to the closing `', params` (or `', sampling_params`) when that
    # starts within 256 bytes, else 256 bytes. str.find gives byte offsets; the cut is a binary view.
    # The closing text is searched for in the line only where the 273-byte window after the quote
    # (256 + the longest closing text) may hold one: an absent one would cost a scan of the whole
    # line. (The search starts at the line's start: a closing text in the prefix before `prompt: `,
    # which no engine writes, would be taken for the prompt's.)
    start = c("at") + 9
    has = c("win").bin.contains(b", params") | c("win").bin.contains(b", sampling_params")
    pos = {q: c("lc").str.find("%s, (?:sampling_)?params" % q) - start for q in "'\""}
    cut = pl.when(c("quote") == b"'").then(c("'")).when(c("quote") == b'"').then(c('"'))
    cut = pl.when((cut >= 0) & (cut < 256)).then(cut).otherwise(256)
    query = (lines
             .with_columns(bad=bad).with_columns(req=req).with_columns(acc=acc).with_columns(rcv=rcv)
             .with_columns(la=pl.when(c("acc")).then(l), lr=pl.when(c("rcv")).then(l),
                           lo=pl.when(other).then(l))
             .with_columns(at=c("lr").str.find("prompt: ", literal=True), raw=c("lr").cast(pl.Binary))
             .with_columns(quote=c("raw").bin.slice(c("at") + 8, 1), win=c("raw").bin.slice(start, 273))
             .with_columns(lc=pl.when(has).then(c("lr")))
             .with_columns(**pos)
             .with_columns(cut=cut)
             .with_columns(kw=c("lo").str.contains(KEYWORDS).fill_null(False),
                           status=c("la").str.extract(r'HTTP/[\d.]+" (\d{3})'),
                           probe=c("la").str.contains(PROBE).fill_null(False),
                           head=pl.when(c("quote").is_in([b"'", b'"'])).then(c("raw").bin.slice(start, c("cut"))),
                           nb=l.str.len_bytes())
             # Text travels only where Python needs it: keyword lines (parsed), and access lines
             # that may become evidence (probes, errors). Request lines, long with prompts, and
             # plain access lines leave theirs here.
             .with_columns(text=pl.coalesce(
                 c("lo"), pl.when(c("probe") | c("status").str.starts_with("5") | (c("status") == "429")).then(c("la")),
                 *([c("lr")] if keep_request_text else [])))
             .select(*(columns or OUT_COLUMNS)))
    return query


def scan_file(path: str, display: str, ev: Evidence, counts, progress=None, follow=None):
    """A plain file: one streaming query. Yields (line number, text) for the lines parsers must
    see; aggregates the rest into `ev`."""
    _tune_polars()
    import polars as pl
    lines = _lines(pl, path).with_row_index("n", offset=1)
    tally = Tally(pl, display, ev, counts, progress, os.path.getsize(path), follow)
    # Every row comes back (short columns only, text where needed): the row count is the line
    # count, with no separate pass over the file.
    for df in classify(pl, lines).collect_batches(chunk_size=BATCH_ROWS):
        yield from tally.batch(df)
    room = EVENT_KEEP - len(ev.events.get("request", ()))
    if tally.received and room > 0:
        # The first few received requests become evidence: a second query that stops as soon as
        # it has them (they come early in any log that has them).
        first = classify(pl, lines, keep_request_text=True).filter(pl.col("rcv")).head(room).collect()
        _examples(ev, "request", display, first, 0)
    tally.finish()


def scan_blocks(blocks, display: str, ev: Evidence, counts, progress=None, follow=None):
    """gzip or stdin: blocks of bytes, each parsed and classified in memory while a thread reads
    (and decompresses) the next. Yields what scan_file yields."""
    _tune_polars()
    import polars as pl
    tally = Tally(pl, display, ev, counts, progress, None, follow)
    base = 0
    for block in _prefetch(_whole_lines(blocks)):
        if progress is not None:
            progress(len(block))
        df = pl.read_csv(block, **CSV)
        if not df.height:      # only empty lines
            n = block.count(b"\n")
            base += n
            counts.lines += n
            continue
        keep = len(ev.events.get("request", ())) < EVENT_KEEP
        frame = classify(pl, df.lazy().with_row_index("n", offset=base + 1), keep_request_text=keep).collect()
        base += df.height
        yield from tally.batch(frame)
        if keep and tally.received:
            _examples(ev, "request", display, frame.filter(pl.col("rcv")), 0)
    tally.finish()


STREAM_BLOCK = 4 << 20     # bytes per in-memory query: large enough to amortise the query


def _whole_lines(blocks):
    """~STREAM_BLOCK bytes of whole lines at a time, as scanner.line_runs cuts them."""
    parts: list[bytes] = []
    size = 0
    for buf, start, end in line_runs(blocks):
        parts.append(buf[start:end] if start or end != len(buf) else buf)
        size += end - start
        if size >= STREAM_BLOCK:
            yield b"".join(parts)
            parts, size = [], 0
    if parts:
        yield b"".join(parts)


def _prefetch(it, depth: int = 2):
    """Run `it` in a thread, `depth` items ahead (zlib and file reads release the GIL, so the
    next block is decompressed while polars works on this one). Its exceptions are re-raised here."""
    import queue
    import threading
    q: queue.Queue = queue.Queue(depth)
    end = object()
    stop = threading.Event()

    def run():
        try:
            for item in it:
                while not stop.is_set():
                    try:
                        q.put((None, item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((None, end))
        except BaseException as e:     # InputError (damaged gzip, read failure) and the like
            q.put((e, None))
    t = threading.Thread(target=run, daemon=True, name="diagnose-read")
    t.start()
    try:
        while True:
            err, item = q.get()
            if err is not None:
                raise err
            if item is end:
                return
            yield item
    finally:
        stop.set()


class Tally:
    """Turns classified batches into evidence: counts, the first examples of each kind, prompt
    heads; yields the keyword lines for the parsers."""

    def __init__(self, pl, display: str, ev: Evidence, counts, progress, size: int | None, follow=None):
        self.pl, self.display, self.ev, self.counts, self.follow = pl, display, ev, counts, follow
        self.progress, self.size, self.done = progress, size, 0
        self.recognised = 0
        self.received = 0

    def batch(self, df):
        pl, ev, counts = self.pl, self.ev, self.counts
        counts.lines += df.height
        if self.progress is not None and self.size is not None and df.height:
            step = min(int(df["nb"].sum()) + df.height, max(0, self.size - self.done))
            self.progress(step)
            self.done += step
        # Counts come from sums and one value count per batch (a group_by over every flag cost
        # 5x more); frames are cut only for evidence still wanted (the first EVENT_KEEP of a kind).
        c = pl.col
        bad, acc, req, rcv, probe = df.select(c("bad").sum(), c("acc").sum(), c("req").sum(),
                                              c("rcv").sum(), c("probe").sum()).row(0)
        counts.unreadable += bad
        self.recognised += acc + req
        refused_rows = c("status").is_in(["503", "429"]) & ~c("probe")
        selectors = {"status": lambda code: c("status") == code, "refused": lambda: refused_rows,
                     "probe": lambda: c("probe")}

        def examples(kind, which, n):
            room = EVENT_KEEP - len(ev.events.get(kind, ()))
            _examples(ev, kind, self.display, df.filter(selectors[which[0]](*which[1:])).head(room) if room > 0 else None, n)
        status = df["status"].drop_nulls().value_counts().iter_rows() if acc else ()
        refused = df.select(refused_rows.sum()).item() if acc else 0
        tally_access(ev, acc, req, status, refused, probe, examples)
        if rcv:
            self.received += rcv
            ev.event_counts["request"] = ev.event_counts.get("request", 0) + rcv
            heads = df["head"].drop_nulls()
            if len(ev.prompt_prefixes) + len(heads) <= MAX_PREFIXES:
                # Order only matters once the bounded table fills up.
                vc = heads.value_counts()
                _prompt_heads(ev, (vc.to_series(0).to_list(), vc.to_series(1).to_list()))
            else:
                _prompt_heads(ev, df.group_by("head", maintain_order=True).len().drop_nulls("head").iter_rows())
        yield from self._lines_for_parsers(df)

    def _lines_for_parsers(self, df):
        """The keyword lines, and, while a parser is in the middle of a dump a paste wrapped over
        several lines (`follow()`), every line after it, as the block scanner gives them."""
        pl, follow = self.pl, self.follow
        kw = df.filter(pl.col("kw")).select("n", "text").iter_rows()
        if follow is None:
            yield from kw
            return
        others = None       # the lines a dump may continue on; cut from the batch only when needed
        last = 0            # the last line number given out
        while True:
            if follow():
                if others is None:
                    others = df.filter(~pl.col("bad") & ~pl.col("acc") & ~pl.col("req")).select("n", "text")
                i = others["n"].search_sorted(last + 1)
                if i < others.height:
                    row = others.row(i)
                    yield row
                    last = row[0]
                    continue
                return          # the dump goes on in the next batch
            row = next(kw, None)
            while row is not None and row[0] <= last:
                row = next(kw, None)
            if row is None:
                return
            yield row
            last = row[0]

    def finish(self) -> None:
        if self.progress is not None and self.size is not None:
            self.progress(max(0, self.size - self.done))
        self.counts.bulk_recognised = getattr(self.counts, "bulk_recognised", 0) + self.recognised


def _prompt_heads(ev: Evidence, rows) -> None:  # rows: (head bytes, times)
    """Count prompt heads exactly as common_lines.note_prompt does line by line: heads in order of
    first appearance, so the bounded table keeps the same ones and the overflow counts the rest."""
    seen = ev.prompt_prefixes
    if isinstance(rows, tuple):      # distinct heads and their counts, far from the table's bound
        heads, times = rows
        get = seen.get
        seen.update({k: get(k, 0) + n for k, n in zip(map(head_key, heads), times)})
        return
    for h, n in rows:
        count_head(ev, head_key(h), int(n))


def tally_access(ev: Evidence, acc: int, req: int, status, refused: int, probe: int, examples) -> None:
    """What the access and request lines a bulk reader counted (and did not parse) become in the
    evidence, for the C scanner and polars alike, as common_lines makes of them line by line:
    `access_lines`, `status_NNN`, examples of 5xx/429 answers, refusals (503/429 to a request,
    not to a health probe), probes; `request_lines`. status: (three-digit code, lines) pairs;
    examples(kind, which, total) keeps the first lines of a kind, `which` being
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


def _examples(ev: Evidence, kind: str, display: str, frame, total: int) -> None:
    rows = ()
    if frame is not None and len(ev.events.get(kind, ())) < EVENT_KEEP:
        col = "text" if "text" in frame.columns else frame.columns[-1]
        rows = frame.select("n", col).head(EVENT_KEEP).iter_rows()
    note_examples(ev, kind, display, rows, total)
