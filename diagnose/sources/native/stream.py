"""Reading a log through the C scanner.

`Producer`: worker threads scan in C (ctypes releases the GIL) either byte ranges of a plain file,
which C reads itself, or blocks a thread reads (gzip and pipes: zlib and reads release the GIL);
the segments queue up, in order and bounded, for the parsers' thread. `scan`: turns segments into evidence, as bulk.Tally does for polars' batches, and yields
the lines the parsers must see.
"""
from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from ..bulk import STDIN_PATH
from ..scanner import line_runs
from . import ROW_HTTP, ROW_KEYWORD, ROW_PROBE, ROW_RECEIVED, Heads, load, scan_range
from . import scan as scan_segment

WORKERS = max(1, min(4, os.cpu_count() or 1))
AHEAD_BYTES = 32 << 20      # scanned blocks that may wait for the parsers


RANGE_BYTES = 32 << 20      # a plain file is scanned in ranges of this size, in order


class Producer:
    """Segments of `blocks` (or, with `path`, of that plain file, read by C itself), scanned in
    order on worker threads."""

    def __init__(self, lib, blocks=None, path: str | None = None, display: str | None = None):
        self.lib, self.blocks = lib, blocks
        self.cv = threading.Condition()
        self.q: deque = deque()
        self.held = 0
        self.done = self.closed = False
        self.error: BaseException | None = None
        self.path, self.display = path, display or path
        self.text_fd = None
        if path is not None:
            # The parsers' thread reads evidence text through a descriptor of its own; the workers'
            # one is closed by the thread that runs them, once they are all done.
            self.text_fd = _open(path, self.display)
        threading.Thread(target=self._run, daemon=True, name="diagnose-read").start()

    def _tasks(self, keep: int):
        """(function, args) per segment, in line order."""
        if self.path is None:
            for buf, start, end in line_runs(self.blocks):
                yield scan_segment, (self.lib, buf, start, end, keep)
            return
        fd = self.work_fd = _open(self.path, self.display)
        size = os.fstat(fd).st_size
        for a in range(0, size, RANGE_BYTES):
            yield _scan_range, (self.lib, fd, a, min(a + RANGE_BYTES, size), size, keep, self.text_fd, self.display)

    def _run(self) -> None:
        from ...evidence.model import EVENT_KEEP
        ahead: deque = deque()
        self.work_fd = None
        try:
            with ThreadPoolExecutor(WORKERS, thread_name_prefix="diagnose-scan") as pool:
                try:
                    for fn, args in self._tasks(EVENT_KEEP):
                        ahead.append(pool.submit(fn, *args))
                        while len(ahead) > WORKERS:
                            if not self._put(ahead.popleft().result()):
                                return
                    while ahead:
                        if not self._put(ahead.popleft().result()):
                            return
                finally:
                    for f in ahead:
                        f.cancel()
        except BaseException as e:      # InputError (read failure, damaged gzip) and the like
            self.error = e
        finally:
            # The pool has waited for its workers here: nothing reads the descriptor any more.
            if self.work_fd is not None:
                os.close(self.work_fd)
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
            self.held += seg.weight()
            self.cv.notify_all()
        return True

    def __iter__(self):
        while True:
            with self.cv:
                while not self.q and not self.done:
                    self.cv.wait()
                if self.q:
                    seg = self.q.popleft()
                    self.held -= seg.weight()
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
        if self.text_fd is not None:
            os.close(self.text_fd)
            self.text_fd = None


def _open(path: str, display: str) -> int:
    from ..reader import InputError
    try:
        if path == STDIN_PATH:      # bulk.file_behind's name for stdin
            # stdin itself, not the file opened again by name: that would check permissions the
            # shell's redirect already passed (`sudo -u svc diagnose - < file`). pread ignores
            # the shared offset.
            return os.dup(0)
        return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputError(f"{display}: cannot open ({e.strerror})") from None


def _scan_range(lib, fd, a, b, size, keep, text_fd, display):
    from ..reader import InputError
    try:
        return scan_range(lib, fd, a, b, size, keep, text_fd)
    except OSError as e:
        raise InputError(f"{display}: read failed ({e.strerror or e})") from None


# ---- the consumer ----

def scan(prod: Producer, display: str, ev, counts, progress=None, follow=None):
    """Evidence from the producer's segments; yields (line number, text) for the parsers, as
    bulk.scan_file does. Closes the producer when done or abandoned."""
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

        def rows(which):
            if which[0] == "status":
                code = int(which[1])
                return [r for r in seg.rows if r[0] == ROW_HTTP and r[4] == code]
            if which[0] == "probe":
                return [r for r in seg.rows if r[0] == ROW_PROBE]
            probes = {r[1] for r in seg.rows if r[0] == ROW_PROBE}
            return [r for r in seg.rows if r[0] == ROW_HTTP and r[4] in (503, 429) and r[1] not in probes]
        bulk.tally_access(ev, seg.acc, seg.req, [(f"{code:03d}", n) for code, n in seg.status], seg.refused,
                          seg.probe, lambda kind, which, n: self._examples(seg, kind, rows(which), n))
        if seg.rcv:
            self._examples(seg, "request", [r for r in seg.rows if r[0] == ROW_RECEIVED], seg.rcv)
            if seg.heads:
                if self.heads is None:
                    self.heads = Heads(load(), bulk.MAX_PREFIXES, ev.prompt_prefixes)
                for run in seg.heads:
                    self.heads.add(*run)
        yield from self._lines_for_parsers(seg, [r for r in seg.rows if r[0] == ROW_KEYWORD])
        self.base = base + seg.lines

    def _examples(self, seg, kind: str, rows, total: int) -> None:
        from ..bulk import note_examples
        base = self.base
        note_examples(self.ev, kind, self.display,
                      ((base + r[1] + 1, seg.text(r[2], r[3]).decode("utf-8", "replace")) for r in rows), total)

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
                raw = seg.line_at(at)
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
            yield n, seg.text(row[2], row[3]).decode("utf-8", "replace")
        self.last = last

    def finish(self) -> None:
        self.counts.bulk_recognised = getattr(self.counts, "bulk_recognised", 0) + self.recognised
        if self.heads is not None:
            overflow = self.heads.into(self.ev.prompt_prefixes)
            if overflow:
                self.ev.count("prompt_prefixes_overflow", overflow)
