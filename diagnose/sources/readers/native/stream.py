"""Reading a log through the C scanner.

`Producer`: worker threads scan in C (ctypes releases the GIL) either byte ranges of a plain file,
which C reads itself, or blocks a thread reads (gzip and pipes: zlib and reads release the GIL);
the segments queue up, in order and bounded, for the parsers' thread, which reads them as it
reads the Python reader's (segments.read).
"""
from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from ..bulk import STDIN_PATH
from ..scanner import line_runs
from . import scan_range
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
        self.shrank = None      # (size when opened, size at the end) when the file was cut meanwhile
        self.text_fd = None
        if path is not None:
            # The parsers' thread reads evidence text through a descriptor of its own; the workers'
            # one is closed by the thread that runs them, once they are all done.
            self.text_fd = _open(path, self.display)
        self.thread = threading.Thread(target=self._run, daemon=True, name="diagnose-read")
        self.thread.start()

    def _tasks(self, keep: int):
        """(function, args) per segment, in line order."""
        if self.path is None:
            for buf, start, end, cut in line_runs(self.blocks, self.display or "input"):
                yield _scan_block, (self.lib, buf, start, end, keep, cut)
            return
        fd = self.work_fd = _open(self.path, self.display)
        size = os.fstat(fd).st_size
        for a in range(0, size, RANGE_BYTES):
            yield _scan_range, (self.lib, fd, a, min(a + RANGE_BYTES, size), size, keep, self.text_fd, self.display)
        now = os.fstat(fd).st_size
        if now < size:          # cut while it was read (a rotation by copy and truncate)
            self.shrank = (size, now)

    def _run(self) -> None:
        from ....evidence.model import EVENT_KEEP
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
        if isinstance(seg, list):       # a file range: its segments, in order
            return all(self._put(s) for s in seg)
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

    def join(self) -> None:
        """Wait for the workers, once closed: the ranges they were scanning end first."""
        self.thread.join()


def _open(path: str, display: str) -> int:
    from ..files import InputError
    try:
        if path == STDIN_PATH:      # bulk.file_behind's name for stdin
            # stdin itself, not the file opened again by name: that would check permissions the
            # shell's redirect already passed (`sudo -u svc diagnose - < file`). pread ignores
            # the shared offset.
            return os.dup(0)
        return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputError(f"{display}: cannot open ({e.strerror})") from None


def _scan_block(lib, buf, start, end, keep, cut):
    seg = scan_segment(lib, buf, start, end, keep)
    seg.cut = cut
    return seg


def _scan_range(lib, fd, a, b, size, keep, text_fd, display):
    from ..files import InputError
    try:
        return scan_range(lib, fd, a, b, size, keep, text_fd, display)
    except OSError as e:
        raise InputError(f"{display}: read failed ({e.strerror or e})") from None
