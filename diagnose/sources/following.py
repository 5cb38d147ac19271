"""`--follow`: each followed file is read once, then at each pass only the bytes appended since.

The reading of a text log stays open between passes (loading.LineRead): what was appended is fed
to it as more lines, numbered on from the last, and each pass's report is made from a copy of it,
finished there. A pass costs the appended bytes and the copy, not the whole file again.

Read from the start again, as a new file: one that was replaced (another inode), truncated or
rewritten (smaller than what was read, or its first bytes changed), which is how rotation shows.
Read whole at every pass, as without --follow: a gzip file, a UTF-16 one (or with a BOM), and a
whole-file format (a JSON or YAML document). A last line without its newline is being written:
each pass reads it into its copy only, and the reading takes it once its newline came. A followed
file is a server's own output, not a paste: hard-wrapped lines are not looked for (readers/unwrap.py).
"""
from __future__ import annotations

import os

from .readers.files import BLOCK, Input, InputError

HEAD = 4096     # the first bytes of a followed file, compared at each pass: rewritten from the start?


class Following:
    """The files followed by one `--follow` run, by path."""

    def __init__(self) -> None:
        self.files: dict[str, _Followed] = {}

    def read(self, inp: Input, year):
        f = self.files.get(inp.path)
        if f is None or f.year != year:
            f = self.files[inp.path] = _Followed(year)
        return f.read(inp)


class _Window(Input):
    """A followed file's bytes from `start` to `end` (both at a line's start): its blocks are only
    those, so no reader opens the file itself (readers/bulk.file_behind)."""
    window = True
    start = 0
    end = 0

    def _raw(self):
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise InputError(f"{self.display}: no such file") from None
        except OSError as e:
            raise InputError(f"{self.display}: cannot open ({e.strerror})") from None
        try:
            at = self.start
            while at < self.end:
                b = os.pread(fd, min(BLOCK, self.end - at), at)
                if not b:
                    break
                at += len(b)
                yield b
        finally:
            os.close(fd)


class _Followed:
    def __init__(self, year) -> None:
        self.year = year
        self.state = None           # loading.LineRead, once the file was read as a text log
        self.ident = None           # (device, inode) it was read from
        self.head = b""
        self.win: _Window | None = None

    def read(self, inp: Input):
        from . import loading
        try:
            fd = os.open(inp.path, os.O_RDONLY)
        except OSError:
            return loading._read(inp, self.year, None, False, None)     # says what is wrong, as without --follow
        try:
            st = os.fstat(fd)
            head = os.pread(fd, HEAD, 0)
            w = self.win
            if (self.state is None or (st.st_dev, st.st_ino) != self.ident or w is None or st.st_size < w.end
                    or head[:len(self.head)] != self.head):
                return self._from_start(inp, fd, st, head)
            end = _line_end(fd, w.end, st.st_size)
            if end > w.end:
                w.start, w.end = w.end, end
                self.state.feed(b"", w.blocks())
            return self.state.snapshot(_tail(w, st.st_size))
        finally:
            os.close(fd)

    def _from_start(self, inp: Input, fd: int, st, head: bytes):
        from . import loading
        self.state, self.win = None, None
        if head[:2] in (b"\x1f\x8b", b"\xff\xfe", b"\xfe\xff") or head[:3] == b"\xef\xbb\xbf":
            return loading._read(inp, self.year, None, False, None)         # gzip, UTF-16, a BOM: whole
        w = _Window(inp.path, inp.display)
        w.start, w.end = 0, _line_end(fd, 0, st.st_size)
        if w.end == 0:                  # not one whole line yet
            return loading._read(inp, self.year, None, False, None)
        keep = _Keep()
        keep.tail = _tail(w, st.st_size)
        r = loading._read(w, self.year, None, False, None, keep)
        if keep.state is None:
            # a whole-file format: read whole, as without --follow
            return loading._read(inp, self.year, None, False, None) if w.end < st.st_size else r
        self.state, self.win = keep.state, w
        self.ident, self.head = (st.st_dev, st.st_ino), head[:min(len(head), w.end)]
        return r


class _Keep:
    """What loading._read gives back besides the Read: the reading, kept open (`tail`: the blocks of
    a last line still being written, read into the first pass's copy only)."""
    state = None
    tail = None


def _tail(w: _Window, size: int):
    """The blocks of a last line still being written (after `w`), or None: read into each pass's
    copy, and into the reading itself once its newline came."""
    if size <= w.end:
        return None
    t = _Window(w.path, w.display)
    t.start, t.end = w.end, size
    return t.blocks()


def _line_end(fd: int, start: int, size: int) -> int:
    """Where the last complete line of the bytes from `start` to `size` ends (`start` when none does)."""
    at = size
    while at > start:
        lo = max(start, at - BLOCK)
        nl = os.pread(fd, at - lo, lo).rfind(b"\n")
        if nl >= 0:
            return lo + nl + 1
        at = lo
    return start
