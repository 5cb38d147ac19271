"""What an input is, from its first bytes: a whole-file format (formats.whole_kind), or text, read
line by line region by region whatever its first lines are. The head is judged without its
unreadable lines, which every reader skips."""
from __future__ import annotations

import os
import stat

from .formats import whole_kind
from .readers.files import Input
from .readers.unreadable import blank_unreadable

SNIFF_BYTES = 512 * 1024

__all__ = ["SNIFF_BYTES", "sniff_head", "is_log", "endless_binary", "binary_head", "whole_kind"]

# Bytes of text: printable ASCII, tab, newlines, form feed, backspace, escape (colour codes) and
# every byte of a multi-byte UTF-8 character (whether they form one is checked apart).
_TEXT_BYTES = bytes(range(0x20, 0x7f)) + b"\t\n\r\x0b\x0c\x08\x1b" + bytes(range(0x80, 0x100))
BINARY_SHARE = 0.25


def sniff_head(first: bytes) -> bytes:
    # One damaged line (a `vllm:…` metric cut by a NUL at the top of an SGLang log) must not
    # decide what the whole input is.
    return blank_unreadable(first[:SNIFF_BYTES])[0] if first else b""


def is_log(first: bytes) -> bool:
    """Whether an input that starts with `first` is read as text, line by line (not whole)."""
    return not first or whole_kind(sniff_head(first)) is None


def binary_head(first: bytes) -> bool:
    """Whether an input is binary from its first 8 KiB: a quarter or more of it NUL or other
    control bytes, or bytes that are no UTF-8 (a core dump, an image, a NUL-filled file, a gzip
    bomb of zeros). Refused before it is read further: a text log with a damaged line or two is
    far from that. Only the very start: a real log padded with NUL bytes after its first lines
    (a node that crashed while writing) is read, its NUL lines counted as unreadable."""
    sample = first[:8192]
    if not sample:
        return False
    odd = len(sample.translate(None, _TEXT_BYTES))
    if not sample.isascii():
        odd += sample.decode("utf-8", "replace").count("\ufffd")
    return odd >= BINARY_SHARE * len(sample)


def endless_binary(inp: Input, first: bytes) -> bool:
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
