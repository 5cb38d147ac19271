"""Which reader takes a big log, and how it is read: where the file behind an input is (a plain
file, or the one stdin was redirected from, is read by the C reader itself), and whether the C
reader was built at install (`native_lib`). A big log is read in segments (segments.py), its
access and request lines counted rather than parsed; where the C reader is missing, the Python
reader (scanner.segments) does the same, several times slower.
"""
from __future__ import annotations

import os

# From here the bulk path is faster than reading every line (a 10 MB log: 0.47 s against 1.17 s) and
# holds less (35 against 72 MB); it estimates the share of lines understood from samples (the
# evidence is the same: tests/test_readers_agree.py). The real logs of the corpus are all below it.
DEFAULT_FAST_MIN_BYTES = 4 * 1024 * 1024
FAST_MIN_BYTES = int(os.environ.get("DIAGNOSE_BULK_MIN_BYTES", DEFAULT_FAST_MIN_BYTES))

# The C reader (native/) when the install has it; the Python reader otherwise (tests switch this off).
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
    if getattr(inp, "window", False):
        return None         # a part of a followed file (following.py): only its blocks
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
    """A plain file big enough for the bulk path (`head`: its first decompressed bytes)."""
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
