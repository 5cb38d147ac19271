"""A progress bar on stderr while a big input is read (only when stderr is a terminal)."""
from __future__ import annotations

import os

from .files import Input


PROGRESS_MIN_BYTES = int(os.environ.get("DIAGNOSE_PROGRESS_MIN_BYTES", 100 * 1024 * 1024))

class _Bar:
    """A progress bar on stderr for big inputs, only when stderr is a terminal."""

    def __init__(self, name: str, total: int) -> None:
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
        from rich.console import Console
        self.p = Progress("[dim]{task.description}", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                          console=Console(stderr=True), transient=True)
        self.p.start()
        from rich.markup import escape
        from ...values import printable
        self.task = self.p.add_task(escape(printable(name)), total=total)   # a file name is no markup, no escape sequence

    def advance(self, n: int) -> None:
        self.p.advance(self.task, n)

    def set(self, done: int) -> None:
        self.p.update(self.task, completed=done)

    def close(self) -> None:
        self.p.stop()

def progress_bar(inp: Input):
    import sys
    if inp.path == "-" or not sys.stderr.isatty():
        return None
    try:
        size = os.path.getsize(inp.path)
    except OSError:
        return None
    return _Bar(inp.display, size) if size >= PROGRESS_MIN_BYTES else None

def advancer(bar, inp: Input):
    """How the bar moves: by the bytes read, or for a gzip file by the compressed bytes read (its
    size on disk is the bar's total)."""
    if bar is None:
        return None
    return lambda n: bar.set(inp.raw_pos) if inp.compressed else bar.advance(n)

def counted(blocks, advance):
    for b in blocks:
        advance(len(b))
        yield b
