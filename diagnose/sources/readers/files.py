"""Opening what the user named: files, globs, `-` for stdin, gzip by content.

Only errors about the input itself live here; they become exit 2 with one line naming the input.
"""
from __future__ import annotations

import codecs
import glob
import gzip
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

BLOCK = 4 * 1024 * 1024  # large binary blocks: the scanner works per block, not per line
# A gzip input that grows past BOMB_MIN_BYTES and more than BOMB_RATIO times its compressed size
# is refused: real logs compress 5-50 times; gzip's ceiling, ~1000 times, is reached by runs of
# one byte (a bomb of zeros).
BOMB_MIN_BYTES = 64 << 20
BOMB_RATIO = 250


class InputError(Exception):
    """A problem with an input the user named; printed as one line, exit 2."""


@dataclass
class Input:
    path: str        # as the user wrote it (or "<stdin>")
    display: str     # what evidence cites
    compressed = False
    raw_pos = 0      # bytes of the file read so far, when it is compressed
    stdin_at = None  # `-`: where stdin stood before the first read, when it is seekable
    started = None   # the C scanner's run over it, when started ahead (sources.start_scans)

    shrank = None        # (size when opened, bytes read) when the file was cut while it was read
    transcoded = False   # UTF-16 (or a UTF-8 BOM) turned into plain UTF-8: the file's bytes are not the text

    def blocks(self) -> Iterator[bytes]:
        return self._text(self._raw())

    def _text(self, raw: Iterator[bytes]) -> Iterator[bytes]:
        """UTF-8 blocks whatever the file's encoding: Windows PowerShell's `>` writes UTF-16 with a
        byte-order mark, and Notepad a UTF-8 one. Both are text logs, not binary files."""
        first = next(raw, b"")
        if first[:2] in (b"\xff\xfe", b"\xfe\xff"):
            self.transcoded = True
            dec = codecs.getincrementaldecoder("utf-16")("replace")
            yield dec.decode(first).encode("utf-8")
            for b in raw:
                yield dec.decode(b).encode("utf-8")
            yield dec.decode(b"", final=True).encode("utf-8")
            return
        if first[:3] == b"\xef\xbb\xbf":
            self.transcoded = True
            first = first[3:]
        if first:
            yield first
        yield from raw

    def _raw(self) -> Iterator[bytes]:
        if self.path == "-":
            try:
                self.stdin_at = os.lseek(sys.stdin.fileno(), 0, os.SEEK_CUR)
            except (OSError, ValueError, AttributeError):   # a pipe, a terminal, no descriptor
                self.stdin_at = None
                _widen_pipe(sys.stdin)
            yield from _read_blocks(sys.stdin.buffer, self.display)
            return
        try:
            fh = open(self.path, "rb")
        except PermissionError:
            raise InputError(f"{self.display}: permission denied") from None
        except FileNotFoundError:
            raise InputError(f"{self.display}: no such file") from None
        except OSError as e:
            raise InputError(f"{self.display}: cannot open ({e.strerror})") from None
        with fh:
            head = fh.peek(2)[:2] if hasattr(fh, "peek") else b""
            if head == b"\x1f\x8b":
                gz = gzip.GzipFile(fileobj=fh)
                self.compressed = True
                out = 0
                try:
                    for b in _read_blocks(gz, self.display):
                        self.raw_pos = fh.tell()    # compressed bytes read: what a progress bar shows
                        out += len(b)
                        if out > BOMB_MIN_BYTES and out > BOMB_RATIO * self.raw_pos:
                            raise InputError(f"{self.display}: expands more than {BOMB_RATIO} times when decompressed "
                                             f"(a decompression bomb?): not read further")
                        yield b
                except (OSError, EOFError) as e:
                    raise InputError(f"{self.display}: damaged gzip stream ({e})") from None
            else:
                try:
                    at_open = os.fstat(fh.fileno()).st_size
                except (OSError, AttributeError, ValueError):     # no descriptor behind it
                    at_open = None
                read = 0
                for b in _read_blocks(fh, self.display):
                    read += len(b)
                    yield b
                if at_open is not None and read < at_open:
                    self.shrank = (at_open, read)


PIPE_BYTES = 1 << 20


def _widen_pipe(f) -> None:
    """Ask for a 1 MB pipe buffer (Linux's default is 64 KB): the writer (`kubectl logs`, `cat`)
    and this reader then wake each other 16 times less often; a gigabyte through a pipe is read
    in about two thirds of the time. Whatever refuses it (not Linux, not a pipe, a lower
    /proc/sys/fs/pipe-max-size) leaves the pipe as it was."""
    try:
        import fcntl
        fd = f.fileno()
        if fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < PIPE_BYTES:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError, ValueError):
        pass


def _read_blocks(fh, display: str) -> Iterator[bytes]:
    while True:
        try:
            b = fh.read(BLOCK)
        except OSError as e:
            raise InputError(f"{display}: read failed ({e.strerror or e})") from None
        if not b:
            return
        yield b


def resolve(paths: list[str]) -> list[Input]:
    """Expand globs and check each path; raises InputError for the first bad one."""
    out: list[Input] = []
    if not paths:
        raise InputError("no input given (pass a log file, several files, a glob, or - for stdin)")
    for p in paths:
        if p == "-":
            out.append(Input("-", "<stdin>"))
            continue
        if glob.has_magic(p) and not os.path.exists(p):
            matches = sorted(m for m in glob.glob(p, recursive=True) if os.path.isfile(m))
            if not matches:
                raise InputError(f"{p}: the pattern matches no file")
            out.extend(Input(m, m) for m in matches)
            continue
        if os.path.isdir(p):
            # A directory of logs (several engines, several replicas): every file inside.
            files = sorted(os.path.join(d, f) for d, dirs, fs in os.walk(p)
                           for f in fs if not f.startswith(".")
                           if not any(part.startswith(".") for part in os.path.relpath(d, p).split(os.sep) if part != "."))
            if not files:
                raise InputError(f"{p}: directory holds no files")
            out.extend(Input(f, f) for f in files)
            continue
        if not os.path.exists(p):
            raise InputError(f"{p}: no such file")
        if not os.access(p, os.R_OK):
            raise InputError(f"{p}: permission denied")
        out.append(Input(p, p))
    return out


def read_ahead(it, depth: int = 2):
    """Run `it` in a thread, `depth` items ahead (zlib and file reads release the GIL, so the
    next block is read and decompressed while this one is scanned). Its exceptions are re-raised here."""
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
