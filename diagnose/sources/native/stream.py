"""Reading a log through the C scanner.

`Producer`: a thread reads blocks (file reads and gzip release the GIL), worker threads scan them
in C (ctypes releases the GIL), and the segments queue up, in order and bounded, for the parsers'
thread. `scan`: turns segments into evidence, as bulk.Tally does for polars' batches, and yields
the lines the parsers must see.
"""
from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from . import ROW_HTTP, ROW_KEYWORD, ROW_PROBE, ROW_RECEIVED, Heads, load
from . import scan as scan_segment

WORKERS = max(1, min(4, os.cpu_count() or 1))
AHEAD_BYTES = 32 << 20      # scanned blocks that may wait for the parsers


class Producer:
    """Segments of `blocks`, scanned in order on worker threads."""

    def __init__(self, lib, blocks):
        self.lib, self.blocks = lib, blocks
        self.cv = threading.Condition()
        self.q: deque = deque()
        self.held = 0
        self.done = self.closed = False
        self.error: BaseException | None = None
        threading.Thread(target=self._run, daemon=True, name="diagnose-read").start()

    def _run(self) -> None:
        from ...evidence.model import EVENT_KEEP
        ahead: deque = deque()
        try:
            with ThreadPoolExecutor(WORKERS, thread_name_prefix="diagnose-scan") as pool:
                for buf, start, end in _segments(self.blocks):
                    ahead.append(pool.submit(scan_segment, self.lib, buf, start, end, EVENT_KEEP))
                    while len(ahead) > WORKERS:
                        if not self._put(ahead.popleft().result()):
                            return
                while ahead:
                    if not self._put(ahead.popleft().result()):
                        return
        except BaseException as e:      # InputError (read failure, damaged gzip) and the like
            self.error = e
        finally:
            for f in ahead:
                f.cancel()
            with self.cv:
                self.done = True
                self.cv.notify_all()

    def _put(self, seg) -> bool:
        with self.cv:
            while self.held >= AHEAD_BYTES and not self.closed:
                self.cv.wait()
            if self.closed:
                return False
            self.q.append(seg)
            self.held += len(seg.buf)
            self.cv.notify_all()
        return True

    def __iter__(self):
        while True:
            with self.cv:
                while not self.q and not self.done:
                    self.cv.wait()
                if self.q:
                    seg = self.q.popleft()
                    self.held -= len(seg.buf)
                    self.cv.notify_all()
                elif self.error is not None:
                    raise self.error
                else:
                    return
            yield seg

    def close(self) -> None:
        with self.cv:
            self.closed = True
            self.cv.notify_all()


def _segments(blocks):
    """(buffer, start, end): runs of whole lines, without copying the blocks. The line a block's
    end cuts is joined into a small buffer of its own; a last line without newline gets one."""
    tail: list[bytes] = []
    for b in blocks:
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


# ---- the consumer ----

def scan(prod: Producer, display: str, ev, counts, progress=None, follow=None):
    """Evidence from the producer's segments; yields (line number, text) for the parsers, as
    bulk.scan_file does. Closes the producer when done or abandoned."""
    # polars (for the evidence series) is imported after the scan, not beside it: its import holds
    # the GIL, and the threads feeding the scan then wait for it (measured: a slower run).
    out = _Tally(display, ev, counts, follow)
    try:
        for seg in prod:
            if progress is not None:
                progress(seg.end - seg.start)
            yield from out.segment(seg)
    finally:
        prod.close()
    out.finish()


class _Tally:
    def __init__(self, display: str, ev, counts, follow):
        self.display, self.ev, self.counts, self.follow = display, ev, counts, follow
        self.heads = None       # prompt heads, counted in C once a request comes
        self.base = 0           # lines before the segment at hand
        self.last = 0           # the last line number given to the parsers
        self.recognised = 0

    def segment(self, seg):
        from .. import bulk
        ev, base = self.ev, self.base
        self.counts.lines += seg.lines
        self.counts.unreadable += seg.bad
        self.recognised += seg.acc + seg.req
        if seg.acc:
            ev.count("access_lines", seg.acc)
            for code, n in seg.status:
                ev.count(f"status_{code:03d}", n)
                if code // 100 == 5 or code == 429:
                    self._examples(f"http_{code:03d}", [r for r in seg.rows if r[0] == ROW_HTTP and r[4] == code], n)
            if seg.probe:
                ev.count("access_probe_lines", seg.probe)
                self._examples("access_probe", [r for r in seg.rows if r[0] == ROW_PROBE], seg.probe)
        if seg.req:
            ev.count("request_lines", seg.req)
        if seg.rcv:
            self._examples("request", [r for r in seg.rows if r[0] == ROW_RECEIVED], seg.rcv)
            if seg.heads:
                if self.heads is None:
                    self.heads = Heads(load(), bulk.MAX_PREFIXES, ev.prompt_prefixes)
                for run in seg.heads:
                    self.heads.add(*run)
        yield from self._lines_for_parsers(seg, [r for r in seg.rows if r[0] == ROW_KEYWORD])
        self.base = base + seg.lines

    def _examples(self, kind: str, rows, total: int) -> None:
        from ..bulk import note_examples
        base = self.base
        note_examples(self.ev, kind, self.display,
                      ((base + r[1] + 1, r[2].decode("utf-8", "replace")) for r in rows), total)

    def _lines_for_parsers(self, seg, kw):
        """The keyword lines; and while a parser is in the middle of a dump a paste wrapped over
        several lines (`follow()`), the next lines whatever they hold, as the block scanner gives
        them (unreadable ones skipped)."""
        follow, base, last = self.follow, self.base, self.last
        # Where the line after `last` starts in the segment's buffer, when known.
        at = seg.start if last == base else None
        it = iter(kw)
        while True:
            if follow is not None and at is not None and follow():
                if at >= seg.end:
                    break               # the dump goes on in the next segment
                raw = self._line_at(seg, at)
                at += len(raw) + 1
                last += 1
                self.last = last
                if b"\x00" not in raw:
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError:
                        continue
                    yield last, text
                continue
            row = next(it, None)
            if row is None:
                break
            n = base + row[1] + 1
            if n <= last:
                continue
            last, at = n, row[3] + 1
            self.last = last
            yield n, row[2].decode("utf-8", "replace")
        self.last = last

    @staticmethod
    def _line_at(seg, at: int) -> bytes:
        """The line that starts at `at`, without its newline."""
        end = seg.buf.find(b"\n", at, seg.end)
        return seg.buf[at: end if end >= 0 else seg.end]

    def finish(self) -> None:
        self.counts.bulk_recognised = getattr(self.counts, "bulk_recognised", 0) + self.recognised
        if self.heads is not None:
            overflow = self.heads.into(self.ev.prompt_prefixes)
            if overflow:
                self.ev.count("prompt_prefixes_overflow", overflow)
